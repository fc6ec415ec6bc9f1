"""The run watch's procedure: each poll loads what the previous one saved, folds, decides and saves again."""
import json

from ansible_collections.clusterval.training.plugins.module_utils import _run_fold, _run_watch
from ansible_collections.clusterval.training.plugins.module_utils._run_records import ClusterLimits, Limits

T0 = 2_000_000.0
PLAN = {"run_id": "r1", "final_step": 5, "framework": "maxtext", "jobs": [{"name": "job-0", "hosts": ["n1", "n2"]}],
        "nodes": {"n1": {"host": "n1", "job": "job-0", "node_rank": 0, "prints_steps": True},
                  "n2": {"host": "n2", "job": "job-0", "node_rank": 1, "prints_steps": True}}}
LIMITS = Limits(hang_timeout=60.0, startup_timeout=300.0, deadline=3600.0)
CLUSTER = ClusterLimits(stale_timeout=10.0, exit_grace=20.0, settle=2.0)


def watch(run_dir, now, controller=42, lease_timeout=30.0):
    return _run_watch.ClusterWatch.load(PLAN, ["n1", "n2"], str(run_dir), LIMITS, CLUSTER, lease_timeout,
                                        controller, now)


def steps(host_from, host_to, at):
    return [{"t": "step", "step": n, "loss": 9.0 - n, "tokens_per_sec_per_gpu": 100.0, "time": at}
            for n in range(host_from, host_to)]


def read(records_by_host):
    return {"nodes": {h: {"records": r, "offset": 10 * len(r)} for h, r in records_by_host.items()}}


def test_each_poll_continues_from_the_saved_states_and_the_steps_go_to_their_file(tmp_path):
    first = watch(tmp_path, T0)
    first.poll(read({"n1": [{"t": "start", "time": T0}] + steps(0, 3, T0 + 1), "n2": steps(0, 3, T0 + 1)}), "n1", T0 + 2)
    second = watch(tmp_path, T0 + 4)
    assert second.states["n1"]["last_step"] == 2 and second.memory["renewal"] == 0
    answer = second.poll(read({"n1": steps(3, 6, T0 + 4) + [{"t": "exit", "exit_code": 0, "reason": "exit"}],
                               "n2": steps(3, 6, T0 + 4) + [{"t": "exit", "exit_code": 0, "reason": "exit"}]}),
                         "n1", T0 + 4)
    assert answer["done"] and not answer["failed"]
    saved = json.loads((tmp_path / "watch" / "r1" / "n1.json").read_text())
    assert [s["step"] for s in saved["steps"]] == [0, 1, 2, 3, 4, 5]
    run = json.loads((tmp_path / "watch" / "r1" / "run.json").read_text())
    assert len(run["states"]["n1"]["steps"]) <= 2, "a poll's saved state keeps only the first and last step"
    outcome = json.loads((tmp_path / "watch" / "r1" / "outcome.json").read_text())
    assert outcome["culprit"] is None and outcome["run_cause"] is None


def test_a_new_controller_starts_the_memory_anew(tmp_path):
    watch(tmp_path, T0).poll(read({"n1": steps(0, 2, T0)}), "n1", T0 + 1)
    assert watch(tmp_path, T0 + 5, controller=43).states["n1"]["last_step"] is None


def test_a_controller_away_past_the_lease_is_the_runs_cause(tmp_path):
    watch(tmp_path, T0).poll(read({"n1": steps(0, 2, T0), "n2": steps(0, 2, T0)}), "n1", T0 + 1)
    lapsed = [{"t": "exit", "exit_code": -15, "reason": "lease", "time": T0 + 32}]
    answer = watch(tmp_path, T0 + 46).poll(read({"n1": lapsed, "n2": lapsed}), "n1", T0 + 46)
    assert answer["failed"] and answer["culprit"] is None
    assert answer["run_cause"]["class"] == "controller"
    assert "away for 45 s" in answer["msg"] and "no node failed" in answer["msg"]


def test_a_removed_status_directory_ends_the_watch_naming_no_node(tmp_path):
    watch(tmp_path, T0).poll(read({"n1": steps(0, 2, T0), "n2": steps(0, 2, T0)}), "n1", T0 + 1)
    answer = watch(tmp_path, T0 + 3).poll({"missing": True, "status_dir": "/shared/s/r1", "nodes": {}}, "n1", T0 + 3)
    assert answer["done"] and answer["failed"] and answer["culprit"] is None
    assert answer["msg"].startswith("FAIL: removed: the run's status directory /shared/s/r1 was removed")


def test_a_takeover_names_the_run_that_took_the_nodes(tmp_path):
    watch(tmp_path, T0).poll(read({"n1": steps(0, 2, T0)}), "n1", T0 + 1)
    answer = watch(tmp_path, T0 + 3).poll({"taken_over": {"by": "r2", "controller": "bob@ctl"}, "nodes": {}}, "n1",
                                          T0 + 3)
    assert answer["done"] and answer["run_cause"]["class"] == "takeover"
    assert "taken over by run r2 (controller bob@ctl" in answer["msg"]


def test_the_reader_unreachable_is_named(tmp_path):
    answer = watch(tmp_path, T0).poll({"unreachable": True, "msg": "ssh: connect to host n1: No route to host"},
                                      "n1", T0 + 1)
    assert answer["failures"][0]["host"] == "n1"
    assert answer["culprit"]["host"] == "n1" and answer["culprit"]["class"] == "node lost"


