"""The node-side supervisor with a real child process: gang start, exit status, the lease, the deadline."""
import json
import os
import sys
import threading
import time

from ansible_collections.clusterval.training.plugins.module_utils import _run_node


def make_config(tmp_path, argv, lease_timeout=30.0, deadline=60.0, go=True):
    status = tmp_path / "status"
    (status / "nodes").mkdir(parents=True)
    (status / "lease").write_text(json.dumps({"renewal": 1, "go": go}))
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    return {"host": "n1", "run_id": "r", "argv": argv, "node_run_dir": str(node_dir),
            "log_path": str(node_dir / "training.log"), "exit_path": None, "status_dir": str(status),
            "lease_paths": [str(status / "lease"), str(node_dir / "lease")], "lease_timeout": lease_timeout,
            "deadline_s": deadline, "gang_timeout": 5.0, "poll_s": 0.2, "stop_grace": 2.0,
            "parse": {"framework": "maxtext", "final_step": 3, "max_steps": 100, "patterns": []}}


def records(config):
    path = _run_node.stream_path(config["status_dir"], config["host"])
    return [json.loads(line) for line in open(path)]


def test_the_childs_exit_status_and_its_steps_are_recorded(tmp_path):
    log = tmp_path / "node" / "training.log"
    script = ("import sys; f = open(%r, 'a'); "
              "[f.write('completed step: %%d, seconds: 1.0, TFLOP/s/device: 100.0, Tokens/s/device: 500.0, "
              "total_weights: 100, loss: 9.0\\n' %% i) for i in range(4)]; f.close(); sys.exit(3)") % str(log)
    config = make_config(tmp_path, [sys.executable, "-c", script])
    stale = '{"t": "exit", "exit_code": 0, "reason": "exit"}\n'
    with open(_run_node.stream_path(config["status_dir"], "n1"), "w") as handle:
        handle.write(stale)  # an earlier container of the run id
    assert _run_node.Supervisor(config).run() == 3
    found = records(config)
    assert [r["t"] for r in found][:2] == ["up", "start"], "the stream starts anew"
    assert [r["step"] for r in found if r["t"] == "step"] == [0, 1, 2, 3]
    assert found[-1]["t"] == "exit" and found[-1]["exit_code"] == 3 and found[-1]["reason"] == "exit"
    assert json.loads((tmp_path / "node" / "status.json").read_text())["exit_code"] == 3


def test_a_lapsed_lease_stops_the_job_by_itself(tmp_path):
    config = make_config(tmp_path, ["sleep", "60"], lease_timeout=1.0)
    started = time.monotonic()
    assert _run_node.Supervisor(config).run() == _run_node.STOPPED_STATUS
    assert time.monotonic() - started < 6
    last = records(config)[-1]
    assert last["reason"] == "lease" and last["exit_code"] == -15


def test_a_renewed_lease_keeps_the_job_and_the_deadline_still_ends_it(tmp_path):
    config = make_config(tmp_path, ["sleep", "60"], lease_timeout=1.0, deadline=2.5)
    supervisor = _run_node.Supervisor(config)
    lease = tmp_path / "node" / "lease"
    original = supervisor.lease.look

    def renewing_look(now):
        lease.write_text(str(time.monotonic()))
        return original(now)

    supervisor.lease.look = renewing_look
    assert supervisor.run() == _run_node.STOPPED_STATUS
    assert records(config)[-1]["reason"] == "deadline"


def test_no_gang_start_no_job(tmp_path):
    config = make_config(tmp_path, ["sleep", "60"], go=False)
    config["gang_timeout"] = 0.5
    assert _run_node.Supervisor(config).run() == _run_node.STOPPED_STATUS
    assert [r["t"] for r in records(config) if r["t"] in ("start", "exit")] == ["exit"]
    assert records(config)[-1]["reason"] == "gang"


def test_a_lapsed_lease_ends_the_wait_for_the_gang_start_and_the_token_copy(tmp_path):
    """A controller killed while the containers start: no gang start will come, and the lease says so."""
    config = make_config(tmp_path, ["sleep", "60"], lease_timeout=0.5, go=False)
    token = tmp_path / "node" / ".hf_token"
    token.write_text("hf_x")
    config.update(gang_lease=True, gang_timeout=3600.0, token_copy=str(token))
    assert _run_node.Supervisor(config).run() == _run_node.STOPPED_STATUS
    assert [r["t"] for r in records(config) if r["t"] in ("start", "exit")] == ["exit"]
    assert records(config)[-1]["reason"] == "lease"
    assert not token.exists(), "the token's copy outlived the job"


