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


def test_the_docker_endpoint_is_one_option_written_once():
    """Every module and action that talks to Docker takes docker_host from the doc fragment and ENDPOINT_OPTION;
    the daemon's default socket is written in _docker.py and the fragment only."""
    import glob
    import os
    import re
    plugins = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3, "plugins"))
    written, undocumented = [], []
    for path in glob.glob(os.path.join(plugins, "*", "*.py")):
        text = open(path, encoding="utf-8").read()
        name = os.path.relpath(path, plugins)
        if "docker.sock" in text and name not in ("module_utils/_docker.py", "doc_fragments/docker.py"):
            written.append(name)
        if name.startswith("modules/") and re.search(r"\bdocker_(host|socket)\b", text) and \
                "clusterval.training.docker" not in text:
            undocumented.append(name)
        assert "docker_socket=" not in text and '"docker_socket":' not in text.replace(
            'settings.get("docker_socket")', ""), name
    assert written == [] and undocumented == []
