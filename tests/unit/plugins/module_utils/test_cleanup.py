"""Teardown without a plan: the run's files go with its containers."""
import os

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup, _docker, _runlock


def test_a_runs_lease_and_marker_go_even_when_the_daemon_is_dead_but_its_lock_stays(tmp_path):
    run_dir, cache = tmp_path / "logs" / "clusterval" / "r1", tmp_path / "cache"
    run_dir.mkdir(parents=True)
    cache.mkdir()
    (run_dir / "lease").write_text("")
    _runlock.take_lock(_runlock.lock_path(str(run_dir)), _runlock.lock_record("r1", "ctl"))
    (cache / ".clusterval-preflight-r1").write_text("r1:node1")
    (cache / ".clusterval-preflight-r9").write_text("r9:node1")
    outcome = _cleanup.cleanup("unix://%s" % (tmp_path / "none.sock"), "r1", str(run_dir), str(cache))
    assert "none.sock" in outcome["error"]
    assert [item.split()[0] for item in outcome["removed"]] == ["lease", "preflight"]
    assert _runlock.read_lock(_runlock.lock_path(str(run_dir)))["run_id"] == "r1", "the node stays locked"
    assert sorted(p.name for p in cache.iterdir()) == [".clusterval-preflight-r9"]
    assert "teardown FAILED (run r1)" in _cleanup.summary("node1", outcome, "r1")


def test_the_runs_status_directory_on_the_shared_cache_goes_and_no_other(tmp_path):
    cache = tmp_path / "cache"
    for run in ("r1", "r2"):
        (cache / ".clusterval-status" / run / "nodes").mkdir(parents=True)
        (cache / ".clusterval-status" / run / "nodes" / "node1.jsonl").write_text('{"t": "up"}\n')
    removed = _cleanup.clear_run_files("r1", "", str(cache), dry_run=False)
    assert removed == ["status directory %s" % (cache / ".clusterval-status" / "r1")]
    assert sorted(p.name for p in (cache / ".clusterval-status").iterdir()) == ["r2"]
    assert _cleanup.clear_run_files("r1", "", str(cache), dry_run=False) == [], "a second node finds it gone"


def test_the_token_copy_the_controller_handed_over_goes_with_the_run(tmp_path):
    for run in ("r1", "r2"):
        (tmp_path / "clusterval" / run).mkdir(parents=True)
        (tmp_path / "clusterval" / run / ".hf_token").write_text("hf_" + run)
    removed = _cleanup.clear_run_files("r1", str(tmp_path / "clusterval" / "r1"), "", dry_run=False)
    assert removed == ["HF token copy %s" % (tmp_path / "clusterval" / "r1" / ".hf_token")]
    assert (tmp_path / "clusterval" / "r2" / ".hf_token").exists()


def test_another_runs_lock_stays(tmp_path):
    run_dir = tmp_path / "clusterval" / "r1"
    run_dir.mkdir(parents=True)
    _runlock.take_lock(_runlock.lock_path(str(run_dir)), _runlock.lock_record("r2", "ctl"))
    assert _cleanup.clear_run_files("r1", str(run_dir), "", dry_run=False) == []
    assert _runlock.read_lock(_runlock.lock_path(str(run_dir)))["run_id"] == "r2"


def test_nothing_there_says_so():
    outcome = {"removed": [], "containers": [], "runs": [], "error": None}
    assert _cleanup.summary("node1", outcome, "") == "node1 teardown: nothing to remove (any run)"


CLUSTER_A = _runlock.cluster_identity("10.0.0.11", "bob@login")
# Another cluster whose nodes have the same names, run from the same controller, sharing the home directory.
CLUSTER_B = _runlock.cluster_identity("10.0.1.11", "bob@login")


def interrupted_run(tmp_path, run_id, cluster="A"):
    """A run that took its lock and wrote its marker, then was interrupted before any container started."""
    cluster = CLUSTER_A if cluster == "A" else cluster
    run_dir, cache = tmp_path / "logs" / "clusterval" / run_id, tmp_path / "cache"
    run_dir.mkdir(parents=True)
    cache.mkdir(exist_ok=True)
    _runlock.take_lock(_runlock.lock_path(str(run_dir)), _runlock.lock_record(run_id, "ctl"))
    _runlock.record_run(run_id, "node1", str(run_dir), str(cache), cluster)
    _runlock.record_run(run_id, "node2", "/elsewhere", str(cache), cluster)  # a shared home holds every node's
    (cache / (".clusterval-preflight-" + run_id)).write_text(run_id + ":node1")
    return run_dir, cache


