"""The training container's state over the daemon's socket."""
import json

from fake_docker import serve_once

from ansible_collections.clusterval.training.plugins.module_utils._docker import container_state


def answer(status, body):
    return b"HTTP/1.0 %d X\r\nContent-Type: application/json\r\n\r\n%s" % (status, json.dumps(body).encode())


def test_an_ended_container_reports_its_exit_code_and_an_oom_kill(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, answer(200, {"State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True}}))
    assert container_state(path, "train") == {"name": "train", "status": "exited", "exit_code": 137,
                                              "oom_killed": True}


def test_a_removed_container_is_missing_and_a_silent_daemon_unknown(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, answer(404, {"message": "No such container: train"}))
    assert container_state(path, "train")["status"] == "missing"
    assert container_state(str(tmp_path / "none.sock"), "train")["status"] == "unknown"
