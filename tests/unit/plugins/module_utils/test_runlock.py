"""One run per node: the lock in the run root and the busy decision."""
import json
import os
import threading

import pytest
from fake_docker import serve_once

from ansible_collections.clusterval.training.plugins.module_utils import _runlock


def container(run_id, state="running", name=None):
    return {"name": name or "c-" + run_id, "id": "id-" + run_id, "run_id": run_id, "state": state,
            "run_dir": "/logs/clusterval/" + run_id, "data_cache_dir": "/cache"}


def old_lock(run_id, age_s):
    return {"run_id": run_id, "controller": "alice@ctl", "started_at": "2026-11-25T01:00:00Z", "age_s": age_s}


def test_lock_lives_in_the_parent_of_the_node_run_dir():
    assert _runlock.lock_path("/home/a/LOGS/clusterval/r1/") == "/home/a/LOGS/clusterval/clusterval.lock"


def test_the_lock_is_taken_once_and_released_only_by_its_run(tmp_path):
    path = str(tmp_path / "root" / "clusterval.lock")
    assert _runlock.take_lock(path, _runlock.lock_record("r1", "alice@ctl"))
    assert not _runlock.take_lock(path, _runlock.lock_record("r2", "bob@ctl"))
    held = _runlock.read_lock(path)
    assert held["run_id"] == "r1" and held["controller"] == "alice@ctl" and held["started_at"].endswith("Z")
    assert sorted(os.listdir(tmp_path / "root")) == ["clusterval.lock"], "no staging file is left"
    assert not _runlock.release_lock(path, "r2") and os.path.exists(path)
    assert _runlock.release_lock(path, "r1") and _runlock.read_lock(path) is None


