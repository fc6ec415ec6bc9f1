"""Every stop is reported (issue 21, item 2): where a run stopped, the nodes that stopped it, the nodes that
never started and the stage timeline, in results.json, JUnit and the HTML; a reused run directory keeps
each run's reports apart; the guard writes the reports of a controller that stopped before it did."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _console, _report_guard, _results, _runlock
from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run

REPO = Path(__file__).resolve().parents[4]
HOSTS = ["node1", "node2", "node3", "node4"]
PLAN = {"run_id": "20261126T101500Z-abc123-c", "config_name": "c", "framework": "maxtext", "model": "m",
        "gpu_arch": "mi300x", "mode": "multi_node", "final_step": 9, "total_steps": 10, "warmup_steps": 3,
        "simulated": True, "nodes": {h: {"host": h} for h in HOSTS}}
ECHO = "stopped because another node failed (see above)"


def records(failed=None, msgs=None, reached=None):
    """What train.yml's rescue records: node3 unreachable has none (Ansible takes it out of the play)."""
    return _results.host_records(failed or {}, msgs or {}, reached or {})


def write(tmp_path, hosts, judged=False, verdict=None, teardown=None, interrupted=None, stage=None):
    stop, stages = _results.stop_and_stages(PLAN, str(tmp_path), verdict if judged else None, ECHO, hosts, None, teardown,
                                            interrupted=interrupted, stage=stage)
    return reported_run(PLAN, str(tmp_path), verdict, ECHO, teardown, stop=stop, stages=stages)


def junit(tmp_path):
    root = ET.parse(tmp_path / "junit.xml").getroot()
    cases = [(c.get("classname"), c.get("name"), [e.tag for e in c]) for c in root.iter("testcase")]
    return root, cases


def echoes(hosts, reached="preflight"):
    return records({h: "" for h in hosts}, {h: ECHO for h in hosts}, {h: reached for h in hosts})


def test_a_node_unreachable_in_preflight_is_named_in_all_three_reports(tmp_path):
    hosts = echoes(["node1", "node2", "node4"])  # node3: no record at all, it left the play
    teardown = {"node1": {"ok": True}, "node2": {"ok": True}, "node3": {}, "node4": {"ok": True}}
    written = write(tmp_path, hosts, teardown=teardown)
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["verdict"] == "FAIL"
    assert document["headline"].startswith("FAIL: stopped in preflight: node3: unreachable")
    assert document["stop"]["hosts"] == ["node3"] and document["stop"]["stage"] == "preflight"
    assert document["stop"]["never_started"] == HOSTS
    assert "(see above)" not in document["headline"]
    root, cases = junit(tmp_path)
    assert int(root.get("errors")) + int(root.get("failures")) >= 1
    assert cases[0] == ("clusterval.training.run", "stopped in preflight", ["error"])
    html = (tmp_path / "report.html").read_text()
    assert "No check failed" not in html
    assert "node3: unreachable" in html and "The run stopped in preflight" in html
    assert '<li class="failed"><b>\u2715 preflight</b>failed' in html
    assert "see above" not in html and "teardown</dt><dd>not run (the node left the play): node3" in html
    assert '<li class="not_reached"><b>\u2013 training</b>not reached' in html
    assert written["document"]["stop"] == document["stop"]


def test_a_node_whose_container_did_not_start_is_the_one_named_not_the_echoes(tmp_path):
    hosts = echoes(HOSTS, "shipped")
    hosts["node2"] = {"task": "Container | Start or replace the training container, running the framework",
                      "msg": "Error starting container: no space left on device", "reached": "shipped"}
    write(tmp_path, hosts)
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["headline"] == ("FAIL: stopped in container start: node2: Error starting container: "
                                    "no space left on device")
    assert document["stop"]["hosts"] == ["node2"]
    stages = {s["stage"]: s["outcome"] for s in document["stages"]}
    got = (stages["node preparation"], stages["container start"], stages["training"])
    assert got == ("ok", "failed", "not reached")
    lines = _console.verdict_lines(document)
    assert "stopped in container start:" in lines
    assert "  training never started on 4 nodes: node[1-4]" in lines


