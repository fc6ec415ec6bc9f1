# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
name: training_report
type: aggregate
short_description: Live training progress, a verdict table and report files (JSON, JUnit, HTML)
version_added: 0.1.0
description:
  - While M(clusterval.training.training_watch) is retried, prints one line per node per poll,
    for example C([node1] step 12/29  8672 tok/s/gpu  loss 10.374  ETA 0:01:12).
  - When M(clusterval.training.training_assert) returns, writes C(results.json), C(junit.xml) and a
    self-contained C(report.html) (inline SVG loss and throughput curves, readable offline, marked
    SIMULATED when the simulator was used) into the C(run_dir) of its result, and prints the verdict
    table at once; the verdict and the report paths are repeated at the end of the playbook.
  - Observes only, because a callback cannot fail a play; M(clusterval.training.training_assert) does.
    The metrics reach ansible-runner and AWX through the run-level C(ansible_stats) that
    M(clusterval.training.training_assert) returns.
  - Enable it with C(callbacks_enabled = clusterval.training.training_report) in C(ansible.cfg).
requirements:
  - enabled in configuration (C(callbacks_enabled))
"""

import datetime
import math
import os
import time
from typing import Any, Dict, Optional

from ansible.plugins.callback import CallbackBase

from ansible_collections.clusterval.training.plugins.module_utils._report import write_reports

WATCH = "training_watch"
ASSERT = "training_assert"
# Up to this many nodes, a progress line per node per poll; above, one line for the cluster.
PER_NODE_LINES_MAX = 8
SUMMARY_INTERVAL_S = 10.0


def result_data(result: Any) -> Dict[str, Any]:
    data = getattr(result, "result", None)
    if not isinstance(data, dict):
        data = getattr(result, "_result", {})
    return data if isinstance(data, dict) else {}


def task_action(result: Any) -> str:
    task = getattr(result, "task", None) or getattr(result, "_task", None)
    return str(getattr(task, "action", "") or "")


def host_name(result: Any) -> str:
    host = getattr(result, "host", None) or getattr(result, "_host", None)
    return host.get_name() if host is not None else "?"


def format_eta(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        return "-:--:--"
    return str(datetime.timedelta(seconds=int(seconds)))


def progress_line(host: str, data: Dict[str, Any]) -> str:
    progress = data.get("progress") or {}
    step = progress.get("step")
    final = progress.get("final_step")
    parts = ["[%s] step %s/%s" % (data.get("host") or host, "-" if step is None else step, "?" if final is None else final)]
    rate = progress.get("tokens_per_sec")
    parts.append("%.0f tok/s/gpu" % rate if isinstance(rate, (int, float)) else "- tok/s/gpu")
    loss = progress.get("loss")
    parts.append("loss %.3f" % loss if isinstance(loss, (int, float)) else "loss -")
    parts.append("ETA %s" % format_eta(progress.get("eta_s")))
    if data.get("done"):
        parts.append("done (%s)" % (data.get("reason") or "?"))
    return "  ".join(parts)


def progress_summary(latest: Dict[str, Dict[str, Any]]) -> str:
    """One line for the whole cluster: step range, slowest node, median rate and loss, ETA."""
    progress = {host: data.get("progress") or {} for host, data in latest.items()}
    steps = {host: p["step"] for host, p in progress.items() if isinstance(p.get("step"), (int, float))}
    finals = [p["final_step"] for p in progress.values() if p.get("final_step") is not None]
    parts = ["[progress] %d nodes" % len(latest)]
    if steps:
        ordered = sorted(steps.values())
        slowest = min(steps, key=lambda host: (steps[host], host))
        parts.append("step %s..%s/%s (median %s), slowest %s" % (
            ordered[0], ordered[-1], max(finals) if finals else "?", ordered[len(ordered) // 2], slowest))
    for key, fmt in (("tokens_per_sec", "%.0f tok/s/gpu median"), ("loss", "loss %.3f median")):
        values = sorted(p[key] for p in progress.values() if isinstance(p.get(key), (int, float)))
        if values:
            parts.append(fmt % values[len(values) // 2])
    etas = [p["eta_s"] for p in progress.values() if isinstance(p.get("eta_s"), (int, float))]
    parts.append("ETA %s" % format_eta(max(etas) if etas else None))
    done = [data for data in latest.values() if data.get("done")]
    parts.append("done %d, failed %d" % (len(done), sum(1 for data in done if data.get("failed"))))
    return "  ".join(parts)


def verdict_table(data: Dict[str, Any]) -> str:
    rows = [("node", "check", "metric", "expected", "actual", "status")]
    for check in data.get("checks") or []:
        rows.append(tuple(cell_text(check.get(k)) for k in ("node", "check", "metric", "expected", "actual", "status")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    simulated = " (SIMULATED)" if data.get("simulated") else ""
    lines.append("VERDICT: %s%s" % (data.get("verdict", "?"), simulated))
    return "\n".join(lines)


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)[:40]


def report_document(data: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("verdict", "failures", "checks", "summary", "series", "simulated", "run_id", "config_name", "framework",
            "model", "gpu_arch", "mode", "final_step", "total_steps", "warmup_steps", "straggler_pct", "run_dir")
    document = {key: data.get(key) for key in keys}
    document["generated_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return document


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "clusterval.training.training_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verdict: Optional[Dict[str, Any]] = None
        self.report_paths: Dict[str, str] = {}
        self.latest: Dict[str, Dict[str, Any]] = {}
        self.summary_printed_at = 0.0

    def v2_runner_retry(self, result: Any) -> None:
        if task_action(result).endswith(WATCH):
            self.show_progress(host_name(result), result_data(result))

    def show_progress(self, host: str, data: Dict[str, Any]) -> None:
        """A line per node on small clusters; on large ones a cluster line every few seconds,
        and a node's own line only when it fails."""
        self.latest[data.get("host") or host] = data
        if len(self.latest) <= PER_NODE_LINES_MAX or (data.get("done") and data.get("failed")):
            self._display.display(progress_line(host, data))
            return
        now = time.monotonic()
        if now - self.summary_printed_at >= SUMMARY_INTERVAL_S:
            self.summary_printed_at = now
            self._display.display(progress_summary(self.latest))

    def v2_runner_on_ok(self, result: Any) -> None:
        self.observe(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self.observe(result)

    def observe(self, result: Any) -> None:
        action = task_action(result)
        data = result_data(result)
        if action.endswith(WATCH) and "progress" in data:
            self.show_progress(host_name(result), data)
        elif action.endswith(ASSERT) and "checks" in data:
            self.verdict = data
            self.write_files(data)
            self._display.banner("TRAINING VERDICT")
            self._display.display(verdict_table(data))

    def write_files(self, data: Dict[str, Any]) -> None:
        run_dir = data.get("run_dir") or os.path.join("runs", data.get("run_id") or
                                                      datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
        try:
            self.report_paths = write_reports(run_dir, report_document(dict(data, run_dir=run_dir)))
        except OSError as exc:
            self._display.warning("training_report: cannot write the report files into %s: %s" % (run_dir, exc))

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if self.verdict is None:
            return
        simulated = " (SIMULATED)" if self.verdict.get("simulated") else ""
        self._display.banner("TRAINING REPORT")
        self._display.display("VERDICT: %s%s" % (self.verdict.get("verdict", "?"), simulated))
        for name, path in sorted(self.report_paths.items()):
            self._display.display("%s: %s" % (name, path))
