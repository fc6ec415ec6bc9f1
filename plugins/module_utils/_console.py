# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the terminal shows of a run, made for 80 columns at 2 nodes and at 500.

- ``cluster_line``: one progress line for the whole cluster per poll of the watch (its ``progress``):
  a bar, the median step of the final one (with the min-max range when nodes differ), the ETA (before the
  first step, the job's phase), the median rate, done and failed counts, and as many of the slowest nodes as fit.
- ``node_line``, ``nodes_summary``: the same from watch results of the older per-node shape.
- ``verdict_lines``: the headline first, the culprit and its cause line, failed checks grouped by check
  and metric with compact node lists, the nodes that stopped as a consequence, then one line for each
  check that passes on every node and for each that was not judged. About 30 lines at 500 nodes.
"""
from __future__ import annotations

import datetime
import statistics
import textwrap
from typing import Any, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import metric_def
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number
from ansible_collections.clusterval.training.plugins.module_utils._report_view import (
    CheckGroup, View, cannot_fail_sentence, check_label, expectations, realism_sentence, value_range, view)

WIDTH = 80
BAR_CELLS = 10
LABEL_COLUMN_MAX = 36
DETAILS_PER_GROUP = 2
CAUSE_LINES = 3
HEADLINE_LINES = 4
REALISM_LINES = 6
NOT_JUDGED_WORDS = {"no_threshold": "no threshold set", "info": "recorded only"}


def fits(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns with "..." when longer."""
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def short_eta(seconds: Any) -> str:
    if not is_finite_number(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)
    return "%dm%02ds" % (seconds // 60, seconds % 60)


def rate_unit(metric: Optional[str]) -> str:
    known = metric_def(metric) if metric else None
    return (known.unit if known else "tok/s/GPU").replace("tokens/", "tok/")


def number(value: Any) -> str:
    return "-" if not is_finite_number(value) else "%.0f" % value if abs(value) >= 100 else "%.3g" % value


# -- progress --------------------------------------------------------------------------------------------

def progress_bar(done: float, cells: int = BAR_CELLS) -> str:
    filled = int(round(max(0.0, min(1.0, done)) * cells))
    return "[%s%s]" % ("#" * filled, "-" * (cells - filled))


def cluster_line(result: Mapping[str, Any], width: int = WIDTH) -> str:
    """One line for the cluster from a watch result with ``progress.nodes`` (contract 6)."""
    progress = result.get("progress") or {}
    step = progress.get("step") or {}
    final, median = progress.get("final_step"), step.get("median")
    fraction = median / float(final) if is_finite_number(median) and is_finite_number(final) and final > 0 else 0.0
    where = "%s/%s" % (number(median) if is_finite_number(median) else "-", number(final))
    if is_finite_number(step.get("min")) and is_finite_number(step.get("max")) and step["min"] != step["max"]:
        where += " (%s-%s)" % (number(step["min"]), number(step["max"]))
    rate = (progress.get("rate") or {}).get("median")
    counts = "%s/%s done" % (progress.get("done", 0), progress.get("nodes", "?"))
    if progress.get("failed"):
        counts += " %s FAILED" % progress["failed"]
    eta = "ETA %s" % ("-" if result.get("done") else short_eta(progress.get("eta_s")))
    if progress.get("phase") and not result.get("done"):
        eta = str(progress["phase"])              # before the first step: what the job is doing
    line = " ".join([progress_bar(1.0 if result.get("done") else fraction), where, eta,
                     "%s %s" % (number(rate), rate_unit(progress.get("rate_metric"))), counts])
    return line + slowest_part(progress.get("slowest") or [], median, width - len(line))


def slowest_part(slowest: Sequence[Mapping[str, Any]], median: Any, room: int) -> str:
    """`` slow node17@11 node3@11``: as many of the slowest nodes as fit in ``room`` columns."""
    text = " slow"
    shown = 0
    for node in slowest:
        entry = " %s" % node.get("host")
        if is_finite_number(node.get("step")) and (not is_finite_number(median) or node["step"] < median):
            entry += "@%s" % number(node["step"])
        if len(text + entry) > room:
            break
        text, shown = text + entry, shown + 1
    return text if shown else ""


def node_line(host: str, data: Mapping[str, Any]) -> str:
    """One node's line from a watch result of the per-node shape (one result per node and poll)."""
    progress = data.get("progress") or {}
    step, final = progress.get("step"), progress.get("final_step")
    parts = ["[%s] step %s/%s" % (data.get("host") or host, "-" if step is None else step, "?" if final is None else final)]
    rate = progress.get("tokens_per_sec")
    parts.append("%.0f tok/s/gpu" % rate if is_finite_number(rate) else "- tok/s/gpu")
    loss = progress.get("loss")
    parts.append("loss %.3f" % loss if is_finite_number(loss) else "loss -")
    parts.append("ETA %s" % long_eta(progress.get("eta_s")))
    if data.get("done"):
        parts.append("done (%s)" % (data.get("reason") or "?"))
    return "  ".join(parts)


def long_eta(seconds: Any) -> str:
    if not is_finite_number(seconds) or seconds < 0:
        return "-:--:--"
    return str(datetime.timedelta(seconds=int(seconds)))


def nodes_summary(latest: Mapping[str, Mapping[str, Any]], width: int = WIDTH) -> str:
    """One line for the cluster from the latest per-node results: the same line as ``cluster_line``."""
    progress = {host: data.get("progress") or {} for host, data in latest.items()}
    steps = {host: p["step"] for host, p in progress.items() if is_finite_number(p.get("step"))}
    rates = [p["tokens_per_sec"] for p in progress.values() if is_finite_number(p.get("tokens_per_sec"))]
    etas = [p["eta_s"] for p in progress.values() if is_finite_number(p.get("eta_s"))]
    finals = [p["final_step"] for p in progress.values() if is_finite_number(p.get("final_step"))]
    done = [data for data in latest.values() if data.get("done")]
    ordered = sorted(steps.values())
    slowest = sorted(steps, key=lambda host: (steps[host], host))[:5]
    merged = {"progress": {
        "nodes": len(latest), "done": len(done), "failed": sum(1 for data in done if data.get("failed")),
        "step": {"min": ordered[0], "median": statistics.median(ordered), "max": ordered[-1]} if ordered else {},
        "final_step": max(finals) if finals else None, "rate": {"median": statistics.median(rates) if rates else None},
        "eta_s": max(etas) if etas else None, "slowest": [{"host": h, "step": steps[h]} for h in slowest]}}
    return cluster_line(merged, width)


def failure_line(failure: Mapping[str, Any], width: int = WIDTH) -> str:
    """A node's failure as the watch reports it, once, while the others are still being watched."""
    host = str(failure.get("host") or "?")
    msg = str(failure.get("msg") or failure.get("text") or failure.get("reason") or "failed")
    return fits("FAILED " + (msg if msg.startswith(host) else "%s: %s" % (host, msg)), width)


# -- verdict ---------------------------------------------------------------------------------------------

def advice_lines(document: Mapping[str, Any], width: int) -> List[str]:
    """The next step when no node could be named: the reason wrapped, the command whole (to copy)."""
    advice = document.get("advice")
    if not advice:
        return []
    sentence, found, command = str(advice).rpartition(": ansible-playbook ")
    if not found:
        return wrapped("next step: %s" % advice, width, "", HEADLINE_LINES, "  ")
    # The headline above already says why; the sentence's own "To find ..." part says what to do.
    sentence = sentence[sentence.find("To find"):] if "To find" in sentence else sentence
    return wrapped("next step: %s:" % sentence, width, "", HEADLINE_LINES, "  ") + ["  ansible-playbook " + command]


def verdict_lines(document: Mapping[str, Any], width: int = WIDTH, shown: Optional[View] = None) -> List[str]:
    shown = shown or view(document)
    groups = shown.failed + shown.consequential + shown.passed + shown.not_judged
    column = min(LABEL_COLUMN_MAX, max([len(g.label) for g in groups] + [16]) + 2)
    lines = wrapped(shown.headline + (" (SIMULATED)" if shown.simulated else ""), width, "", HEADLINE_LINES, "  ")
    if shown.realism:
        lines.extend(wrapped(realism_sentence(shown.realism), width, "  ", REALISM_LINES, "  "))
    lines.extend(stop_lines(document, width))
    lines.extend(fabric_lines(document, width))
    if shown.culprit:
        lines.extend(culprit_lines(shown, width))
    lines.extend(advice_lines(document, width))
    if shown.failed:
        lines.append("failed%s:" % (" on their own" if shown.culprit else ""))
        for group in shown.failed:
            lines.extend(group_lines(group, width, column, details=True))
    if shown.consequential:
        stopped = unique_hosts(shown)
        lines.append(fits("stopped as a consequence of %s (%d of %d nodes):" % (
            shown.cause, len(stopped), max(len(stopped), len(shown.subjects))), width))
        for group in shown.consequential:
            lines.extend(group_lines(group, width, column, details=False, count=" (%d node%s)" % (
                len(group.nodes), "" if len(group.nodes) == 1 else "s")))
    for group in shown.cannot_fail:
        lines.extend(wrapped(cannot_fail_sentence(group, document), width, "", 3, "  "))
    if shown.passed:
        lines.append("passed on every node:")
        lines.extend(summary_line(group, "all %d" % len(group.nodes), width, column) for group in shown.passed)
    if shown.not_judged or shown.unjudged:
        lines.append("not judged:")
        lines.extend(summary_line(group, "%s, %d node%s" % (
            NOT_JUDGED_WORDS.get(group.status, group.status), len(group.nodes), "" if len(group.nodes) == 1 else "s"),
            width, column) for group in shown.not_judged)
        listed = {group.metric for group in shown.not_judged}
        lines.extend(fits("  %s: %s" % (u.get("metric"), u.get("reason") or "no threshold"), width)
                     for u in shown.unjudged if u.get("metric") not in listed)
    lines.extend(expectation_lines(document, shown, width))
    lines.extend(cell_lines(document, width))
    return lines


def unique_hosts(shown: View) -> List[str]:
    return list(dict.fromkeys(shown.consequences + [n for g in shown.consequential for n in g.nodes]))


def expectation_lines(document: Mapping[str, Any], shown: View, width: int) -> List[str]:
    """How to set the thresholds not set: the sentence wrapped, each way whole (a command to copy)."""
    found = expectations(document, shown)
    if not found:
        return []
    return wrapped(found[0], width, "", 2, "  ") + ["  - " + line for line in found[1:]]


STOP_LINES_MAX = 6


def fabric_lines(document: Mapping[str, Any], width: int) -> List[str]:
    """A fabric gate that could not run, or whose ranks did not meet across nodes: the fabric was not measured."""
    fabric = document.get("fabric")
    if not isinstance(fabric, Mapping):
        return []
    if fabric.get("not_run"):
        return wrapped("%s (the fabric was not measured)" % fabric["not_run"], width, "", HEADLINE_LINES, "  ")
    return [fits("fabric not measured: %s" % item, width) for item in fabric.get("not_measured") or []]


def stop_lines(document: Mapping[str, Any], width: int) -> List[str]:
    """A run that stopped early: where, each node that stopped it (the first few), the nodes that never started."""
    stop = document.get("stop")
    if not isinstance(stop, dict):
        return []
    lines = ["stopped in %s:" % (stop.get("stage") or "an unknown stage")]
    own = [str(line) for line in stop.get("lines") or []]
    if not own and not stop.get("never_started"):
        return []   # the headline says it all
    lines.extend(fits("  " + line, width) for line in own[:STOP_LINES_MAX])
    if len(own) > STOP_LINES_MAX:
        lines.append("  ... and %d more (results.json: stop.lines)" % (len(own) - STOP_LINES_MAX))
    never = [str(h) for h in stop.get("never_started") or []]
    if never:
        lines.append(fits("  training never started on %d node%s: %s" % (
            len(never), "" if len(never) == 1 else "s", compact_hosts(never, width)), width))
    return lines


def cell_lines(document: Mapping[str, Any], width: int) -> List[str]:
    """The threshold cell that judged the run, when its name states other settings than the run has."""
    cell = document.get("threshold_file")
    differences = (cell or {}).get("differences_text") if isinstance(cell, dict) else None
    if not differences:
        return []
    return [fits("threshold cell %s is for another run:" % cell.get("cell"), width)] + \
        [fits("  " + str(line), width) for line in differences]


def culprit_lines(shown: View, width: int) -> List[str]:
    culprit = shown.culprit or {}
    where = [str(culprit.get("class") or "failure")]
    if culprit.get("step") is not None:
        where.append("at step %s" % culprit["step"])
    if culprit.get("lineno") is not None:
        where.append("(log line %s)" % culprit["lineno"])
    lines = [fits("culprit: %s, %s" % (culprit.get("host"), " ".join(where)), width)]
    lines.extend(wrapped(str(culprit.get("text") or ""), width, "    ", CAUSE_LINES))
    if shown.culprit_checks[1:]:
        lines.append(fits("  also failed: " + "; ".join(check_label(c) for c in shown.culprit_checks[1:]), width))
    if shown.consequences:
        lines.append(fits("  %d other node%s stopped as a consequence: %s" % (
            len(shown.consequences), "" if len(shown.consequences) == 1 else "s",
            compact_hosts(shown.consequences, max(20, width - 44))), width))
    return lines


def wrapped(text: str, width: int, indent: str, max_lines: int, continuation: Optional[str] = None) -> List[str]:
    """``text`` in at most ``max_lines`` lines of ``width`` columns; log lines' long words are broken."""
    if not text:
        return []
    lines = textwrap.wrap(text, width=max(20, width), initial_indent=indent,
                          subsequent_indent=indent if continuation is None else continuation,
                          break_long_words=True, break_on_hyphens=False)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = fits(lines[-1] + " ...", width)
    return lines


def group_lines(group: CheckGroup, width: int, column: int, details: bool, count: str = "") -> List[str]:
    nodes = group.nodes
    count = count or " (%d of %d)" % (len(nodes), group.of)
    hosts = compact_hosts(nodes, max(16, width - 2 - column - len(count)))
    lines = [fits("  %s%s%s" % (group.label.ljust(column), hosts, count), width)]
    if not details:
        return lines
    for check in group.checks[:DETAILS_PER_GROUP]:
        lines.extend(wrapped("%s: %s" % (check.get("node"), check.get("detail")), width, "    ", 2, "      "))
    if len(group.checks) > DETAILS_PER_GROUP:
        lines.append("    (+%d more in results.json)" % (len(group.checks) - DETAILS_PER_GROUP))
    return lines


def summary_line(group: CheckGroup, count: str, width: int, column: int) -> str:
    """``  threshold tokens_per_sec_per_gpu  all 512: 8545..8690 (expected 8000)``."""
    values = value_range(group)
    return fits("  %s%s%s" % (group.label.ljust(column), count, ": " + values if values else ""), width)


def is_cluster_progress(result: Mapping[str, Any]) -> bool:
    """Whether a watch result is the cluster-wide shape (contract 6) rather than one node's."""
    progress = result.get("progress")
    return isinstance(progress, dict) and is_finite_number(progress.get("nodes"))


# The collection's callback, which prints the progress and the verdict itself when it is enabled.
REPORT_CALLBACK = "clusterval.training.training_report"
# Stdout callbacks whose output a program reads: a task prints no line of its own beside them.
MACHINE_STDOUT = ("json", "jsonl")


def human_stdout(stdout_callback: str) -> bool:
    """Whether the stdout callback writes for people (``default``, ``yaml``, ``training_console``), not for a
    program (``ansible.builtin.json``, ``jsonl``, ``ansible.posix.json``), so that a task may print its own lines."""
    return str(stdout_callback or "default").rsplit(".", 1)[-1] not in MACHINE_STDOUT


def poll_line(result: Mapping[str, Any], host: str, width: int = WIDTH) -> str:
    """One poll of the watch as one line, the label of its loop item: Ansible's default output prints it
    (``ok: [node1] => (item=[####------] 4/11 ...)``) where a poll would otherwise read "FAILED - RETRYING"."""
    return cluster_line(result, width - 24) if is_cluster_progress(result) else node_line(host, result)