def test_the_stage_comes_from_how_far_the_nodes_got_when_no_node_failed_on_its_own():
    stop = _results.stop_section(PLAN, echoes(["node1", "node2", "node4"], "shipped"), None, ECHO)
    assert (stop["stage"], stop["hosts"]) == ("node preparation", ["node3"])


def test_only_echoes_never_give_see_above_as_the_cause():
    stop = _results.stop_section(PLAN, echoes(HOSTS), None, ECHO)
    assert stop["hosts"] == [] and "see above" not in stop["cause"]


def test_several_nodes_are_counted_and_each_keeps_its_line():
    hosts = echoes(["node1", "node4"])
    hosts["node2"] = {"task": "Preflight | Verdict", "msg": "preflight failed on node2: gpus: 7 of 8", "reached": ""}
    stop = _results.stop_section(PLAN, hosts, None, ECHO)
    assert stop["cause"] == "2 node(s) stopped the run: node[2-3]"
    assert stop["lines"] == ["node3: unreachable (out of the play before the run's end: no answer over SSH)",
                             "preflight failed on node2: gpus: 7 of 8"]


def test_an_interrupted_run_keeps_its_checks_but_never_its_pass(tmp_path):
    verdict = {"verdict": "PASS", "headline": "PASS", "failures": [], "checks": [
        {"node": "node1", "check": "completion", "metric": "step", "status": "pass", "detail": "step 9"}]}
    write(tmp_path, {}, judged=True, verdict=verdict, interrupted="SIGINT", stage="teardown")
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["verdict"] == "FAIL" and document["checks"] == verdict["checks"]
    assert document["headline"] == "FAIL: stopped in teardown: the controller was interrupted (SIGINT) in teardown"
    assert {s["stage"]: s["outcome"] for s in document["stages"]}["teardown"] == "interrupted"
    root, cases = junit(tmp_path)
    assert ("clusterval.training.run", "stopped in teardown", ["error"]) in cases


def test_a_run_judged_to_its_end_has_no_stop_and_a_timeline_of_done_stages(tmp_path):
    stop, stages = _results.stop_and_stages(PLAN, str(tmp_path), {"verdict": "PASS"}, None, {}, None,
                                            {"node1": {"ok": True}})
    assert stop is None
    assert [s["outcome"] for s in stages] == ["ok", "ok", "skipped", "ok", "ok", "ok", "ok", "ok", "ok"]
    assert stages[0]["start"] == _results.epoch_of_run_id(PLAN["run_id"]) == 1795688100.0


def test_a_judged_fail_fails_the_stage_it_failed_in_and_a_stage_not_reached_has_no_times(tmp_path):
    crash = {"verdict": "FAIL", "culprit": {"host": "node2"}, "checks": [
        {"node": "node2", "check": "errors", "status": "fail"}]}
    slow = {"verdict": "FAIL", "culprit": None, "checks": [
        {"node": "node2", "check": "threshold", "metric": "tokens_per_sec_per_gpu", "status": "fail"}]}
    times = {"planned": 1.0, "launched": 5.0, "watch_started": 6.0, "watch_ended": 9.0, "now": 10.0}
    for verdict, stage in ((crash, "training"), (slow, "verdict")):
        stages = _results.timeline(PLAN, None, times, True, {}, True, _results.failed_stage(verdict))
        assert [s["stage"] for s in stages if s["outcome"] == "failed"] == [stage]
        assert {s["stage"]: s["outcome"] for s in stages}["reports"] == "ok"
    stop = {"stage": "training", "interrupted": "SIGINT"}
    stages = {s["stage"]: s for s in _results.timeline(PLAN, stop, times, False, None)}
    assert stages["training"]["outcome"] == "interrupted"
    assert stages["verdict"] == {"stage": "verdict", "outcome": "not reached", "start": None, "end": None}


def test_the_fabric_gate_recorded_at_the_start_is_not_skipped_in_a_later_report(tmp_path):
    _results.record_fabric(str(tmp_path), PLAN["run_id"], {"failed": False, "msg": "fabric gate PASS"})
    stop, stages = _results.stop_and_stages(PLAN, str(tmp_path), None, None, {}, None, None, interrupted="SIGINT",
                                            stage="training")
    assert {s["stage"]: s["outcome"] for s in stages}["fabric"] == "ok"
    _results.record_fabric(str(tmp_path), PLAN["run_id"], {"not_run": "no rccl-tests in the image"})
    stop, stages = _results.stop_and_stages(PLAN, str(tmp_path), None, None, {}, None, None, interrupted="SIGINT",
                                            stage="training")
    assert {s["stage"]: s["outcome"] for s in stages}["fabric"] == "skipped"


