# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
name: training_report
type: aggregate
short_description: Live training progress, the verdict, and where the reports are
version_added: 0.1.0
description:
  - While M(clusterval.training.training_watch) polls, prints one progress line for the whole cluster per
    poll, for example C([####------] 12/29 ETA 1m12s 8672 tok/s/GPU 0/512 done slow node017@11) - a bar,
    the median step of the final one and the min-max range when nodes differ, the ETA, the median rate,
    done and failed counts, and the slowest nodes that fit. Each node failure the watch reports is
    printed once (the first five). Watch results of the older per-node shape get a line per node up to
    8 nodes, and the same cluster line above.
  - When M(clusterval.training.training_assert) returns, prints the verdict at once - the headline, the
    culprit and its cause line, failed checks grouped by check and metric with compact node lists
    (C(node[001-040,077])), then one line per check that passes on every node. At the end of the playbook,
    the C(VERDICT) line (as M(clusterval.training.training_results) last wrote it, teardown included) and the
    paths of the reports.
  - The reports themselves (C(results.json), schema in C(docs/results.md), C(junit.xml), C(report.html)) are
    written by M(clusterval.training.training_results) in the C(results) role, with or without this callback.
  - One exception, in C(clusterval.training.train) only - when every node became unreachable over SSH, Ansible
    took each out of the play, its C(rescue) and C(always) included, and no task is left to write the reports; this
    callback writes them at the playbook's end, naming no node when none answered (the controller's way to them
    is the suspect), with SSH's own words for each node.
  - Observes only, because a callback cannot fail a play; M(clusterval.training.training_assert) does.
    The metrics reach ansible-runner and AWX through the run-level C(ansible_stats) that
    M(clusterval.training.training_assert) and M(clusterval.training.training_results) return.
  - Enable it with C(callbacks_enabled = clusterval.training.training_report) in C(ansible.cfg).
requirements:
  - enabled in configuration (C(callbacks_enabled))
options:
  progress_interval:
    description:
      - Least number of seconds between two cluster progress lines. V(0) prints one per poll of the watch.
      - The last poll and node failures are always printed.
    type: float
    default: 0
    env:
      - name: CLUSTERVAL_TRAINING_PROGRESS_INTERVAL
    ini:
      - section: clusterval_training_report
        key: progress_interval
    version_added: 0.1.0
  width:
    description:
      - Columns that the progress line and the verdict's lines fit in (longer cause lines are wrapped or cut).
    type: int
    default: 80
    env:
      - name: CLUSTERVAL_TRAINING_REPORT_WIDTH
    ini:
      - section: clusterval_training_report
        key: width
    version_added: 0.1.0
"""

import datetime
import json
import os
import shutil
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Set

from ansible import context

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

from ansible_collections.clusterval.training.plugins.module_utils._console import (
    cluster_line, failure_line, is_cluster_progress, node_line, nodes_summary, verdict_lines)
from ansible_collections.clusterval.training.plugins.module_utils._report import results_document
from ansible_collections.clusterval.training.plugins.module_utils._report_guard import spawn, unreachable_reports
from ansible_collections.clusterval.training.plugins.module_utils._report_view import headline
from ansible_collections.clusterval.training.plugins.module_utils._results import (
    INTERRUPT_FILE, final_headline, interrupt_line, record_fabric, run_watch_dir)

WATCH = "training_watch"
ASSERT = "training_assert"
RESULTS = "training_results"
PLAN = "training_plan"
CLEANUP = "training_cleanup"
INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
# After Ctrl-C ansible-playbook stops within a second; past this it is stuck (see exit_if_stuck).
INTERRUPT_GRACE_S = 15.0
INTERRUPTED_RC = 99  # ansible-playbook's exit status after Ctrl-C
# Older per-node watch results: up to this many nodes, a line per node per poll; above, one for the cluster.
PER_NODE_LINES_MAX = 8
SUMMARY_INTERVAL_S = 10.0
# Node failures printed while the watch runs; the verdict lists them all.
LIVE_FAILURES_MAX = 5


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


def failed_hosts(stats: Any) -> List[str]:
    """Hosts with a failed or unreachable task not rescued: the playbook's rc is non-zero with any."""
    if stats is None:
        return []
    hosts = set(getattr(stats, "processed", {}) or {})
    return sorted(host for host in hosts
                  if stats.summarize(host).get("failures") or stats.summarize(host).get("unreachable"))


def inventories() -> List[str]:
    try:
        return [str(path) for path in (context.CLIARGS.get("inventory") or [])]
    except AttributeError:
        return []


def controller_reach() -> Dict[str, Any]:
    """How this ansible-playbook reached the nodes (its path, inventories, directory and extra variables): the
    guard fetches an interrupted run's logs the same way."""
    program = sys.argv[0] if os.path.basename(sys.argv[0]).startswith("ansible-playbook") else \
        shutil.which("ansible-playbook")
    arguments = getattr(context, "CLIARGS", None) or {}
    return {"ansible_playbook": os.path.abspath(program) if program else None, "inventories": inventories(),
            "cwd": os.getcwd(), "extra_vars": [str(value) for value in arguments.get("extra_vars") or []]}


def exit_if_stuck(grace_s: float) -> threading.Timer:
    """Exit the controller if it has not stopped `grace_s` after an interrupt.

    ansible-core forwards Ctrl-C to its workers; a worker killed while it writes its result to the result
    queue leaves the queue's lock held, and the strategy's cleanup then waits on that lock forever."""
    def force_exit() -> None:
        os.write(2, ("\nclusterval: ansible-playbook has not stopped %gs after the interrupt (a worker was killed "
                     "while holding the result queue's lock): exiting\n" % grace_s).encode("utf-8"))
        os._exit(INTERRUPTED_RC)

    timer = threading.Timer(grace_s, force_exit)
    timer.daemon = True
    timer.start()
    return timer


def load_jinja_plugins() -> None:
    """Loads ansible-core's own Jinja filters and tests in this, the controller's, process. ansible-core loads
    them on first use in each process; every worker it forks for a task and a node would load them again, and
    inherits them loaded from here (benchmarks/node_cost_bench.py)."""
    for loader in (filter_loader, test_loader):
        list(loader.all())


def report_document(data: Dict[str, Any]) -> Dict[str, Any]:
    """The results document (docs/results.md): training_assert's outcome and run info, stamped now."""
    generated_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return results_document(data, generated_at)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "clusterval.training.training_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verdict: Optional[Dict[str, Any]] = None
        self.written: Optional[Dict[str, Any]] = None  # training_results' last result
        self.report_paths: Dict[str, str] = {}
        self.latest: Dict[str, Dict[str, Any]] = {}
        self.printed_at = float("-inf")
        self.failures_seen: Set[str] = set()
        self.run_id: Optional[str] = None
        self.plan: Optional[Dict[str, Any]] = None
        self.unreachable: Dict[str, Dict[str, str]] = {}  # host -> {task, msg}: Ansible took it out of the play
        self.lease_timeout: Optional[object] = None
        self.teardown_failures: Dict[str, str] = {}
        self.run_dir: Optional[str] = None
        self.given_run_dir: Optional[str] = None
        self.stop_shown = False
        self.task_name = ""
        self.playbook = ""
        self.install_interrupt_handlers()

    # -- interrupts (Ctrl-C, AWX cancel) ----------------------------------------------------------------

    def install_interrupt_handlers(self) -> None:
        """Say how the nodes stop when the controller is interrupted, then let the previous handler act.

        v2_playbook_on_stats never runs on SIGTERM: a handler is the only place for that line."""
        self.main_pid = os.getpid()
        self.interrupt_grace_s = INTERRUPT_GRACE_S
        self.previous_handlers: Dict[int, Any] = {}
        for signum in INTERRUPTS:
            try:
                self.previous_handlers[signum] = signal.signal(signum, self.on_interrupt)
            except ValueError:  # not the main thread: leave the signals alone
                return

    def on_interrupt(self, signum: int, frame: Any) -> None:
        if os.getpid() == self.main_pid and self.run_id is not None:
            line = interrupt_line(signal.Signals(signum).name, self.run_id, inventories(), self.lease_timeout)
            # Display takes locks: a signal handler writes directly.
            os.write(2, ("\n%s\n" % line).encode("utf-8", "replace"))
            self.record_interrupt(signal.Signals(signum).name)
        if signum == signal.SIGINT and os.getpid() == self.main_pid:
            exit_if_stuck(self.interrupt_grace_s)
        previous = self.previous_handlers.get(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt()
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def record_interrupt(self, name: str) -> None:
        """For the run's guard, which writes the reports: the signal and the task it came in (one small file)."""
        if not self.run_dir or not self.run_id:
            return
        path = os.path.join(run_watch_dir(self.run_dir, self.run_id), INTERRUPT_FILE)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return  # a second signal, or no watch directory: the guard says "ended without its reports"
        try:
            os.write(descriptor, json.dumps({"signal": name, "task": self.task_name, "time": time.time()}).encode())
        finally:
            os.close(descriptor)

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self.playbook = os.path.basename(str(getattr(playbook, "_file_name", "") or ""))
        load_jinja_plugins()

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self.task_name = str(task.get_name() or "")

    def guard(self, data: Dict[str, Any]) -> None:
        """train.yml: the run's guard from its plan on, so that an interrupt in preflight is reported too."""
        check = bool((getattr(context, "CLIARGS", None) or {}).get("check"))
        if self.playbook != "train.yml" or check or not data.get("run_dir") or not data.get("controller_pid"):
            return
        try:
            spawn(data["plan"], str(self.run_dir), int(data["controller_pid"]),
                  AnsibleCollectionConfig.collection_paths, collect=controller_reach())
        except OSError as exc:
            self._display.warning("clusterval: the run's report guard did not start: %s" % exc)

    # -- progress ---------------------------------------------------------------------------------------

    def v2_runner_retry(self, result: Any) -> None:
        if task_action(result).endswith(WATCH):
            self.show_progress(host_name(result), result_data(result))

    # The watch's polls are the items of one loop (roles/train): each is shown as it comes.
    v2_runner_item_on_ok = v2_runner_retry
    v2_runner_item_on_failed = v2_runner_retry

    def show_progress(self, host: str, data: Dict[str, Any]) -> None:
        if is_cluster_progress(data):
            self.show_cluster_progress(data)
        else:
            self.show_node_progress(host, data)

    def show_cluster_progress(self, data: Dict[str, Any]) -> None:
        """One line per poll (at most one per progress_interval), each new node failure once."""
        width = self.get_option("width")
        for failure in data.get("failures") or []:
            host = str(failure.get("host"))
            if host not in self.failures_seen and len(self.failures_seen) < LIVE_FAILURES_MAX:
                self.failures_seen.add(host)
                self._display.display(failure_line(failure, width))
        now = time.monotonic()
        if data.get("done") or now - self.printed_at >= self.get_option("progress_interval"):
            self.printed_at = now
            self._display.display(cluster_line(data, width))

    def show_node_progress(self, host: str, data: Dict[str, Any]) -> None:
        """Per-node watch results: a line per node on small clusters; on large ones a cluster line every
        few seconds, and a node's own line only when it fails."""
        self.latest[data.get("host") or host] = data
        if len(self.latest) <= PER_NODE_LINES_MAX or (data.get("done") and data.get("failed")):
            self._display.display(node_line(host, data))
            return
        now = time.monotonic()
        if now - self.printed_at >= max(SUMMARY_INTERVAL_S, self.get_option("progress_interval")):
            self.printed_at = now
            self._display.display(nodes_summary(self.latest, self.get_option("width")))

    # -- verdict ----------------------------------------------------------------------------------------

    def v2_runner_on_ok(self, result: Any) -> None:
        self.observe(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self.observe(result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self.unreachable[host_name(result)] = {"task": self.task_name, "msg": str(result_data(result).get("msg") or "")}
        self.observe(result)

    def observe(self, result: Any) -> None:
        action = task_action(result)
        data = result_data(result)
        self.observe_run(host_name(result), action, data)
        if action.endswith(WATCH) and "progress" in data:
            self.show_progress(host_name(result), data)
        elif action.endswith(ASSERT) and "checks" in data:
            self.verdict = data
            self._display.banner("TRAINING VERDICT")
            self._display.display("\n".join(verdict_lines(report_document(data), self.get_option("width"))))
        elif action.endswith(RESULTS) and "paths" in data:
            self.show_written(data)

    def show_written(self, data: Dict[str, Any]) -> None:
        """training_results' result (or the callback's own reports of a run that lost every node)."""
        self.written = data
        self.report_paths = dict(data["paths"])
        if self.verdict is None and data.get("verdict_lines") and not self.stop_shown:
            # A run that stopped before its verdict: where, and the nodes that stopped it.
            self.stop_shown = True
            self._display.banner("TRAINING VERDICT")
            paths = ("results.json: ", "junit.xml: ", "report.html: ")
            self._display.display("\n".join(line for line in data["verdict_lines"] if not line.startswith(paths)))

    def v2_playbook_on_play_start(self, play: Any) -> None:
        try:
            extra = play.get_variable_manager().extra_vars
        except AttributeError:
            return
        self.lease_timeout = extra.get("train_lease_timeout", self.lease_timeout)
        given = extra.get("training_run_dir")
        self.given_run_dir = str(given) if isinstance(given, str) and "{" not in given else None

    def observe_run(self, host: str, action: str, data: Dict[str, Any]) -> None:
        """The run id and lease timeout (for the interrupt line) and each node's teardown outcome."""
        if action.endswith(PLAN) and isinstance(data.get("plan"), dict):
            self.run_id = data["plan"].get("run_id") or self.run_id
            self.plan = data["plan"]
            self.lease_timeout = data["plan"].get("lease_timeout", self.lease_timeout)
            self.run_dir = self.given_run_dir or data.get("run_dir") or self.run_dir
            self.guard(data)
        fabric = (data.get("ansible_facts") or {}).get("fabric_result")
        if isinstance(fabric, dict) and fabric and self.run_dir and self.run_id:
            # Kept for the guard: an interrupt before the reports' start still shows the gate as run.
            try:
                record_fabric(self.run_dir, self.run_id, fabric)
            except OSError:
                pass
        if action.endswith(CLEANUP):
            if data.get("ok") is True:
                self.teardown_failures.pop(host, None)
            else:
                self.teardown_failures[host] = str(data.get("msg") or "%s teardown failed" % host)

    def report_unreachable(self) -> None:
        """train.yml lost every node over SSH: no node was left in the play to write the reports."""
        check = bool((getattr(context, "CLIARGS", None) or {}).get("check"))
        if self.playbook != "train.yml" or check or self.written is not None or not self.unreachable \
                or self.plan is None or not self.run_dir:
            return
        try:
            written = unreachable_reports(self.plan, self.run_dir, self.unreachable)
        except Exception as exc:  # pylint: disable=broad-except  # the run's guard writes them instead
            self._display.warning("clusterval: the reports of the run were not written: %s" % exc)
            return
        document = written["document"]
        self.show_written({"paths": written["paths"], "headline": document["headline"],
                           "verdict": document["verdict"], "simulated": bool(document.get("simulated")),
                           "verdict_lines": verdict_lines(document)})

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self.report_unreachable()
        if self.verdict is None and self.written is None and not self.teardown_failures:
            return
        if self.written is not None:  # training_results' headline has the teardown already
            text = final_headline(headline(self.written), [], failed_hosts(stats))
            simulated = self.written.get("simulated")
        else:
            verdict = self.verdict or {"verdict": "FAIL", "headline": "FAIL: stopped before the verdict"}
            teardown = [self.teardown_failures[host] for host in sorted(self.teardown_failures)]
            text = final_headline(headline(verdict), teardown, failed_hosts(stats))
            simulated = verdict.get("simulated")
        self._display.banner("TRAINING REPORT")
        self._display.display("VERDICT: %s%s" % (text, " (SIMULATED)" if simulated else ""))
        for name, path in sorted(self.report_paths.items()):
            self._display.display("%s: %s" % (name, path))