def test_without_the_gang_lease_a_node_pulling_its_image_is_waited_for_until_the_gang_timeout(tmp_path):
    config = make_config(tmp_path, ["sleep", "60"], lease_timeout=0.2, go=False)
    config.update(gang_lease=False, gang_timeout=1.0)
    assert _run_node.Supervisor(config).run() == _run_node.STOPPED_STATUS
    assert records(config)[-1]["reason"] == "gang"


def test_containers_coming_up_renew_the_lease_of_those_that_wait(tmp_path):
    """The controller still starting containers (slower than the lease timeout in all) is no lapsed lease."""
    config = make_config(tmp_path, [sys.executable, "-c", "pass"], lease_timeout=3.0, go=False)
    config.update(gang_lease=True, gang_timeout=3600.0, poll_s=0.1)
    supervisor = _run_node.Supervisor(config)
    lease = tmp_path / "status" / "lease"

    def containers_coming_up():
        for number in range(2, 14):
            time.sleep(0.3)
            (tmp_path / "status" / "nodes" / ("n%d.jsonl" % number)).write_text('{"t": "up"}\n')
        lease.write_text(json.dumps({"renewal": 1, "go": True}))

    starter = threading.Thread(target=containers_coming_up)
    starter.start()
    try:
        assert supervisor.run() == 0
    finally:
        starter.join()
    assert records(config)[-1]["reason"] == "exit"


def test_a_job_that_ended_leaves_no_token_copy(tmp_path):
    config = make_config(tmp_path, [sys.executable, "-c", "pass"])
    token = tmp_path / "node" / ".hf_token"
    token.write_text("hf_x")
    config["token_copy"] = str(token)
    assert _run_node.Supervisor(config).run() == 0
    assert not token.exists()


def fake_proc(root, processes):
    for pid, (comm, state, ppid, session, wchan) in processes.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {session} {session} 0 -1 4194304 0 0\n")
        (root / str(pid) / "wchan").write_text(wchan)
    (root / "self").mkdir()


def test_a_sample_tells_where_the_jobs_framework_waits_not_its_shell(tmp_path):
    fake_proc(tmp_path, {100: ("sh", "S", 1, 100, "do_wait"), 101: ("python3", "S", 100, 100, "sk_wait_data"),
                         102: ("python3", "D", 101, 100, "amdgpu_fence_wait"), 200: ("other", "R", 1, 200, "0")})
    sample = _run_node.process_sample(100, str(tmp_path))
    assert sorted(p["pid"] for p in sample["processes"]) == [100, 101, 102]
    assert (sample["state"], sample["wchan"], sample["comm"]) == ("D", "amdgpu_fence_wait", "python3")


def test_a_sample_of_a_sleeping_framework_names_its_wait_channel(tmp_path):
    fake_proc(tmp_path, {100: ("sh", "S", 1, 100, "do_wait"), 101: ("python3", "S", 100, 100, "hrtimer_nanosleep")})
    sample = _run_node.process_sample(100, str(tmp_path))
    assert (sample["state"], sample["wchan"]) == ("S", "hrtimer_nanosleep")


def test_a_full_log_file_system_is_the_nodes_own_disk_failure(tmp_path, monkeypatch):
    log = tmp_path / "training.log"
    assert _run_node.full_disk_record(str(log), 3) is None, "this file system has room"
    # A file system with no room left cannot be made here without mounting one: its statvfs says so.
    full = os.statvfs_result((4096, 4096, 100, 0, 0, 10, 0, 0, 0, 255))
    monkeypatch.setattr(_run_node.os, "statvfs", lambda path: full)
    record = _run_node.full_disk_record(str(log), 3)
    assert record["t"] == "error" and record["class"] == "disk" and record["step"] == 3
    assert record["text"].startswith("No space left on device: the file system of the training log %s" % log)
    assert record["consequence"] is False