def test_a_failed_teardown_is_a_failed_stage():
    stages = _results.timeline(PLAN, None, {"now": 10.0}, True, {"node2": {"ok": False, "msg": "dead"}})
    assert {s["stage"]: s["outcome"] for s in stages}["teardown"] == "failed"


def test_the_stage_of_each_task_of_train_yml():
    assert _results.stage_of_task("Preflight | Probe the node") == "preflight"
    assert _results.stage_of_task("Train | What runs each rank (the supervisor)") == "node preparation"
    assert _results.stage_of_task("Node prep | RDMA provider libraries") == "node preparation"
    assert _results.stage_of_task("Train | Start every rank and follow the whole cluster") == "training"
    assert _results.stage_of_task("Teardown | Remove the containers") == "teardown"
    assert _results.stage_of_task("Gathering Facts") is None
    # as a callback sees it: the role's name first
    assert _results.stage_of_task("clusterval.training.container : Container | Start or replace") == "container start"
    assert _results.stage_of_task("clusterval.training.container : Validating arguments against arg spec 'main' - "
                                  "Start or replace the training container on a node") == "container start"
    assert _results.stage_of_task("clusterval.training.node_prep : Validating arguments against arg spec 'main'") \
        == "node preparation"
    assert _results.stage_of_task("clusterval.training.train : Validating arguments against arg spec 'ship'") \
        == "node preparation"


def test_a_reused_run_dir_keeps_the_earlier_run_under_its_run_id(tmp_path):
    (tmp_path / "logs" / "node1").mkdir(parents=True)
    (tmp_path / "logs" / "node1" / "training.log").write_text("old\n")
    (tmp_path / "results.json").write_text(json.dumps({"run_id": "old-run"}))
    (tmp_path / "report.html").write_text("old")
    moved = _results.keep_earlier_run(str(tmp_path), PLAN["run_id"])
    assert moved == str(tmp_path / "previous" / "old-run")
    assert (tmp_path / "previous" / "old-run" / "logs" / "node1" / "training.log").read_text() == "old\n"
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "report.html").exists()
    (tmp_path / "plan.json").write_text(json.dumps({"run_id": PLAN["run_id"]}))
    assert _results.keep_earlier_run(str(tmp_path), PLAN["run_id"]) is None  # the run's own files stay


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("interrupted", [True, False], ids=["sigint-recorded", "killed"])
def test_the_guard_writes_the_reports_when_the_controller_dies_and_then_exits(tmp_path, interrupted):
    controller = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = _report_guard.spawn(PLAN, str(tmp_path), controller.pid, [str(REPO / ".collections")])
        assert pid and _report_guard.spawn(PLAN, str(tmp_path), controller.pid, []) is None  # one per run
        if interrupted:
            _report_guard.mark(str(tmp_path), PLAN["run_id"], _results.INTERRUPT_FILE,
                               {"signal": "SIGINT", "task": "Container | Start or replace the training container"})
        time.sleep(0.5)
        assert not (tmp_path / "results.json").exists()  # nothing while the controller lives
    finally:
        controller.send_signal(signal.SIGKILL)
        controller.wait()
    reported = tmp_path / "watch" / PLAN["run_id"] / _results.REPORTED_FILE
    assert wait_for(reported.exists, 30), \
        (tmp_path / "watch" / PLAN["run_id"] / "guard.out").read_text()
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["verdict"] == "FAIL" and document["stop"]["never_started"] == HOSTS
    if interrupted:
        assert document["headline"].startswith("FAIL: stopped in container start: the controller (ansible-playbook, "
                                               "pid %d) was interrupted (SIGINT)" % controller.pid)
        assert "stops itself within the lease timeout (train_lease_timeout; " in document["headline"], \
            "before the gang start the lease stops a container too: the message says so"
    else:
        assert "ended without its reports: killed, or lost" in document["headline"]
    assert sorted(os.listdir(tmp_path)) == ["junit.xml", "report.html", "results.json", "watch"]
    assert wait_for(lambda: not _report_guard.alive(pid) or zombie(pid), 10), "the guard is still running"


