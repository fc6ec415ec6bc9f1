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


# -- the one decision of the culprit, on recorded streams -----------------------------------------------------

def beat(at, last_step):
    return {"t": "beat", "time": at, "last_step": last_step}


def run_streams(streams, until, every=2.0):
    """Feed each host's records (time-stamped, node clock = controller clock here) poll by poll, deciding
    every node each poll and settling as the watch does; the saved states."""
    states = states_of(streams)
    now = T0
    while now <= until:
        for host, records in streams.items():
            if not states[host]["done"]:
                feed(states[host], [r for r in records if now - every < r.get("time", T0) <= now], now)
        for host, state in states.items():
            if not state["done"]:
                decide(state, now, rank=int(host[-1]))
        culprit = _run_fold.first_failure(states)
        if culprit is not None and _run_fold.settle_cluster(states, CLUSTER, now):
            _run_fold.abort_the_rest(states, culprit, now)
        if all(s["done"] for s in states.values()):
            break
        now += every
    return states


def training(until, steps_every=1.0, last=FINAL):
    records = [{"t": "start", "time": T0}]
    for n in range(last + 1):
        if T0 + 1 + n * steps_every > until:
            break
        records.append(dict(step(n), time=T0 + 1 + n * steps_every))
    records += [beat(T0 + s, None) for s in range(1, int(until - T0) + 1)]
    return sorted(records, key=lambda r: r.get("time", T0))


def test_a_node_killed_is_the_culprit_and_the_survivors_lines_are_its_consequences():
    dead_at = T0 + 5
    survivor_line = {"t": "error", "class": "network", "consequence": False, "lineno": 40, "step": 4,
                     "text": "Gloo all-reduce failed: Connection reset by peer", "time": dead_at + 0.3}
    streams = {"node1": training(T0 + 60) + [survivor_line], "node2": training(dead_at),
               "node3": training(T0 + 60), "node4": training(T0 + 60) + [dict(survivor_line, time=dead_at + 0.4)]}
    streams["node1"].sort(key=lambda r: r.get("time", T0))
    analysis = _run_fold.analyse(run_streams(streams, T0 + 60))
    assert analysis["culprit"]["host"] == "node2"
    assert analysis["culprit"]["class"] == "node lost" and analysis["culprit"]["evidence"] == "silence"
    assert analysis["culprit"]["time"] == dead_at
    assert analysis["independent"] == [] and "node1" in analysis["consequences"] and "node4" in analysis["consequences"]
    assert _run_fold.failure_headline(analysis).startswith("FAIL: node2 node lost")


def test_a_frozen_node_is_named_not_the_node_that_waits_for_it():
    frozen_at = T0 + 5
    # Lock-step: the others stop printing steps when node1 freezes, but their supervisors go on.
    waiting = training(frozen_at) + [beat(T0 + s, 4) for s in range(6, 61)]
    streams = {"node1": training(frozen_at), "node2": waiting, "node3": list(waiting), "node4": list(waiting)}
    states = run_streams(streams, T0 + 60)
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node1" and analysis["culprit"]["class"] == "node lost"


def test_a_lock_step_hang_names_no_node_and_says_where_each_stopped():
    hung = {h: training(T0 + 5) + [beat(T0 + s, 4) for s in range(6, 80)] for h in ("node1", "node2", "node3", "node4")}
    states = run_streams(hung, T0 + 80)
    assert {s["reason"] for s in states.values()} <= {"hang", "aborted"}
    for state in states.values():
        state.update(failed=True, reason="hang")
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"] is None
    assert _run_fold.failure_headline(analysis) == "FAIL: hang: all 4 nodes stopped after step 4; no node stands out"
    assert set(analysis["run_cause"]["evidence"]) == {"node1", "node2", "node3", "node4"}


def test_a_hang_singled_out_by_a_process_in_uninterruptible_sleep():
    states = states_of(["node1", "node2", "node3"])
    for host, state in states.items():
        state.update(done=True, failed=True, reason="hang", last_step=11, msg=f"{host}: hang",
                     sample={"state": "S", "wchan": "sk_wait_data"})
    states["node2"]["sample"] = {"state": "D", "wchan": "amdgpu_fence_wait"}
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node2"
    assert "uninterruptible sleep (D) in amdgpu_fence_wait" in analysis["culprit"]["text"]


def test_a_hang_singled_out_by_the_node_that_stopped_a_step_earlier():
    states = states_of(["node1", "node2", "node3"])
    for host, state in states.items():
        state.update(done=True, failed=True, reason="hang", last_step=12, msg=f"{host}: hang")
    states["node3"]["last_step"] = 11
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node3"
    assert "after step 11, every other node after step 12" in analysis["culprit"]["text"]


def test_one_hung_node_among_completed_ones_is_named():
    states = states_of(["node1", "node2"])
    states["node1"].update(done=True, reason="completed", last_step=FINAL)
    states["node2"].update(done=True, failed=True, reason="hang", last_step=3, msg="node2: hang: no new step")
    assert _run_fold.analyse(states)["culprit"]["host"] == "node2"


