"""The training_report callback with its documented options, read through Ansible's config manager.

(Ansible's plugin loader cannot load a collection whose package other tests of the session imported
before its collection finder was installed; the integration tests load the callback for real.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from ansible import constants as C
from synthetic_results import synthetic_document

from ansible_collections.clusterval.training.plugins.callback import training_report

WATCH, ASSERT = "clusterval.training.training_watch", "clusterval.training.training_assert"


class FakeDisplay:
    def __init__(self):
        self.lines = []

    def display(self, text, **_):
        self.lines.extend(text.split("\n"))

    def banner(self, text, **_):
        self.lines.append("== " + text)

    def warning(self, text, **_):
        self.lines.append("WARNING " + text)


@pytest.fixture
def callback():
    """A factory of callbacks whose options come from DOCUMENTATION, the environment and ``direct``."""
    name = "clusterval.training.training_report"
    options = yaml.safe_load(training_report.DOCUMENTATION)["options"]
    C.config.initialize_plugin_configuration_definitions("callback", name, options)

    def make(**direct):
        plugin = training_report.CallbackModule()
        plugin._load_name = name
        plugin.set_options(direct=direct)
        plugin._display = FakeDisplay()
        return plugin
    return make


def result(action, data, host="node1"):
    return SimpleNamespace(result=data, task=SimpleNamespace(action=action), host=SimpleNamespace(get_name=lambda: host))


def poll(step, done=0, failed=0, failures=(), finished=False):
    return {"done": finished, "failed": False, "reason": "running", "msg": "", "simulated": True,
            "progress": {"nodes": 512, "running": 512 - done, "done": done, "failed": failed,
                         "step": {"min": step, "median": step, "max": step}, "final_step": 29,
                         "rate": {"median": 8600.0}, "rate_metric": "tokens_per_sec_per_gpu", "eta_s": 30.0,
                         "elapsed_s": 10.0, "slowest": []},
            "failures": list(failures)}


def test_options_come_from_the_documentation_and_the_environment(callback, monkeypatch):
    plugin = callback()
    assert plugin.get_option("progress_interval") == 0 and plugin.get_option("width") == 80
    monkeypatch.setenv("CLUSTERVAL_TRAINING_REPORT_WIDTH", "132")
    monkeypatch.setenv("CLUSTERVAL_TRAINING_PROGRESS_INTERVAL", "2.5")
    plugin = callback()
    assert plugin.get_option("width") == 132 and plugin.get_option("progress_interval") == 2.5


def test_one_line_per_poll_for_the_whole_cluster(callback):
    plugin = callback()
    for step in (3, 4, 5):
        plugin.v2_runner_retry(result(WATCH, poll(step)))
    plugin.v2_runner_retry(result("ansible.builtin.command", poll(6)))
    assert plugin._display.lines == ["[#---------] 3/29 ETA 0m30s 8600 tok/s/GPU 0/512 done",
                                     "[#---------] 4/29 ETA 0m30s 8600 tok/s/GPU 0/512 done",
                                     "[##--------] 5/29 ETA 0m30s 8600 tok/s/GPU 0/512 done"]


def test_the_polls_of_the_watch_loop_print_as_they_come_and_the_loop_result_adds_nothing(callback):
    plugin = callback()
    plugin.v2_runner_item_on_ok(result(WATCH, poll(3)))
    plugin.v2_runner_item_on_ok(result(WATCH, poll(29, done=512, finished=True)))
    plugin.v2_runner_on_ok(result(WATCH, {"results": [poll(3), poll(29, done=512, finished=True)]}))
    assert [line.split(" ")[1] for line in plugin._display.lines] == ["3/29", "29/29"]


def test_progress_interval_thins_the_lines_but_not_the_last_one(callback):
    plugin = callback(progress_interval=3600)
    for step in (3, 4, 5):
        plugin.v2_runner_retry(result(WATCH, poll(step)))
    plugin.v2_runner_on_ok(result(WATCH, poll(29, done=512, finished=True)))
    assert [line.split(" ")[1] for line in plugin._display.lines] == ["3/29", "29/29"]


def test_node_failures_print_once_and_at_most_five(callback):
    plugin = callback()
    failures = [{"host": "node%d" % i, "reason": "error", "msg": "node%d: crash at step 3" % i} for i in range(1, 9)]
    plugin.v2_runner_retry(result(WATCH, poll(3, failed=1, failures=failures[:1])))
    plugin.v2_runner_retry(result(WATCH, poll(3, failed=8, failures=failures)))
    failed = [line for line in plugin._display.lines if line.startswith("FAILED")]
    assert failed == ["FAILED node%d: crash at step 3" % i for i in range(1, 6)]
    assert plugin._display.lines[-1].endswith("0/512 done 8 FAILED")


def test_the_width_option_is_used(callback):
    plugin = callback(width=100)
    data = poll(3)
    data["progress"]["slowest"] = [{"host": "node%d" % i, "step": 2} for i in range(5)]
    plugin.v2_runner_retry(result(WATCH, data))
    assert plugin._display.lines[0].endswith("slow node0@2 node1@2 node2@2 node3@2 node4@2")
    assert len(plugin._display.lines[0]) > 80


def test_older_per_node_results_get_a_line_per_node(callback):
    plugin = callback()
    progress = {"step": 12, "final_step": 29, "tokens_per_sec": 8672.4, "loss": 10.374, "eta_s": 72}
    plugin.v2_runner_retry(result(WATCH, {"progress": progress, "done": False}))
    assert plugin._display.lines == ["[node1] step 12/29  8672 tok/s/gpu  loss 10.374  ETA 0:01:12"]


def test_verdict_leads_with_the_headline_and_the_written_files_follow(callback, tmp_path):
    plugin = callback()
    plugin.v2_runner_on_failed(result(WATCH, poll(21, failed=64, finished=True)))
    plugin._display.lines.clear()
    document = synthetic_document(64, 40, crash_at=21)
    plugin.v2_runner_on_ok(result(ASSERT, dict(document, run_dir=str(tmp_path), changed=False,
                                               ansible_stats={"data": {}}, msg="verdict FAIL")))
    assert list(tmp_path.iterdir()) == [], "the callback only prints: the results role writes the reports"
    paths = {name: str(tmp_path / name) for name in ("results.json", "junit.xml", "report.html")}
    plugin.v2_runner_on_ok(result("clusterval.training.training_results", {
        "paths": paths, "verdict": "FAIL", "headline": document["headline"], "simulated": True}))
    plugin.v2_playbook_on_stats(None)
    lines = plugin._display.lines
    assert lines[0] == "== TRAINING VERDICT" and lines[1].startswith("FAIL: node017 crash at step 21")
    assert len(lines) < 40 and max(len(line) for line in lines if not line.startswith(("VERDICT", "junit",
                                                                                       "report", "results"))) <= 80
    report = lines.index("== TRAINING REPORT")
    assert lines[report + 1] == "VERDICT: %s (SIMULATED)" % document["headline"]
    assert lines[report + 2:] == ["%s: %s" % (name, tmp_path / name) for name in ("junit.xml", "report.html",
                                                                                  "results.json")]


def test_no_verdict_no_report(callback):
    plugin = callback()
    plugin.v2_playbook_on_stats(None)
    assert plugin._display.lines == []


def test_the_written_headline_wins_over_the_verdict_printed_earlier(callback, tmp_path):
    plugin = callback()
    plugin.v2_runner_on_ok(result(ASSERT, passing_verdict(tmp_path)))
    plugin.v2_runner_on_ok(result("clusterval.training.training_results", {
        "paths": {}, "verdict": "FAIL", "headline": "FAIL: teardown failed: node2: teardown: Docker daemon dead"}))
    plugin.v2_playbook_on_stats(None)
    assert "VERDICT: FAIL: teardown failed: node2: teardown: Docker daemon dead" in plugin._display.lines


def passing_verdict(tmp_path):
    return {"verdict": "PASS", "headline": "PASS: 2 nodes", "checks": [], "run_dir": str(tmp_path)}


def test_a_failed_teardown_turns_a_pass_into_a_fail_naming_the_node(callback, tmp_path):
    plugin = callback()
    plugin.v2_runner_on_ok(result(ASSERT, passing_verdict(tmp_path)))
    outcome = {"ok": False, "unreachable": False, "removed": [], "msg": "node2 teardown FAILED: Docker daemon dead"}
    plugin.v2_runner_on_failed(result("clusterval.training.training_cleanup", dict(outcome, failed=True),
                                      host="node2"))
    plugin.v2_runner_on_ok(result("clusterval.training.training_cleanup", dict(
        outcome, ok=True, msg="node1 teardown removed: container x"), host="node1"))
    plugin.v2_playbook_on_stats(None)
    assert "VERDICT: FAIL: teardown failed: node2 teardown FAILED: Docker daemon dead" in plugin._display.lines


def test_an_unreachable_teardown_and_a_timed_out_one_are_failures(callback, tmp_path):
    plugin = callback()
    plugin.v2_runner_on_ok(result(ASSERT, passing_verdict(tmp_path)))
    plugin.v2_runner_on_unreachable(result("clusterval.training.training_cleanup", {
        "unreachable": True, "ok": False, "msg": "node2 teardown FAILED: unreachable, its containers may still run: "
                                                 "ssh: connect to host node2 port 22: No route to host"}, host="node2"))
    plugin.v2_runner_on_failed(result("clusterval.training.training_cleanup", {
        "failed": True, "msg": "Task failed: Timed out after 120 second(s)."}, host="node3"))
    plugin.v2_playbook_on_stats(None)
    verdict = [line for line in plugin._display.lines if line.startswith("VERDICT: ")][-1]
    assert "node2 teardown FAILED: unreachable" in verdict and "Timed out after 120" in verdict


def test_a_pass_never_shows_when_a_host_failed_after_the_verdict(callback, tmp_path):
    plugin = callback()
    plugin.v2_runner_on_ok(result(ASSERT, passing_verdict(tmp_path)))
    stats = SimpleNamespace(processed={"node1": 1, "node2": 1},
                            summarize=lambda host: {"failures": int(host == "node2"), "unreachable": 0})
    plugin.v2_playbook_on_stats(stats)
    verdict = [line for line in plugin._display.lines if line.startswith("VERDICT")]
    assert verdict == ["VERDICT: FAIL: the run failed after the verdict on node2 (see above)"]


def test_an_interrupt_says_how_the_nodes_stop_and_chains_to_the_previous_handler(callback, capfd, monkeypatch):
    plugin = callback()
    monkeypatch.setattr(training_report, "inventories", lambda: ["inv/hosts.yml"])
    plugin.v2_runner_on_ok(result("clusterval.training.training_plan", {"plan": {"run_id": "20261125T020000Z-abc123-x"}}))
    called = []
    plugin.previous_handlers[15] = lambda signum, frame: called.append(signum)
    plugin.on_interrupt(15, None)
    err = capfd.readouterr().err
    assert called == [15]
    assert "SIGTERM" in err and "within the lease timeout (train_lease_timeout)" in err
    assert ("ansible-playbook -i inv/hosts.yml clusterval.training.teardown "
            "-e training_run_id=20261125T020000Z-abc123-x") in err


def test_an_interrupt_arms_the_exit_for_a_stuck_controller_on_sigint_only(callback, monkeypatch, capfd):
    plugin = callback()
    armed = []
    monkeypatch.setattr(training_report, "exit_if_stuck", armed.append)
    plugin.previous_handlers[2] = plugin.previous_handlers[15] = lambda signum, frame: None
    plugin.on_interrupt(15, None)
    assert armed == []
    plugin.on_interrupt(2, None)
    assert armed == [training_report.INTERRUPT_GRACE_S]


STUCK_CONTROLLER = """
import multiprocessing, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.clusterval.training.plugins.callback.training_report import exit_if_stuck
lock = multiprocessing.Lock()
lock.acquire()  # as a worker killed while writing its result leaves the result queue's lock
exit_if_stuck(0.5)
lock.acquire()
"""


def test_a_controller_stuck_after_the_interrupt_exits_with_the_interrupt_status():
    collections = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".collections")
    proc = subprocess.run([sys.executable, "-c", STUCK_CONTROLLER, os.path.abspath(collections)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == training_report.INTERRUPTED_RC, proc.stderr
    assert "has not stopped 0.5s after the interrupt" in proc.stderr


def test_the_guard_is_told_how_this_controller_reached_the_nodes(monkeypatch, tmp_path):
    from ansible import context  # pylint: disable=import-outside-toplevel
    from ansible.module_utils.common.collections import ImmutableDict  # pylint: disable=import-outside-toplevel
    program = tmp_path / "ansible-playbook"
    monkeypatch.setattr(sys, "argv", [str(program), "train.yml"])
    monkeypatch.setattr(context, "CLIARGS", ImmutableDict(inventory=("inv/hosts.yml",),
                                                          extra_vars=("training_hosts=node1", "@vars.yml")))
    monkeypatch.chdir(tmp_path)
    assert training_report.controller_reach() == {
        "ansible_playbook": str(program), "inventories": ["inv/hosts.yml"], "cwd": str(tmp_path),
        "extra_vars": ["training_hosts=node1", "@vars.yml"]}


def test_the_fabric_gates_verdict_is_kept_for_the_report_of_an_interrupt(callback, tmp_path):
    """Set by the fabric role (set_fact fabric_result): kept in the run's watch directory, where the guard reads it."""
    from ansible_collections.clusterval.training.plugins.module_utils import _results
    plugin = callback()
    plan = {"run_id": "20261121T101500Z-r1", "nodes": {"node1": {}}}
    plugin.observe_run("localhost", "clusterval.training.training_plan", {"plan": plan, "run_dir": str(tmp_path)})
    fabric = {"failed": False, "msg": "fabric gate PASS on 2 nodes", "lines": []}
    plugin.v2_runner_on_ok(result("ansible.builtin.set_fact", {"ansible_facts": {"fabric_result": fabric}}))
    assert _results.recorded_fabric(str(tmp_path), plan) == fabric