def zombie(pid):
    try:
        return Path("/proc/%d/stat" % pid).read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_the_guard_leaves_a_run_that_wrote_its_own_reports_alone(tmp_path):
    _report_guard.mark(str(tmp_path), PLAN["run_id"], _results.REPORTED_FILE, {"by": "playbook"})
    guard = {"plan": PLAN, "run_dir": str(tmp_path), "controller_pid": 1}
    assert _report_guard.report_stop(guard) is None
    assert not (tmp_path / "results.json").exists()


LOGGED_PLAN = dict(PLAN, nodes={h: {"host": h, "log_path": "/logs/clusterval/r/%s.log" % h} for h in HOSTS[:2]})
REACH = {"ansible_playbook": "/venv/bin/ansible-playbook", "inventories": ["inv/hosts.yml"], "cwd": "/work",
         "collection_paths": ["/work/.collections"]}


def test_the_guard_reaches_the_nodes_for_their_logs_as_the_controller_did(tmp_path):
    guard = {"plan": LOGGED_PLAN, "run_dir": str(tmp_path), "collect": REACH}
    argv = _report_guard.collect_argv(guard, ["training_hosts=node1:node2", "@vars.yml"])
    assert argv[:7] == ["/venv/bin/ansible-playbook", "-i", "inv/hosts.yml", "-e", "training_hosts=node1:node2",
                        "-e", "@vars.yml"]
    assert argv[-1] == "clusterval.training.collect_logs"
    assert json.loads(argv[-2]) == {"collect_dir": str(tmp_path / "logs"),
                                    "collect_logs": {h: "/logs/clusterval/r/%s.log" % h for h in HOSTS[:2]}}
    assert _report_guard.collect_argv(dict(guard, collect={}), []) is None, "a guard of the results action alone"


def test_an_interrupted_runs_logs_come_back_after_an_earlier_runs_are_moved_aside(tmp_path, monkeypatch):
    (tmp_path / "logs" / "node1").mkdir(parents=True)
    (tmp_path / "logs" / "node1" / "training.log").write_text("the earlier run's\n")
    (tmp_path / "results.json").write_text(json.dumps({"run_id": "earlier"}))

    def fetched(guard):
        (Path(guard["run_dir"]) / "logs" / "node2").mkdir(parents=True)
        (Path(guard["run_dir"]) / "logs" / "node2" / "training.log").write_text("completed step: 1\n")

    monkeypatch.setattr(_report_guard, "collect_logs", fetched)
    written = _report_guard.report_stop({"plan": LOGGED_PLAN, "run_dir": str(tmp_path), "collect": REACH,
                                         "controller_pid": 1}, collect=True)
    assert written is not None
    assert (tmp_path / "previous" / "earlier" / "logs" / "node1" / "training.log").read_text() == "the earlier run's\n"
    assert sorted(os.listdir(tmp_path / "logs")) == ["node2"], "only this run's logs beside its reports"


def test_each_poll_of_the_watch_is_one_progress_line_for_its_loop_label():
    result = {"done": False, "progress": {"nodes": 2, "done": 1, "failed": 1, "final_step": 9,
                                          "step": {"min": 4, "median": 6, "max": 9}}}
    line = _console.poll_line(result, "node1")
    assert line.startswith("[") and "6/9 (4-9)" in line and "1/2 done 1 FAILED" in line
    node = _console.poll_line({"host": "node2", "progress": {"step": 3, "final_step": 9}}, "node2")
    assert node.startswith("[node2] step 3/9"), "a per-node result: the node's own line"


def test_a_task_prints_its_own_lines_only_beside_a_stdout_that_people_read():
    assert _console.human_stdout("default") and _console.human_stdout("clusterval.training.training_console")
    assert _console.human_stdout("community.general.yaml") and _console.human_stdout("")
    assert not _console.human_stdout("json") and not _console.human_stdout("ansible.builtin.json")
    assert not _console.human_stdout("ansible.posix.jsonl")