def lease_stopped(hosts, step_no=7):
    states = states_of(hosts)
    for state in states.values():
        state.update(done=True, failed=True, reason="aborted", exit_reason="lease", exit_code=-15, last_step=step_no,
                     msg="supervisor stopped the job: lease")
    return states


def test_the_controller_away_past_the_lease_blames_no_node():
    run = {"events": [{"class": "controller", "time": T0 + 50,
                       "text": "the controller was away for 45 s between two polls, longer than the lease timeout"}]}
    analysis = _run_fold.analyse(lease_stopped(["node1", "node2", "node3", "node4"]), run)
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "controller"
    assert _run_fold.failure_headline(analysis).startswith("FAIL: controller: the controller was away for 45 s")


def test_every_lease_lapsing_at_once_blames_no_node_even_without_the_watchs_record():
    analysis = _run_fold.analyse(lease_stopped(["node1", "node2"]))
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "lease"


def test_a_controller_event_without_any_lease_stop_does_not_hide_a_crash():
    states = states_of(["node1", "node2"])
    states["node2"].update(done=True, failed=True, reason="error", errors=[
        {"class": "crash", "text": "Segmentation fault", "lineno": 9, "time": T0 + 3, "consequence": False}])
    run = {"events": [{"class": "controller", "text": "away", "time": T0 + 1}]}
    assert _run_fold.analyse(states, run)["culprit"]["host"] == "node2"


def test_a_takeover_and_a_removed_status_directory_are_the_runs_cause_not_a_nodes():
    for kind in ("takeover", "removed"):
        states = states_of(["node1", "node2"])
        for state in states.values():
            state.update(done=True, failed=False, reason="aborted", msg="stopped")
        run = {"events": [{"class": kind, "text": "said by the watch", "time": T0}]}
        analysis = _run_fold.analyse(states, run)
        assert analysis["culprit"] is None and analysis["run_cause"]["class"] == kind
        assert _run_fold.failure_headline(analysis) == f"FAIL: {kind}: said by the watch"


def test_every_stream_stopping_at_once_names_no_node():
    streams = {h: training(T0 + 5) for h in ("node1", "node2", "node3")}
    analysis = _run_fold.analyse(run_streams(streams, T0 + 40))
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "silence"
    assert "no node stands out" in analysis["run_cause"]["text"]


def test_the_node_the_controller_cannot_reach_is_named_when_it_reaches_the_others():
    states = states_of(["node1", "node2", "node3"])
    for host, state in states.items():
        state.update(done=True, failed=True, reason="hang", last_step=6, msg=f"{host}: hang")
    states["node2"].update(ssh_unreachable=True, msg="node2: hang; the controller cannot reach it either: timed out")
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node2" and analysis["culprit"]["class"] == "node lost"
    assert sorted(analysis["consequences"]) == ["node1", "node3"]


def test_a_container_killed_without_a_word_is_named_before_the_peer_that_died_of_it():
    states = states_of(["node1", "node2"])
    states["node1"].update(done=True, failed=True, reason="exit", exit_code=1, exit_time=T0 + 5.3, last_step=5,
                           msg="node1: the training process exited with status 1 at step 5")
    states["node2"].update(done=True, failed=True, reason="exit", exit_code=137, last_record_time=T0 + 4.9,
                           last_step=5, msg="node2: the training container c exited with status 137 at step 5")
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node2" and analysis["culprit"]["evidence"] == "exit"
    assert analysis["consequences"] == ["node1"] or analysis["independent"] == ["node1"]


def test_a_hang_everywhere_is_no_ones_exit():
    states = states_of(["node1", "node2"])
    for state in states.values():
        state.update(done=True, failed=True, reason="hang", exit_code=None, last_step=3, msg="hang")
    assert _run_fold.analyse(states)["culprit"] is None


def test_every_node_failing_alike_names_no_node():
    states = states_of(["node1", "node2", "node3"])
    for rank, (host, state) in enumerate(states.items()):
        state.update(done=True, failed=True, reason="error", last_step=None, errors=[
            {"class": "config", "text": "Unknown flag in XLA_FLAGS: --xla_gpu_enable_cublasltt=true", "lineno": 12 + rank,
             "time": T0 + rank * 0.01, "consequence": False}])
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "config"
    assert analysis["run_cause"]["text"].startswith("all 3 nodes failed alike: Unknown flag in XLA_FLAGS")
    states["node2"]["errors"][0]["text"] = "Segmentation fault"
    assert _run_fold.analyse(states)["culprit"]["host"] in ("node1", "node2")


def test_a_hang_singled_out_by_a_stopped_training_process():
    states = states_of(["node1", "node2"])
    for host, state in states.items():
        state.update(done=True, failed=True, reason="hang", last_step=3, msg=f"{host}: hang",
                     sample={"state": "S", "wchan": "sk_wait_data"})
    states["node2"]["sample"] = {"state": "T", "wchan": "do_signal_stop"}
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"]["host"] == "node2" and analysis["culprit"]["evidence"] == "process"
    assert "its training process is stopped (T) in do_signal_stop" in analysis["culprit"]["text"]