def test_a_teardown_given_only_the_run_id_finds_its_lock_and_marker_in_the_run_index(tmp_path, monkeypatch):
    run_dir, cache = interrupted_run(tmp_path, "r1")
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [])
    outcome = _cleanup.cleanup("unix:///nowhere.sock", "r1", node="node1")
    assert outcome["error"] is None and outcome["runs"] == ["r1"]
    assert [item.split()[0] for item in outcome["removed"]] == ["lock", "preflight"]
    assert _runlock.read_lock(_runlock.lock_path(str(run_dir))) is None
    assert _runlock.indexed_runs("node1") == {} and sorted(_runlock.indexed_runs("node2")) == ["r1"]


def test_a_teardown_of_every_run_clears_every_indexed_run_and_one_runs_only_its_own(tmp_path, monkeypatch):
    interrupted_run(tmp_path / "a", "r1")
    interrupted_run(tmp_path / "b", "r2")
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [])
    assert _cleanup.cleanup("unix:///nowhere.sock", "r2", node="node1")["runs"] == ["r2"]
    assert sorted(_runlock.indexed_runs("node1")) == ["r1"]
    interrupted_run(tmp_path / "c", "r3")
    assert _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=CLUSTER_A)["runs"] == ["r1", "r3"]
    assert _runlock.indexed_runs("node1") == {} and sorted(_runlock.indexed_runs("node2")) == ["r1", "r2", "r3"]


def test_the_index_stays_while_the_daemon_cannot_say_what_still_runs(tmp_path):
    interrupted_run(tmp_path, "r1")
    outcome = _cleanup.cleanup("unix://%s" % (tmp_path / "none.sock"), "r1", node="node1")
    assert outcome["error"] and sorted(_runlock.indexed_runs("node1")) == ["r1"]


def running_run(tmp_path, run_id, cluster):
    """A healthy run of `cluster` on node1: its status directory and marker on the cluster's share, its index entry."""
    run_dir, cache = interrupted_run(tmp_path, run_id, cluster)
    (cache / ".clusterval-status" / run_id / "nodes").mkdir(parents=True)
    (cache / ".clusterval-status" / run_id / "lease").write_text('{"renewal": 3, "go": true}')
    return run_dir, cache


def test_a_teardown_of_every_run_never_touches_a_run_another_cluster_recorded_in_the_shared_home(
        tmp_path, monkeypatch):
    run_dir, cache = running_run(tmp_path / "a", "ra", CLUSTER_A)
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [])  # cluster B's node1 runs nothing
    outcome = _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=CLUSTER_B)
    assert outcome["error"] is None and outcome["removed"] == [] and outcome["runs"] == []
    assert outcome["left_alone"] == ["run ra (node1 at 10.0.0.11 from bob@login)"]
    assert (cache / ".clusterval-status" / "ra" / "lease").exists() and (cache / ".clusterval-preflight-ra").exists()
    assert _runlock.read_lock(_runlock.lock_path(str(run_dir)))["run_id"] == "ra"
    assert sorted(_runlock.indexed_runs("node1")) == ["ra"]
    line = _cleanup.summary("node1", outcome, "")
    assert line == ("node1 teardown: nothing to remove (any run); left alone, recorded by another cluster in the "
                    "shared run index: run ra (node1 at 10.0.0.11 from bob@login)")
    # Cluster A's own teardown clears it.
    mine = _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=CLUSTER_A)
    assert mine["runs"] == ["ra"] and mine["left_alone"] == []
    assert not (cache / ".clusterval-status" / "ra").exists() and _runlock.indexed_runs("node1") == {}


def test_named_runs_are_cleared_from_another_controller_but_not_from_another_clusters_nodes(tmp_path, monkeypatch):
    running_run(tmp_path / "a", "ra", CLUSTER_A)
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [])
    assert _cleanup.cleanup("unix:///nowhere.sock", "ra", node="node1", cluster=CLUSTER_B)["left_alone"] == [
        "run ra (node1 at 10.0.0.11 from bob@login)"]
    assert sorted(_runlock.indexed_runs("node1")) == ["ra"]
    elsewhere = _runlock.cluster_identity("10.0.0.11", "bob@login-2")
    assert _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=elsewhere)["runs"] == []
    assert _cleanup.cleanup("unix:///nowhere.sock", "ra", node="node1", cluster=elsewhere)["runs"] == ["ra"]
    assert _runlock.indexed_runs("node1") == {}


