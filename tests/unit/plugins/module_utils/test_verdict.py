"""Culprit analysis, earned PASS and required thresholds (issue 9, items 1 and 4)."""
from __future__ import annotations

from ansible_collections.clusterval.training.plugins.module_utils import _run_fold, _verdict
from ansible_collections.clusterval.training.plugins.module_utils._metrics import make_check

FINAL = 5


def steps(rate=1000.0, last=FINAL):
    return [{"step": s, "loss": 10.0 - s, "tokens_per_sec_per_gpu": rate, "seconds": 1.0} for s in range(last + 1)]


def healthy(**more):
    state = {"steps": steps(), "last_step": FINAL, "exit_code": 0, "errors": [], "reason": "completed"}
    state.update(more)
    return state


def error(text, cls="crash", pattern="exception", lineno=10, time=None, first_seen=None, consequence=False, step=3):
    return {"class": cls, "text": text, "line": lineno, "lineno": lineno, "pattern": pattern, "time": time,
            "first_seen": first_seen, "consequence": consequence, "step": step}


def crashed(errors, failed_at=100.0, exit_code=1):
    return {"steps": steps(last=3), "last_step": 3, "exit_code": exit_code, "errors": errors, "reason": "error",
            "failed_at": failed_at}


def plan(thresholds=None, hosts=("node1", "node2", "node3", "node4")):
    return {"framework": "maxtext", "final_step": FINAL, "warmup_steps": 1, "run_id": "r",
            "thresholds": thresholds if thresholds is not None else [],
            "nodes": {h: {"prints_steps": True} for h in hosts}}


def four_node_crash_on_node3():
    died = "Terminating process because the JAX distributed service detected fatal errors. This most likely " \
           "indicates that another task died"
    return {
        "node1": crashed([error(died, "coordination", "jax_fatal", time=105.0, consequence=True)], 106.0),
        "node2": crashed([error(died, "coordination", "jax_fatal", time=104.0, consequence=True)], 105.0),
        "node3": crashed([error("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RCCL operation failed", "crash",
                                "traceback", time=None, first_seen=101.0)], 101.5),
        "node4": crashed([error(died, "coordination", "jax_fatal", time=None, first_seen=107.0, consequence=True)], 107.0),
    }


def test_the_culprit_of_a_four_node_crash_is_node3_with_its_exception_line():
    outcome = _verdict.verdict(plan(), four_node_crash_on_node3())
    assert outcome["verdict"] == "FAIL"
    assert outcome["culprit"] == {"host": "node3", "class": "crash", "step": 3, "lineno": 10, "time": 101.0, "evidence": "line",
                                  "text": "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RCCL operation failed"}
    assert outcome["consequences"] == ["node1", "node2", "node4"]
    assert outcome["headline"] == ("FAIL: node3 crash at step 3: jaxlib.xla_extension.XlaRuntimeError: INTERNAL: "
                                   "RCCL operation failed (3 other nodes stopped as a consequence)")
    assert outcome["failures"][0].startswith("node3: ")


def test_an_earlier_consequence_line_does_not_make_its_node_the_culprit():
    nodes = four_node_crash_on_node3()
    nodes["node1"]["errors"][0]["time"] = 50.0  # the peer's complaint has an earlier timestamp
    assert _verdict.verdict(plan(), nodes)["culprit"]["host"] == "node3"


def test_order_by_log_time_before_poll_time():
    nodes = {"node1": crashed([error("RuntimeError: a", time=200.0, first_seen=90.0)], 90.0),
             "node2": crashed([error("RuntimeError: b", time=150.0, first_seen=95.0)], 95.0)}
    analysis = _run_fold.analyse(nodes)
    assert analysis["culprit"]["host"] == "node2" and analysis["independent"] == ["node1"]


def test_a_node_that_only_exited_after_another_failed_is_a_consequence():
    nodes = {"node1": crashed([error("OSError: [Errno 28] No space left on device", "disk", "no_space",
                                     first_seen=10.0)], 10.0),
             "node2": {"steps": steps(last=2), "last_step": 2, "exit_code": 137, "errors": [], "reason": "exit",
                       "failed_at": 12.0, "msg": "node2: exited with status 137"}}
    analysis = _run_fold.analyse(nodes)
    assert analysis["culprit"]["host"] == "node1" and analysis["culprit"]["class"] == "disk"
    assert analysis["consequences"] == ["node2"]


def test_a_hang_without_any_failure_line_names_the_node():
    nodes = {"node1": healthy(), "node2": {"steps": steps(last=2), "last_step": 2, "exit_code": None, "errors": [],
                                           "reason": "hang", "failed_at": 40.0, "msg": "node2: no progress for 60s"}}
    outcome = _verdict.verdict(plan(hosts=("node1", "node2")), nodes)
    assert outcome["verdict"] == "FAIL" and outcome["culprit"]["host"] == "node2"
    assert outcome["headline"] == "FAIL: node2 hang at step 2: node2: no progress for 60s"


