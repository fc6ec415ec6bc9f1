"""The run watch under Slurm: the job's state each poll, no timer while it pends, Slurm's end as evidence."""
import time

from ansible_collections.clusterval.training.plugins.module_utils import _run_watch
from test_run_watch import CLUSTER, LIMITS, PLAN, T0


def watch(run_dir, now, pending_limit=600.0):
    return _run_watch.ClusterWatch.load(PLAN, ["n1", "n2"], str(run_dir), LIMITS, CLUSTER, 30.0, 42, now,
                                        pending_limit)


def read(state, reason="None", records=None, reasons=()):
    job = {"state": state, "reason": reason, "nodes": ["n1", "n2"], "end": "Unknown", "ended_at": None}
    return {"nodes": {h: {"records": r, "offset": 10 * len(r)} for h, r in (records or {}).items()},
            "scheduler": {"job": job, "reasons": list(reasons)}}


def steps(first, last, at):
    return [{"t": "step", "step": n, "loss": 1.0, "time": at} for n in range(first, last)]


def test_no_timer_runs_while_the_job_pends(tmp_path):
    for minute in range(0, 30, 5):
        # the startup timeout is 300 s, the stale timeout 10 s: 25 minutes of pending trips neither
        answer = watch(tmp_path, T0, pending_limit=7200).poll(read("PENDING", "Priority"), "login", T0 + 60 * minute)
        assert not answer["done"], answer
    started = T0 + 1501
    answer = watch(tmp_path, T0).poll(read("RUNNING", records={"n1": steps(0, 1, started), "n2": steps(0, 1, started)}),
                                      "login", started + 1)
    assert not answer["done"] and answer["progress"]["elapsed_s"] <= 2


def test_the_pending_limit_ends_the_run_naming_the_schedulers_reason_and_no_node(tmp_path):
    watch(tmp_path, T0, pending_limit=60).poll(read("PENDING", "Reservation"), "login", T0)
    answer = watch(tmp_path, T0, pending_limit=60).poll(read("PENDING", "Reservation"), "login", T0 + 61)
    assert answer["done"] and answer["failed"] and answer["culprit"] is None
    assert answer["run_cause"]["class"] == "pending"
    assert "Slurm's reason: Reservation" in answer["run_cause"]["text"]


def test_a_node_slurm_lost_is_named_with_slurms_reason_and_the_others_are_its_consequences(tmp_path):
    watch(tmp_path, T0).poll(read("RUNNING", records={"n1": steps(0, 3, T0), "n2": steps(0, 3, T0)}), "login", T0 + 1)
    broken = [{"t": "error", "class": "network", "text": "Connection reset by peer", "lineno": 9, "time": T0 + 30}]
    reasons = [{"node": "n2", "state": "down", "since": "2026-11-29T01:46:02", "reason": "Not responding"}]
    answer = watch(tmp_path, T0).poll(read("NODE_FAIL", records={"n1": broken}, reasons=reasons), "login", T0 + 40)
    answer = watch(tmp_path, T0).poll(read("NODE_FAIL", reasons=reasons), "login", T0 + 43)
    assert answer["done"]
    outcome = _run_watch.conclude(str(tmp_path), "r1", ["n1", "n2"])
    assert outcome["culprit"]["host"] == "n2" and outcome["culprit"]["evidence"] == "slurm", outcome["culprit"]
    assert "NODE_FAIL: n2 is down: Not responding" in outcome["culprit"]["text"]
    assert outcome["consequences"] == ["n1"]


def test_a_time_limit_is_the_runs_cause_even_when_the_nodes_reported_what_it_did_first(tmp_path):
    watch(tmp_path, T0).poll(read("RUNNING", records={"n1": steps(0, 3, T0), "n2": steps(0, 3, T0)}), "login", T0 + 1)
    stopped = [{"t": "exit", "exit_code": 143, "reason": "signal", "time": T0 + 10}]
    hit = [{"t": "error", "class": "coordination", "text": "peer n1 went away", "lineno": 7, "time": T0 + 10.5}]
    answer = watch(tmp_path, T0).poll(read("COMPLETING", records={"n1": stopped, "n2": hit}), "login", T0 + 11)
    answer = watch(tmp_path, T0).poll(read("COMPLETING"), "login", T0 + 20)
    assert answer["done"]
    sacct = {"JobID": "9", "State": "TIMEOUT", "Reason": "TimeLimit",
             "End": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(T0 + 10))}
    outcome = _run_watch.conclude(str(tmp_path), "r1", ["n1", "n2"], {"sacct": sacct, "srun_errors": {}})
    assert outcome["culprit"] is None and outcome["run_cause"]["class"] == "time limit", outcome


def test_a_job_that_ended_without_a_supervisors_word_ends_each_node_after_a_settle(tmp_path):
    answer = watch(tmp_path, T0).poll(read("FAILED"), "login", T0 + 1)
    assert not answer["done"]
    answer = watch(tmp_path, T0).poll(read("FAILED"), "login", T0 + 4)
    assert answer["done"] and answer["failed"]
    record = {"sacct": {"State": "FAILED"}, "srun_errors": {
        "n1": {"exit_code": 125, "line": "srun: error: n1: task 0: Exited with exit code 125",
               "step": "the container could not run: no such image: x"}}}
    outcome = _run_watch.conclude(str(tmp_path), "r1", ["n1", "n2"], record)
    assert outcome["culprit"]["host"] == "n1" and outcome["culprit"]["text"] == "the container could not run: no such image: x"


def test_the_login_host_unreachable_is_the_runs_cause(tmp_path):
    answer = watch(tmp_path, T0).poll({"unreachable": True, "msg": "ssh: connect to host login: timed out"}, "login",
                                      T0 + 1)
    assert answer["done"] and answer["culprit"] is None and answer["run_cause"]["class"] == "login"