def busy_line(host, run_id):
    return {"task": "Preflight | Verdict", "reached": "", "msg": "preflight failed on %s: busy: %s" % (
        host, _runlock.busy_detail(host, {"run_id": run_id, "started_at": "2026-11-29T02:00:00Z",
                                          "controller": "alice@ctl", "reason": "its container c is running"}))}


def test_two_busy_nodes_are_named_busy_with_the_run_that_holds_them():
    hosts = dict(echoes(["node1", "node2"]), node3=busy_line("node3", "R1"), node4=busy_line("node4", "R1"))
    stop = _results.stop_section(PLAN, hosts, None, ECHO)
    assert stop["cause"] == ("2 nodes are busy with run R1: node[3-4]; stop it with `ansible-playbook -i <inventory> "
                             "clusterval.training.teardown -e training_run_id=R1`, or replace it with "
                             "-e training_takeover=true")
    hosts["node4"] = busy_line("node4", "R2")
    assert _results.stop_section(PLAN, hosts, None, ECHO)["cause"].startswith(
        "2 nodes are busy with runs R1, R2: node[3-4]; stop each with the teardown of its run id")
    hosts["node4"] = {"task": "Preflight | Verdict", "msg": "preflight failed on node4: gpus: 7 of 8", "reached": ""}
    assert _results.stop_section(PLAN, hosts, None, ECHO)["cause"] == "2 node(s) stopped the run: node[3-4]"


def test_the_guard_promises_the_lease_before_the_gang_start_too():
    assert _report_guard.how_nodes_stop("training") == "the nodes stop their jobs themselves within the lease timeout"
    assert _report_guard.how_nodes_stop("container start").startswith(
        "every container that started stops itself within the lease timeout")


def test_every_node_lost_in_training_names_none_and_says_how_their_jobs_stop(tmp_path):
    lost = {h: {"task": "clusterval.training.train : Train | Watch the nodes", "msg": "ssh: connect to host %s" % h}
            for h in HOSTS}
    written = _report_guard.unreachable_reports(PLAN, str(tmp_path), lost)
    stop = written["document"]["stop"]
    assert stop["stage"] == "training" and stop["hosts"] == []
    assert stop["cause"].startswith("no node answered over SSH (node[1-4]); no node stands out")
    assert stop["cause"].endswith("the nodes stop their jobs themselves within the lease timeout")


def test_the_one_node_of_a_run_lost_over_ssh_is_named_with_sshs_own_words(tmp_path):
    plan = dict(PLAN, nodes={"node1": {"host": "node1"}})
    lost = {"node1": {"task": "Preflight | What each node has", "msg": "Task failed: Data could not be sent to remote "
                      "host \"10.0.0.1\". Make sure this host can be reached over ssh: Permission denied (publickey)."}}
    stop = _report_guard.unreachable_reports(plan, str(tmp_path), lost)["document"]["stop"]
    assert stop["hosts"] == ["node1"]
    assert stop["cause"] == "node1: unreachable (Permission denied (publickey))"


GATE_FAIL = "fabric gate FAIL: node3 alone: exit status 1, no bus bandwidth in its output"


@pytest.mark.parametrize("named, culprits", [([{"kind": "node", "name": "node3", "evidence": "node3 alone: ..."}],
                                              ["node3"]),
                                             ([], [])], ids=["node-named", "none-named"])
def test_the_fabric_gates_fail_is_the_gates_never_the_node_its_verdict_ran_from(tmp_path, named, culprits):
    """The gate's verdict task runs once, on the first node: node1 carries the failure, node3 is the one named."""
    hosts = echoes(["node2", "node3", "node4"], reached="fabric")
    hosts.update(records({"node1": "clusterval.training.fabric : Fabric | Verdict"}, {"node1": GATE_FAIL},
                         {"node1": "fabric"}))
    gate = {"failed": True, "msg": GATE_FAIL, "named": named, "rounds": [{"name": "alone"}]}
    stop = _results.stop_and_stages(PLAN, str(tmp_path), None, ECHO, hosts, None, None, fabric=gate)[0]
    assert stop["stage"] == "fabric" and stop["hosts"] == culprits
    assert stop["cause"] == GATE_FAIL and stop["lines"] == [GATE_FAIL]