def test_a_silent_rank_that_never_reported_its_exit_fails():
    p = plan(hosts=("node1", "node2"))
    p["framework"] = "megatron"
    p["nodes"]["node1"]["prints_steps"] = False
    nodes = {"node1": {"steps": [], "exit_code": None, "errors": []}, "node2": healthy()}
    outcome = _verdict.verdict(p, nodes)
    assert outcome["verdict"] == "FAIL"
    assert any(f.startswith("node1: ") and "never reported an exit status" in f for f in outcome["failures"])


def test_a_silent_rank_hung_is_a_fail_naming_it():
    p = plan(hosts=("node1", "node2"))
    p["nodes"]["node1"]["prints_steps"] = False
    nodes = {"node1": {"steps": [], "exit_code": None, "errors": [], "reason": "hang", "failed_at": 30.0,
                       "msg": "node1: rank 0 did not exit within 30s of the last step"}, "node2": healthy()}
    outcome = _verdict.verdict(p, nodes)
    assert outcome["culprit"]["host"] == "node1" and outcome["verdict"] == "FAIL"


UNSET = {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": None, "set": False, "direction": "higher"}


def test_pass_without_throughput_thresholds_says_so():
    nodes = {h: healthy() for h in ("node1", "node2")}
    outcome = _verdict.verdict(plan([UNSET], hosts=("node1", "node2")), nodes)
    assert outcome["verdict"] == "PASS"
    assert outcome["headline"] == "PASS (throughput not judged: no thresholds for tokens_per_sec_per_gpu)"
    assert outcome["judged"] == [] and outcome["unjudged"] == [{"metric": "tokens_per_sec_per_gpu",
                                                               "reason": "no threshold set"}]


def test_require_thresholds_makes_an_unset_threshold_a_fail():
    nodes = {h: healthy() for h in ("node1", "node2")}
    outcome = _verdict.verdict(plan([UNSET], hosts=("node1", "node2")), nodes, require_thresholds=True)
    assert outcome["verdict"] == "FAIL"
    assert "training_require_thresholds is true" in outcome["failures"][0]


def test_a_threshold_not_enforced_is_reported_not_failed():
    threshold = {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 5000.0, "set": True, "enforce": False}
    nodes = {h: healthy() for h in ("node1", "node2")}
    outcome = _verdict.verdict(plan([threshold], hosts=("node1", "node2")), nodes)
    assert outcome["verdict"] == "PASS"
    assert {c["status"] for c in outcome["checks"] if c["check"] == "threshold"} == {"info"}
    assert outcome["unjudged"][0]["reason"].startswith("not enforced")


def test_a_judged_slow_cluster_fails_without_culprit_line():
    threshold = {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 5000.0, "set": True}
    nodes = {h: healthy() for h in ("node1", "node2")}
    outcome = _verdict.verdict(plan([threshold], hosts=("node1", "node2")), nodes)
    assert outcome["verdict"] == "FAIL" and outcome["culprit"] is None
    assert outcome["headline"].startswith("FAIL: threshold tokens_per_sec_per_gpu failed on all 2 nodes alike (node1: ")
    assert outcome["headline"].endswith("; no node stands out")
    assert outcome["judged"] == ["tokens_per_sec_per_gpu"]


def test_a_check_failed_on_some_nodes_names_them_by_their_own_figures():
    checks = [make_check(n, "threshold", "fail" if n in ("node2", "node3") else "pass", "tokens_per_sec_per_gpu",
                         5000.0, 10.0, "tokens_per_sec_per_gpu 10.0 < 5000.0") for n in ("node1", "node2", "node3")]
    checks.append(make_check("node3", "loss", "fail", "loss", None, None, "loss is NaN at step 7"))
    assert _verdict.checks_headline(checks) == (
        "FAIL: threshold tokens_per_sec_per_gpu failed on node[2-3] (node2: tokens_per_sec_per_gpu 10.0 < 5000.0) "
        "(1 other failed check)")
    assert _verdict.checks_headline(checks[:1] + checks[2:3]) == "FAIL: node3: tokens_per_sec_per_gpu 10.0 < 5000.0"


def test_isolation_is_recommended_when_no_node_stands_out_or_every_node_is_slow():
    hang = {"verdict": "FAIL", "culprit": None, "checks": [],
            "run_cause": {"class": "hang", "text": "all 4 nodes stopped after step 11; no node stands out"}}
    assert _verdict.undetermined_reason(hang) == "hang: all 4 nodes stopped after step 11; no node stands out"
    slow = {"verdict": "FAIL", "culprit": None, "run_cause": None, "checks": [
        {"node": n, "check": "threshold", "metric": "tokens_per_sec_per_gpu", "status": "fail"} for n in ("a", "b")]}
    assert "slow as a whole" in _verdict.undetermined_reason(slow)
    named = dict(hang, culprit={"host": "node2"})
    assert _verdict.undetermined_reason(named) is None
    one_slow = dict(slow, checks=slow["checks"][:1])
    assert _verdict.undetermined_reason(one_slow) is None