def test_a_run_that_lost_every_node_over_ssh_gets_its_reports_from_the_callback_naming_no_node(callback, tmp_path):
    """Ansible takes an unreachable node out of the play, rescue and always included: with every node gone no
    task is left to write the reports, so the callback writes them before the playbook exits."""
    plugin = callback()
    plugin.playbook = "train.yml"
    plan = {"run_id": "20261121T101500Z-r1", "config_name": "c", "nodes": {"node1": {}, "node2": {}}}
    plugin.observe_run("localhost", "clusterval.training.training_plan", {"plan": plan, "run_dir": str(tmp_path)})
    plugin.task_name = "clusterval.training.preflight : Preflight | What each node has"
    for host in ("node1", "node2"):
        plugin.v2_runner_on_unreachable(result("ansible.builtin.command", {"unreachable": True, "msg": (
            'Task failed: Data could not be sent to remote host "10.0.0.%s". Make sure this host can be reached '
            'over ssh: ssh: connect to host 10.0.0.%s port 22: Connection timed out' % (host[-1], host[-1]))},
            host=host))
    plugin.v2_playbook_on_stats(SimpleNamespace(processed={"node1": 1, "node2": 1},
                                                summarize=lambda host: {"failures": 0, "unreachable": 1}))
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["headline"].startswith("FAIL: stopped in preflight: no node answered over SSH (node[1-2]); "
                                           "no node stands out")
    assert document["stop"]["hosts"] == [] and document["culprit"] is None
    assert "node1: unreachable (ssh: connect to host 10.0.0.1 port 22: Connection timed out)" in document["stop"]["lines"]
    assert {"junit.xml", "report.html"} <= {p.name for p in tmp_path.iterdir()}
    verdict = [line for line in plugin._display.lines if line.startswith("VERDICT: ")]
    assert verdict == ["VERDICT: " + document["headline"]]
    assert "report.html: %s" % (tmp_path / "report.html") in plugin._display.lines
    assert (tmp_path / "watch" / plan["run_id"] / "reported.json").is_file(), "the guard has nothing left to do"


def test_a_run_whose_nodes_answered_writes_no_reports_from_the_callback(callback, tmp_path):
    plugin = callback()
    plugin.playbook = "train.yml"
    plan = {"run_id": "20261121T101500Z-r1", "nodes": {"node1": {}, "node2": {}}}
    plugin.observe_run("localhost", "clusterval.training.training_plan", {"plan": plan, "run_dir": str(tmp_path)})
    plugin.v2_playbook_on_stats(SimpleNamespace(processed={}, summarize=lambda host: {}))
    assert not (tmp_path / "results.json").exists()
