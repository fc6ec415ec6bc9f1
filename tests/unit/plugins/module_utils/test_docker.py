"""The Docker launcher's node driver: the training container's state over the daemon's socket, the endpoint."""
import json

from fake_docker import serve_once

from ansible_collections.clusterval.training.plugins.module_utils._docker import Engine, socket_of


def answer(status, body):
    return b"HTTP/1.0 %d X\r\nContent-Type: application/json\r\n\r\n%s" % (status, json.dumps(body).encode())


def test_an_ended_container_reports_its_exit_code_and_an_oom_kill(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, answer(200, {"State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True}}))
    assert Engine(path).state("train") == {"name": "train", "status": "exited", "exit_code": 137,
                                           "oom_killed": True, "ended": True}


def test_a_removed_container_is_missing_and_a_silent_daemon_unknown(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, answer(404, {"message": "No such container: train"}))
    missing = Engine(path).state("train")
    assert (missing["status"], missing["ended"]) == ("missing", True)
    unknown = Engine(str(tmp_path / "none.sock")).state("train")
    assert (unknown["status"], unknown["ended"]) == ("unknown", False)


def test_a_running_container_has_not_ended(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, answer(200, {"State": {"Status": "running", "ExitCode": 0, "OOMKilled": False}}))
    assert Engine.at("unix://" + path).state("train")["ended"] is False


def test_only_unix_sockets_are_docker_hosts_here():
    assert socket_of("unix:///var/run/docker.sock") == "/var/run/docker.sock"
    assert socket_of("/run/docker.sock") == "/run/docker.sock"
    try:
        socket_of("tcp://10.0.0.1:2375")
    except ValueError as exc:
        assert "tcp://10.0.0.1:2375" in str(exc)
    else:
        raise AssertionError("a tcp host was accepted")