def test_an_index_entry_without_a_cluster_is_left_to_a_teardown_that_names_it(tmp_path, monkeypatch):
    interrupted_run(tmp_path, "old", cluster=None)
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [])
    assert _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=CLUSTER_A)["left_alone"] == [
        "run old (node1, no cluster recorded)"]
    assert _cleanup.cleanup("unix:///nowhere.sock", "old", node="node1", cluster=CLUSTER_A)["runs"] == ["old"]


def test_the_runs_of_the_nodes_own_containers_are_this_clusters_whatever_the_index_says(tmp_path, monkeypatch):
    run_dir, cache = running_run(tmp_path / "a", "ra", CLUSTER_B)
    label = {"name": "c", "id": "x", "run_id": "ra", "state": "exited", "run_dir": str(run_dir),
             "data_cache_dir": str(cache)}
    monkeypatch.setattr(_runlock, "list_labelled", lambda path, run_id="": [label])
    monkeypatch.setattr(_docker.Engine, "remove", lambda engine, ref: None)
    outcome = _cleanup.cleanup("unix:///nowhere.sock", node="node1", cluster=CLUSTER_A)
    assert outcome["runs"] == ["ra"] and outcome["left_alone"] == []
    assert not (cache / ".clusterval-status" / "ra").exists()


def test_the_training_log_comes_back_whole_and_is_written_on_the_controller(tmp_path):
    log = tmp_path / "node" / "training.log"
    log.parent.mkdir()
    log.write_bytes(b"completed step: 1, seconds: 0.5\n" * 1000)
    read = _cleanup.read_log(str(log), 1 << 20)
    copy = tmp_path / "run" / "logs" / "node1" / "training.log"
    assert _cleanup.write_log_copy(read, str(copy)) == ""
    assert copy.read_bytes() == log.read_bytes()
    outcome = _cleanup.outcome_of("node1", {"msg": "node1 teardown removed: container c", "removed": ["c"],
                                            "log": read}, "")
    assert outcome == {"ok": True, "unreachable": False, "removed": ["c"], "left_alone": [], "log_error": "",
                       "msg": "node1 teardown removed: container c"}


def test_a_long_log_keeps_its_end_and_says_so(tmp_path):
    log = tmp_path / "training.log"
    log.write_bytes(b"a" * 100 + b"the failure\n")
    read = _cleanup.read_log(str(log), 12)
    copy = tmp_path / "copy.log"
    assert _cleanup.write_log_copy(read, str(copy)) == ""
    assert copy.read_bytes() == b"the failure\n"
    msg = _cleanup.outcome_of("n1", {"msg": "n1 teardown removed: x", "log": read}, "")["msg"]
    assert msg == "n1 teardown removed: x; the training log has 112 bytes, its last 12 collected"


def test_a_missing_log_is_no_error_and_an_unwritable_copy_is_one(tmp_path):
    assert _cleanup.read_log(str(tmp_path / "none.log"), 10) == {"missing": True}
    assert _cleanup.write_log_copy({"missing": True}, str(tmp_path / "copy")) == ""
    read = {"data": "H4sIAB8VCGsC/8vIBACsKpPYAgAAAA==", "size": 2, "kept": 2}
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the directory should be")
    error = _cleanup.write_log_copy(read, str(blocked / "logs" / "training.log"))
    assert "Not a directory" in error or "File exists" in error


def test_an_unreachable_or_failed_teardown_names_the_node():
    unreachable = _cleanup.outcome_of("node2", {"unreachable": True, "msg": "ssh: No route to host"}, "")
    assert unreachable["ok"] is False and unreachable["unreachable"] is True
    assert unreachable["msg"] == "node2 teardown FAILED: unreachable, its containers may still run: ssh: No route to host"
    timed_out = _cleanup.outcome_of("node3", {"failed": True, "msg": "Timed out after 120 second(s)."}, "")
    assert timed_out["ok"] is False and timed_out["msg"] == "node3 teardown FAILED: Timed out after 120 second(s)."
    own = _cleanup.outcome_of("node4", {"failed": True, "msg": "node4 teardown FAILED (run r1): Docker daemon"}, "x")
    assert own["msg"] == "node4 teardown FAILED (run r1): Docker daemon; training log not collected: x"


def test_a_log_that_is_a_fifo_is_not_read_and_never_blocks(tmp_path):
    fifo = tmp_path / "training.log"
    os.mkfifo(fifo)
    assert _cleanup.read_log(str(fifo), 1 << 20) == {"error": "%s on the node is not a regular file" % fifo}