def test_of_two_runs_taking_the_lock_at_once_exactly_one_wins(tmp_path):
    path = str(tmp_path / "clusterval.lock")
    wins = []
    threads = [threading.Thread(target=lambda rid=rid: wins.append(
        _runlock.take_lock(path, _runlock.lock_record(rid, "ctl")))) for rid in ("r%d" % i for i in range(8))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins.count(True) == 1


def test_a_lock_that_does_not_parse_is_held_by_an_unknown_run(tmp_path):
    path = tmp_path / "clusterval.lock"
    path.write_text("{half")
    assert _runlock.read_lock(str(path))["run_id"] == "unknown"


def test_another_runs_running_container_makes_the_node_busy():
    state = _runlock.occupancy("r2", None, [container("r1")], stale_after_s=1800)
    assert state["busy"] and state["run_id"] == "r1" and state["containers"] == ["c-r1"]
    assert "c-r1 is running" in state["reason"]


def test_own_containers_and_exited_leftovers_without_a_lock_do_not():
    state = _runlock.occupancy("r2", None, [container("r2"), container("r0", state="exited")], 1800)
    assert not state["busy"] and not state["stale"]


def test_a_lock_of_a_run_still_in_preflight_makes_the_node_busy():
    state = _runlock.occupancy("r2", old_lock("r1", 20), [], stale_after_s=1800)
    assert state["busy"] and "no container yet" in state["reason"] and state["controller"] == "alice@ctl"


def test_a_lock_whose_run_left_an_exited_container_is_still_held():
    state = _runlock.occupancy("r2", old_lock("r1", 7200), [container("r1", state="exited")], 1800)
    assert state["busy"] and not state["stale"]


def test_an_old_lock_without_containers_is_stale():
    state = _runlock.occupancy("r2", old_lock("r1", 7200), [], stale_after_s=1800)
    assert state["stale"] and not state["busy"] and state["run_id"] == "r1"


def test_the_busy_line_names_node_run_start_controller_and_the_way_out():
    state = _runlock.occupancy("r2", old_lock("r1", 5), [container("r1")], 1800)
    line = _runlock.busy_detail("node3", state)
    assert line.startswith("node3 is busy with run r1 (started 2026-11-25T01:00:00Z from alice@ctl)")
    assert "clusterval.training.teardown -e training_run_id=r1" in line and "training_takeover=true" in line


def docker_list(path, items):
    serve_once(path, b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(items).encode())


def api_item(run_id, state="running"):
    return {"Id": "id" + run_id, "Names": ["/c-" + run_id], "State": state,
            "Labels": {"clusterval.run_id": run_id, "clusterval.run_dir": "/x/" + run_id}}


def test_claim_refuses_a_busy_node_and_leaves_the_lock_alone(tmp_path):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    docker_list(sock, [api_item("r1")])
    answer = _runlock.claim("node1", sock, "r2", run_dir, "bob@ctl", take=True, takeover=False, stale_after_s=1800)
    assert answer["check"]["ok"] is False and "busy with run r1" in answer["check"]["detail"]
    assert _runlock.read_lock(_runlock.lock_path(run_dir)) is None


def test_claim_with_takeover_takes_the_lock_and_names_the_run_to_remove(tmp_path):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    _runlock.take_lock(_runlock.lock_path(run_dir), _runlock.lock_record("r1", "alice@ctl"))
    docker_list(sock, [api_item("r1")])
    answer = _runlock.claim("node1", sock, "r2", run_dir, "bob@ctl", take=True, takeover=True, stale_after_s=1800)
    assert answer["check"]["ok"] and "takeover" in answer["check"]["detail"]
    assert answer["took_over"]["run_id"] == "r1" and answer["took_over"]["containers"] == ["c-r1"]
    assert _runlock.read_lock(_runlock.lock_path(run_dir))["run_id"] == "r2"


def test_claim_takes_over_a_stale_lock_with_a_warning(tmp_path):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    _runlock.take_lock(_runlock.lock_path(run_dir), _runlock.lock_record("r1", "alice@ctl"))
    docker_list(sock, [])
    answer = _runlock.claim("node1", sock, "r2", run_dir, "bob@ctl", take=True, takeover=False, stale_after_s=0)
    assert answer["check"]["ok"] and answer["check"]["detail"].startswith("WARNING: took over the stale lock of run r1")
    assert _runlock.read_lock(_runlock.lock_path(run_dir))["run_id"] == "r2"


def test_claim_on_a_free_node_only_checks_when_not_taking(tmp_path):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    docker_list(sock, [])
    answer = _runlock.claim("node1", sock, "r2", run_dir, "bob@ctl", take=False, takeover=False, stale_after_s=1800)
    assert answer["check"]["ok"] and _runlock.read_lock(_runlock.lock_path(run_dir)) is None
    assert _runlock.indexed_runs("node1") == {}


def test_taking_the_lock_records_the_run_in_the_nodes_run_index(tmp_path, run_index):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    docker_list(sock, [])
    answer = _runlock.claim("node1", sock, "r2", run_dir, "bob@ctl", take=True, takeover=False,
                            stale_after_s=1800, data_cache_dir="/shared/cache")
    assert answer["check"]["ok"]
    assert _runlock.indexed_runs("node1", "r2") == {"r2": {"run_dir": run_dir, "data_cache_dir": "/shared/cache",
                                                           "cluster": {"controller": "bob@ctl"}}}
    assert _runlock.indexed_runs("node2") == {}
    assert [p.name for p in run_index.iterdir()] == ["r2@node1.json"]


def test_claim_fails_naming_the_socket_when_the_daemon_is_gone(tmp_path):
    answer = _runlock.claim("node1", str(tmp_path / "none.sock"), "r2", str(tmp_path / "c" / "r2"), "ctl",
                            take=True, takeover=False, stale_after_s=1800)
    assert not answer["check"]["ok"] and "none.sock" in answer["check"]["detail"]


def test_the_port_holder_is_named_with_its_container(tmp_path):
    from ansible_collections.clusterval.training.plugins.module_utils import _ports
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (proc / "net" / "tcp").write_text(header + "   0: 00000000:04D2 00000000:0000 0A 00000000:00000000 00:00000000 "
                                      "00000000     0        0 777 1 0000000000000000 100 0 0 10 0\n")
    (proc / "net" / "tcp6").write_text(header)
    (proc / "42" / "fd").mkdir(parents=True)
    os.symlink("socket:[777]", proc / "42" / "fd" / "3")
    (proc / "42" / "comm").write_text("python3\n")
    (proc / "42" / "cgroup").write_text("0::/cvsim-node1/%s\n" % ("ab" * 32))
    assert _ports.port_holder(1234, str(proc)) == "pid 42 (python3) in container %s" % ("ab" * 6)


def test_the_run_index_records_the_clusters_identity(tmp_path, run_index):
    sock, run_dir = str(tmp_path / "d.sock"), str(tmp_path / "clusterval" / "r2")
    docker_list(sock, [])
    _runlock.claim("node1", sock, "r2", run_dir, "bob@login-a", take=True, takeover=False, stale_after_s=1800,
                   data_cache_dir="/shared/cache", address="10.0.0.11")
    entry = _runlock.indexed_runs("node1")["r2"]
    assert entry["cluster"] == {"address": "10.0.0.11", "controller": "bob@login-a"}
    assert _runlock.describe_cluster("node1", entry["cluster"]) == "node1 at 10.0.0.11 from bob@login-a"


A = {"address": "10.0.0.11", "controller": "bob@login-a"}


@pytest.mark.parametrize("here, named, ours", [
    (A, False, True),
    ({"address": "10.0.1.11", "controller": "bob@login-a"}, False, False),  # same names, another cluster
    ({"address": "10.0.0.11", "controller": "bob@login-b"}, False, False),  # same short names, other login node
    ({"address": "10.0.0.11", "controller": "bob@login-b"}, True, True),    # the run named from another controller
    ({"address": "10.0.1.11", "controller": "bob@login-a"}, True, False),   # named, but another cluster's node
    ({}, False, False),                                                      # a caller that cannot say who it is
    ({}, True, True),
])
def test_same_cluster(here, named, ours):
    assert _runlock.same_cluster(A, here, named) is ours


def test_an_entry_without_identity_is_only_cleared_by_its_run_id():
    assert not _runlock.same_cluster({}, A, named=False)
    assert _runlock.same_cluster({}, A, named=True)


def supervised(tmp_path, run_id, renewed_ago, timeout=20):
    """An exited container of `run_id` whose supervisor's config names a lease last renewed `renewed_ago` s ago."""
    run_dir = tmp_path / run_id
    (run_dir / "supervisor").mkdir(parents=True)
    lease = tmp_path / ("lease-" + run_id)
    lease.write_text('{"renewal": 9, "go": true}')
    os.utime(lease, (1000.0 - renewed_ago, 1000.0 - renewed_ago))
    (run_dir / "supervisor" / "config.json").write_text(json.dumps({"lease_paths": [str(lease)],
                                                                    "lease_timeout": timeout}))
    return dict(container(run_id, state="exited"), run_dir=str(run_dir))


def test_a_lock_whose_containers_exited_and_whose_lease_lapsed_is_stale(tmp_path):
    exited = [supervised(tmp_path, "r1", renewed_ago=45)]
    lapsed = _runlock.lease_lapsed(old_lock("r1", 60), exited, now=1000.0)
    assert lapsed == "its lease was last renewed 45 s ago (lease timeout 20 s)"
    state = _runlock.occupancy("r2", old_lock("r1", 60), exited, 1800, lapsed)
    assert state["stale"] and not state["busy"]
    assert state["reason"] == "its container c-r1 exited and its lease was last renewed 45 s ago (lease timeout 20 s)"


def test_a_lock_whose_containers_exited_while_its_lease_is_renewed_is_held(tmp_path):
    exited = [supervised(tmp_path, "r1", renewed_ago=5)]
    assert _runlock.lease_lapsed(old_lock("r1", 60), exited, now=1000.0) is None
    assert _runlock.lease_lapsed(old_lock("r1", 60), [container("r1", state="exited")], now=1000.0) is None, \
        "no supervisor config: the lease is not known to have lapsed"
    assert _runlock.lease_lapsed(old_lock("r0", 60), [supervised(tmp_path, "r3", 45)], now=1000.0) is None, \
        "only the lock's own run counts"
