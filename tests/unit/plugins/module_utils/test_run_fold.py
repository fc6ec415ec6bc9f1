"""The cluster watch: supervisor records folded into node states, decisions, the contract-6 answer."""
import time

from ansible_collections.clusterval.training.plugins.module_utils import _run_fold, _run_records
from ansible_collections.clusterval.training.plugins.module_utils._run_records import ClusterLimits, Limits

T0 = 1_000_000.0
FINAL = 9
LIMITS = Limits(hang_timeout=60.0, startup_timeout=300.0, deadline=3600.0)
CLUSTER = ClusterLimits(stale_timeout=10.0, exit_grace=20.0, settle=3.0)


def node(rank, prints=True):
    return {"node_rank": rank, "prints_steps": prints}


def step(n, rate=100.0):
    return {"t": "step", "step": n, "loss": 10.0 - n * 0.1, "tokens_per_sec_per_gpu": rate, "time": T0 + n}


def states_of(hosts):
    return {h: _run_records.new_cluster_state(h, T0) for h in hosts}


def feed(state, records, now):
    _run_fold.fold_stream(state, {"records": records, "offset": 100}, now)


def decide(state, now, prints=True, printer=None, rank=0):
    decision = _run_fold.decide_cluster_node(state, node(rank, prints), FINAL, LIMITS, CLUSTER, printer, now)
    _run_records.apply_decision(state, decision, now)
    return decision


def test_records_fold_into_the_contract_1_node_state_keeping_unknown_keys():
    state = _run_records.new_cluster_state("n1", T0)
    error = {"t": "error", "class": "crash", "text": "Segmentation fault", "line": "x", "lineno": 7,
             "pattern": "Seg", "time": None, "first_seen": None, "step": 3, "consequence": False, "new_key": 1}
    feed(state, [{"t": "up"}, {"t": "start", "time": T0 + 1}, step(1), step(2), error,
                 {"t": "meta", "framework": "maxtext", "simulated": True}], T0 + 5)
    assert state["last_step"] == 2 and [s["step"] for s in state["steps"]] == [1, 2]
    assert "t" not in state["steps"][0]
    assert state["errors"][0]["new_key"] == 1 and state["errors"][0]["first_seen"] == T0 + 5
    assert state["framework"] == "maxtext" and state["simulated"] and state["rank_started_at"] == T0 + 1
    assert state["stream_offset"] == 100 and state["last_record_at"] == T0 + 5
    assert decide(state, T0 + 5).reason == "error"


def test_a_printing_node_completes_only_once_it_also_exited():
    state = _run_records.new_cluster_state("n1", T0)
    feed(state, [{"t": "start", "time": T0}] + [step(n) for n in range(FINAL + 1)], T0 + 10)
    assert not decide(state, T0 + 10).done
    feed(state, [{"t": "exit", "exit_code": 0, "reason": "exit"}], T0 + 11)
    decision = decide(state, T0 + 11)
    assert decision.done and not decision.failed and decision.reason == "completed"


def test_a_printing_node_that_never_exits_after_its_final_step_hangs():
    state = _run_records.new_cluster_state("n1", T0)
    feed(state, [{"t": "start"}] + [step(n) for n in range(FINAL + 1)], T0 + 10)
    feed(state, [{"t": "beat"}], T0 + 10 + CLUSTER.exit_grace + 1)
    decision = decide(state, T0 + 10 + CLUSTER.exit_grace + 1)
    assert decision.failed and decision.reason == "hang" and "did not exit" in decision.msg


def test_a_silent_rank_must_exit_after_its_printing_node_completed_and_is_named():
    printer = _run_records.new_cluster_state("n2", T0)
    feed(printer, [step(n) for n in range(FINAL + 1)], T0 + 10)
    decide(printer, T0 + 10)
    silent = _run_records.new_cluster_state("n1", T0)
    silent["node_rank"] = 0
    feed(silent, [{"t": "start"}], T0 + 1)
    later = T0 + 10 + CLUSTER.exit_grace + 1
    feed(silent, [{"t": "beat"}], later)
    decision = decide(silent, later, prints=False, printer=printer)
    assert decision.failed and decision.reason == "hang" and decision.msg.startswith("n1:")
    assert "printing node n2" in decision.msg


def test_a_silent_rank_that_exits_non_zero_fails_naming_it():
    silent = _run_records.new_cluster_state("n1", T0)
    feed(silent, [{"t": "start"}, {"t": "exit", "exit_code": 1, "reason": "exit"}], T0 + 5)
    decision = decide(silent, T0 + 5, prints=False)
    assert decision.failed and decision.reason == "exit" and "n1" in decision.msg and "status 1" in decision.msg


def test_a_node_whose_supervisor_went_quiet_is_a_suspect_named_after_the_stale_timeout():
    state = _run_records.new_cluster_state("n3", T0)
    feed(state, [{"t": "start"}, step(1)], T0 + 2)
    assert not decide(state, T0 + 2 + CLUSTER.stale_timeout).done
    decision = decide(state, T0 + 3 + CLUSTER.stale_timeout)
    assert decision.failed and decision.reason == "unreachable" and decision.msg.startswith("n3:")