def test_what_the_nodes_show_after_the_controller_went_away_is_not_a_nodes_failure():
    states = lease_stopped(["node1", "node2", "node3", "node4"], step_no=26)
    for state in states.values():
        state["exit_time"] = T0 + 32
    states["node1"].update(reason="error", errors=[{"class": "network", "lineno": 35, "consequence": False,
                                                    "text": "jax.errors.JaxRuntimeError: UNKNOWN: Gloo all-reduce failed",
                                                    "time": T0 + 33}])
    states["node4"].update(reason="exit", exit_code=124, last_record_time=T0 + 32,
                           msg="node4: the training container c exited with status 124 at step 26")
    run = {"events": [{"class": "controller", "time": T0 + 50, "since": T0 + 10,
                       "text": "the controller was away for 40 s between two polls"}]}
    analysis = _run_fold.analyse(states, run)
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "controller", analysis
    states["node2"].update(errors=[{"class": "gpu", "text": "HW Exception by GPU node 2", "lineno": 7,
                                    "time": T0 + 5, "consequence": False}], reason="error")
    assert _run_fold.analyse(states, run)["culprit"]["host"] == "node2"


def test_a_run_that_reaches_its_deadline_is_the_runs_cause_not_a_hunt_for_a_node():
    """Every node still training when the deadline passes: the deadline is the cause, with where each stopped."""
    limits = Limits(hang_timeout=60.0, startup_timeout=300.0, deadline=30.0)
    states = states_of(["node1", "node2", "node3", "node4"])
    for host, state in states.items():
        feed(state, training(T0 + 40, steps_every=5.0, last=999), T0 + 31)
        decision = _run_fold.decide_cluster_node(state, node(int(host[-1])), 999, limits, CLUSTER, None, T0 + 31)
        _run_records.apply_decision(state, decision, T0 + 31)
    assert {s["reason"] for s in states.values()} == {"deadline"}
    analysis = _run_fold.analyse(states, {"limits": {"deadline": 30.0, "final_step": 999}, "events": []})
    assert analysis["culprit"] is None and analysis["run_cause"]["class"] == "deadline"
    assert _run_fold.failure_headline(analysis) == "FAIL: deadline: 30 s passed at step 7 of 999 on every node"


def test_a_deadline_reached_by_the_supervisors_names_the_nodes_it_stopped_and_the_rest_as_stopped_after_it():
    states = lease_stopped(["node1", "node2", "node3"], step_no=957)
    for host in ("node1", "node2"):
        states[host].update(reason="deadline", exit_reason="deadline",
                            msg="%s: the node's supervisor stopped the job at step 957: the run's deadline passed" % host)
    analysis = _run_fold.analyse(states)
    assert analysis["culprit"] is None
    assert analysis["run_cause"]["text"] == "the run's deadline passed at step 957 on node1, node2"


def test_a_crash_before_the_deadline_is_still_the_nodes_own():
    states = lease_stopped(["node1", "node2"], step_no=9)
    states["node1"].update(reason="deadline", exit_reason="deadline")
    states["node2"].update(reason="exit", exit_reason="exit", exit_code=1, exit_time=T0 + 5)
    assert _run_fold.analyse(states)["culprit"]["host"] == "node2"


def test_a_rank_that_prints_no_steps_is_never_the_slow_one():
    states = states_of(["n1", "n2"])
    feed(states["n1"], [{"t": "start"}], T0 + 1)
    feed(states["n2"], [{"t": "start"}, step(1), step(2)], T0 + 2)
    progress = _run_fold.cluster_answer(states, FINAL, T0, T0 + 2, [], printers=["n2"])["progress"]
    assert progress["slowest"] == [] and progress["step"] == {"min": 2, "median": 2, "max": 2}
    everyone = _run_fold.cluster_answer(states, FINAL, T0, T0 + 2, [])["progress"]
    assert [s["host"] for s in everyone["slowest"]] == ["n1"], "by default every node is judged"


def test_before_the_first_step_the_progress_says_what_the_job_is_doing():
    states = states_of(["n1", "n2"])
    assert _run_fold.cluster_progress(states, FINAL, T0, T0)["phase"] == "starting"
    feed(states["n1"], [{"t": "up"}], T0 + 1)
    assert _run_fold.cluster_progress(states, FINAL, T0, T0 + 1)["phase"] == "starting", "n2 has not said a word"
    feed(states["n2"], [{"t": "up"}], T0 + 1)
    assert _run_fold.cluster_progress(states, FINAL, T0, T0 + 1)["phase"] == "waiting for the gang"
    feed(states["n1"], [{"t": "start"}], T0 + 2)
    feed(states["n2"], [{"t": "start"}], T0 + 2)
    assert _run_fold.cluster_progress(states, FINAL, T0, T0 + 2)["phase"] == "compiling, first step"
    feed(states["n2"], [step(1)], T0 + 3)
    assert _run_fold.cluster_progress(states, FINAL, T0, T0 + 3)["phase"] is None
