# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Slurm step's task on one node (node side, run by ``srun``): its part of the plan by ``$SLURMD_NODENAME``.

    step.py run NODES_DIR     the node's files, then its container through Docker (the same container as on the
                              SSH path, labelled the same); Slurm's SIGTERM (scancel, the time limit) becomes the
                              container's stop: a container belongs to dockerd, not to the step, and would keep
                              the GPUs after the job ended. Exits with the container's status.
    step.py exec NODES_DIR    inside the image (pyxis, Apptainer): the node's files, then the supervisor itself.
    step.py clean RUN_ID DOCKER_HOST   removes the run's labelled containers on this node (the teardown's step).

``NODES_DIR/<node>.json``: {"directories", "files", "docker_host", "name", "body", "stop_timeout", "argv", "env"}.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, List, Mapping
from urllib.parse import quote

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup, _container, _docker, _files

POLL_S = 1.0
DOCKER_TIMEOUT_S = 60.0


def say(message: str) -> None:
    sys.stderr.write("clusterval step: %s\n" % message)
    sys.stderr.flush()


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or os.uname()[1]


def load_part(nodes_dir: str, node: str) -> Dict[str, Any]:
    path = os.path.join(nodes_dir, "%s.json" % node)
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_files(part: Mapping[str, Any]) -> None:
    _files.ensure_all(part.get("directories") or [], part.get("files") or [], None, False)


class Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def raise_stop(signum: int, frame: Any) -> None:
    del frame
    raise Stop(signum)


def stop_container(socket: str, name: str, grace: int) -> None:
    """docker stop (the supervisor stops its job within the grace), then docker rm."""
    try:
        _docker.docker_request(socket, "POST", "/containers/%s/stop?t=%d" % (quote(name, safe=""), grace),
                               grace + DOCKER_TIMEOUT_S)
    finally:
        _cleanup.remove_container(socket, name)


def wait_for_exit(socket: str, name: str) -> int:
    while True:
        state = _docker.container_state(socket, name)
        if state["status"] in _docker.ENDED:
            return int(state["exit_code"]) if state["exit_code"] is not None else 255
        time.sleep(POLL_S)


def without_missing_mounts(body: Mapping[str, Any]) -> Dict[str, Any]:
    """The HF token's bind mount only where the node has the file (the SSH path's preflight asks the node)."""
    host = dict(body["HostConfig"])
    kept = [m for m in host.get("Mounts") or [] if m.get("Type") != "bind" or os.path.exists(m.get("Source", ""))]
    for mount in host.get("Mounts") or []:
        if mount not in kept:
            say("%s: %s is not on this node: not mounted at %s" % (node_name(), mount["Source"], mount["Target"]))
    host["Mounts"] = kept
    return dict(body, HostConfig=host)


def run_container(part: Mapping[str, Any]) -> int:
    socket = _cleanup.socket_of(str(part["docker_host"]))
    name = str(part["name"])
    grace = int(part.get("stop_timeout") or 10)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, raise_stop)
    try:
        _container.ensure_started(socket, name, without_missing_mounts(part["body"]), False, DOCKER_TIMEOUT_S)
        say("%s: container %s started" % (node_name(), name))
        code = wait_for_exit(socket, name)
    except Stop as stop:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        say("%s: signal %d from Slurm: stopping container %s" % (node_name(), stop.signum, name))
        stop_container(socket, name, grace)
        return 128 + stop.signum
    _cleanup.remove_container(socket, name)
    say("%s: container %s exited with status %d" % (node_name(), name, code))
    return code


def exec_supervisor(part: Mapping[str, Any]) -> int:
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (part.get("env") or {}).items()})
    argv: List[str] = [str(a) for a in part["argv"]]
    os.execvpe(argv[0], argv, env)
    return 127  # not reached


def clean(run_id: str, docker_host: str) -> int:
    outcome = _cleanup.cleanup(docker_host, run_id=run_id, node=node_name())
    sys.stdout.write("clusterval-clean %s %s\n" % (node_name(), json.dumps(outcome, sort_keys=True)))
    sys.stdout.flush()
    return 1 if outcome.get("error") else 0


def main(argv: List[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("run", "exec", "clean"):
        say("usage: step.py run|exec NODES_DIR, or step.py clean RUN_ID DOCKER_HOST")
        return 2
    if argv[1] == "clean":
        return clean(argv[2], argv[3] if len(argv) > 3 else "unix:///var/run/docker.sock")
    node = node_name()
    try:
        part = load_part(argv[2], node)
        write_files(part)
    except (OSError, ValueError) as exc:
        say("%s: error: no part of the plan for this node (%s)" % (node, exc))
        return 2
    try:
        return run_container(part) if argv[1] == "run" else exec_supervisor(part)
    except (OSError, ValueError, _container.DockerError) as exc:
        say("%s: error: the container could not run: %s" % (node, exc))
        return 125