def test_the_supervisors_own_stop_is_named():
    state = _run_records.new_cluster_state("n1", T0)
    feed(state, [{"t": "start"}, {"t": "exit", "exit_code": -15, "reason": "lease"}], T0 + 2)
    decision = decide(state, T0 + 2)
    assert decision.failed and decision.reason == "aborted" and "lease" in decision.msg


def test_the_cause_waits_for_a_quiet_node_before_the_rest_is_aborted():
    states = states_of(["n1", "n2", "n3"])
    for state in states.values():
        feed(state, [{"t": "start"}, step(1)], T0 + 1)
    peer_lost = {"t": "error", "class": "coordination", "text": "another task died", "step": 2, "consequence": True}
    feed(states["n1"], [peer_lost], T0 + 3)
    feed(states["n3"], [{"t": "beat"}], T0 + 3)
    decide(states["n1"], T0 + 3)
    now = T0 + 3 + CLUSTER.settle + 1
    feed(states["n3"], [{"t": "beat"}], now)
    assert not _run_fold.settle_cluster(states, CLUSTER, now), "n2 went quiet: it may hold the cause"
    now = T0 + 1 + CLUSTER.stale_timeout + 1
    assert decide(states["n2"], now).reason == "unreachable"
    culprit = _run_fold.first_failure(states)
    assert culprit["host"] == "n2", "a lost peer is a consequence; the quiet node is the cause"
    _run_fold.abort_the_rest(states, culprit, now)
    assert states["n3"]["reason"] == "aborted" and states["n3"]["stopped_by"] == "n2"


def test_the_answer_has_the_contract_6_shape_and_the_rank_start_spread():
    states = states_of(["n1", "n2", "n3"])
    for i, state in enumerate(states.values()):
        feed(state, [{"t": "start", "time": T0 + 0.5 * i}] + [step(n, 100.0 + i) for n in range(i + 3)], T0 + 5)
    answer = _run_fold.cluster_answer(states, FINAL, T0, T0 + 5, [])
    progress = answer["progress"]
    assert answer["done"] is False and answer["failed"] is False and answer["failures"] == []
    assert progress["nodes"] == 3 and progress["step"] == {"min": 2, "median": 3, "max": 4}
    assert progress["rate"]["median"] == 101.0 and progress["rate_metric"] == "tokens_per_sec_per_gpu"
    assert [s["host"] for s in progress["slowest"]] == ["n1", "n2"]
    assert answer["rank_start_spread_s"] == 1.0


def test_one_poll_of_512_nodes_costs_the_controller_well_under_a_second():
    states = states_of(["node%d" % i for i in range(512)])
    started = time.perf_counter()
    for now in (T0 + 1, T0 + 2):
        for state in states.values():
            feed(state, [step(int(now - T0)), {"t": "beat"}], now)
            decide(state, now)
        _run_fold.cluster_answer(states, FINAL, T0, now, [])
    assert (time.perf_counter() - started) / 2 < 0.25


def test_while_only_consequences_are_seen_the_cause_gets_the_stale_timeout_to_appear():
    states = states_of(["n1", "n2"])
    for state in states.values():
        feed(state, [{"t": "start"}, step(1)], T0 + 1)
    feed(states["n1"], [{"t": "error", "class": "coordination", "text": "another task died", "consequence": True}],
         T0 + 2)
    decide(states["n1"], T0 + 2)
    now = T0 + 2 + CLUSTER.settle + 1
    feed(states["n2"], [{"t": "beat"}], now)
    assert not _run_fold.settle_cluster(states, CLUSTER, now)
    feed(states["n2"], [{"t": "exit", "exit_code": 1, "reason": "exit"}], now + 1)
    assert decide(states["n2"], now + 1).reason == "exit"
    assert _run_fold.first_failure(states)["host"] == "n2"
    assert _run_fold.settle_cluster(states, CLUSTER, now + 1)


def test_a_new_supervisor_of_the_run_id_wipes_what_an_earlier_container_wrote():
    state = _run_records.new_cluster_state("n1", T0)
    crashed = {"t": "error", "class": "crash", "text": "Segmentation fault", "step": 3}
    feed(state, [{"t": "up"}, {"t": "start"}, step(1), crashed, {"t": "exit", "exit_code": 139}], T0 + 5)
    feed(state, [{"t": "restarted"}, {"t": "up"}, {"t": "start", "time": T0 + 6}, step(1)], T0 + 7)
    assert state["errors"] == [] and state["exit_code"] is None and state["supervisor"] == "running"
    assert [s["step"] for s in state["steps"]] == [1]
    assert not decide(state, T0 + 7).done


def test_an_rccl_error_on_the_crashing_node_is_its_own_cause_not_a_consequence():
    states = states_of(["n1", "n2"])
    rccl = {"t": "error", "class": "network", "text": "XlaRuntimeError: INTERNAL: RCCL operation ncclAllReduce failed",
            "step": 4, "consequence": False}
    died = {"t": "error", "class": "coordination", "text": "another task died", "step": 4, "consequence": True}
    feed(states["n1"], [{"t": "start"}, died], T0 + 3)
    decide(states["n1"], T0 + 3)
    feed(states["n2"], [{"t": "start"}, rccl], T0 + 4)
    decide(states["n2"], T0 + 4)
    assert _run_fold.first_failure(states)["host"] == "n2", "the earlier consequence must not lead"