def test_conclude_adds_the_direct_looks_and_decides_once(tmp_path):
    first = watch(tmp_path, T0)
    first.poll(read({"n1": steps(0, 2, T0), "n2": steps(0, 2, T0)}), "n1", T0 + 1)
    second = watch(tmp_path, T0 + 100)
    answer = second.poll(read({"n1": [{"t": "beat", "time": T0 + 100}]}), "n1", T0 + 100)
    assert answer["done"]
    directory = _run_watch.watch_dir(str(tmp_path), "r1")
    _run_watch.write_json_atomically(f"{directory}/direct/n2.json",
                                     {"unreachable": True, "failed": True, "msg": "n2: unreachable over SSH"})
    outcome = _run_watch.conclude(str(tmp_path), "r1", ["n1", "n2"])
    assert outcome["culprit"]["host"] == "n2" and outcome["culprit"]["class"] == "node lost"
    assert _run_fold.failure_headline(outcome).startswith("FAIL: n2 node lost"), "one word, from the watch on"
    assert _run_watch.load_outcome(str(tmp_path), "r1")["culprit"]["host"] == "n2"


def test_no_step_is_lost_or_doubled_whatever_each_poll_brings(tmp_path):
    batches = [steps(0, 1, T0), steps(1, 2, T0 + 1), steps(2, 5, T0 + 2), [], steps(5, 6, T0 + 3)]
    for number, batch in enumerate(batches):
        watch(tmp_path, T0 + number).poll(read({"n1": batch, "n2": batch}), "n1", T0 + number)
    assert [s["step"] for s in _run_watch.all_steps(_run_watch.watch_dir(str(tmp_path), "r1"), "n1")] == list(range(6))


def test_a_new_supervisor_of_the_same_run_starts_the_steps_anew(tmp_path):
    watch(tmp_path, T0).poll(read({"n1": [{"t": "up"}, {"t": "start"}] + steps(0, 3, T0)}), "n1", T0)
    watch(tmp_path, T0 + 1).poll(read({"n1": [{"t": "restarted"}] + steps(0, 2, T0 + 1)}), "n1", T0 + 1)
    assert [s["step"] for s in _run_watch.all_steps(_run_watch.watch_dir(str(tmp_path), "r1"), "n1")] == [0, 1]


def test_every_reader_takes_the_one_decision_the_watch_concluded(tmp_path):
    """The assert and the guard of an interrupted run read outcome.json: a state changed after the conclusion
    (a late direct look) changes nothing of what the watch decided."""
    test_conclude_adds_the_direct_looks_and_decides_once(tmp_path)
    directory = _run_watch.watch_dir(str(tmp_path), "r1")
    _run_watch.write_json_atomically(f"{directory}/direct/n1.json",
                                     {"unreachable": True, "failed": True, "msg": "n1: unreachable over SSH"})
    read_back = _run_watch.conclusion(str(tmp_path), "r1", ["n1", "n2"])
    assert read_back["culprit"]["host"] == "n2"
    assert sorted(read_back["states"]) == ["n1", "n2"]
    assert set(read_back) == set(_run_fold.ANALYSIS_KEYS) | {"states"}


def test_without_a_conclusion_the_first_reader_concludes_once_for_every_later_one(tmp_path):
    """The per-node watch and a watch stopped between polls leave only each poll's outcome: the first reader
    concludes (and saves it), the next reads that."""
    first = watch(tmp_path, T0)
    first.poll(read({"n1": steps(0, 2, T0), "n2": steps(0, 2, T0)}), "n1", T0 + 1)
    assert not (_run_watch.load_outcome(str(tmp_path), "r1") or {}).get("concluded")
    concluded = _run_watch.conclusion(str(tmp_path), "r1", ["n1", "n2"])
    assert _run_watch.load_outcome(str(tmp_path), "r1")["concluded"] is True
    assert set(concluded) == set(_run_fold.ANALYSIS_KEYS) | {"states"}
    assert _run_watch.conclusion(str(tmp_path), "r1", ["n1", "n2"]) == concluded


def test_a_direct_look_that_found_the_container_killed_names_it(tmp_path):
    state = {"host": "n2", "reason": "unreachable", "failed": True, "msg": "n2: no status for 31 s", "errors": []}
    merged = _run_watch.with_direct_look(state, {
        "failed": True, "reason": "exit", "exit_code": None, "container": {"status": "exited", "exit_code": 137},
        "msg": "n2: the training container c exited with status 137 at step 5"})
    assert merged["reason"] == "exit" and merged["exit_code"] == 137
    assert merged["msg"] == "n2: the training container c exited with status 137 at step 5 (n2: no status for 31 s)"


def test_a_steps_file_that_cannot_be_written_names_itself(tmp_path):
    directory = _run_watch.watch_dir(str(tmp_path), "r1")
    (tmp_path / "watch" / "r1" / "steps" / "n1.jsonl").mkdir(parents=True)
    state = {"host": "n1", "steps": steps(0, 3, T0)}
    try:
        _run_watch.spill_steps(directory, state)
    except OSError as exc:
        assert exc.filename == f"{directory}/steps/n1.jsonl"
    else:
        raise AssertionError("the write into a directory went through")


def test_the_reader_unreachable_is_said_on_one_line_whatever_ssh_wrote(tmp_path):
    answer = watch(tmp_path, T0).poll({"unreachable": True, "msg": "Failed to connect to the host via ssh:\n"
                                       "ssh: connect to host n1 port 22:\r\n  No route to host"}, "n1", T0 + 1)
    assert "\n" not in answer["msg"] and "\r" not in answer["msg"]
    assert answer["msg"].endswith("ssh: connect to host n1 port 22: No route to host")
