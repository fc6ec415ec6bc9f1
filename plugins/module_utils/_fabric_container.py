# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fabric gate's benchmarks in a container on the node, through the Docker Engine API (standard library only).

The container is the training container's spec (host network, the GPU devices, the plan's NCCL/RCCL and socket
settings) with the gate's image and the benchmark as its command. It is started detached, waited for, its output
read, and removed, also when it outlives its timeout, so nothing stays running. ``tools_missing`` looks a path up
in an image without starting anything: a container is created, its filesystem asked, and removed.
"""
from __future__ import annotations

import json
import struct
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence
from urllib.parse import quote

from ansible_collections.clusterval.training.plugins.module_utils import _container
from ansible_collections.clusterval.training.plugins.module_utils._docker import docker_request

POLL_S = 0.5
REQUEST_TIMEOUT_S = 60.0
LOG_TAIL_BYTES = 1 << 20


def fabric_spec(spec: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]) -> Dict[str, Any]:
    """The training container's spec for one benchmark: its own name, the benchmark as the command, the rank's
    environment over the plan's, no HF token (the gate reads none)."""
    fabric = dict(spec)
    fabric["name"] = "%s-fabric" % spec["name"]
    fabric["command"] = [str(a) for a in argv]
    fabric["env"] = dict(spec.get("env") or {}, **env)
    fabric["mounts"] = []
    fabric["labels"] = dict(spec.get("labels") or {}, **{"clusterval.fabric": "true"})
    return fabric


def demux(stream: bytes) -> str:
    """Docker's log stream of a container without a TTY: frames of an 8-byte header (stream, size) and data."""
    out, offset = [], 0
    while offset + 8 <= len(stream):
        size = struct.unpack(">I", stream[offset + 4:offset + 8])[0]
        out.append(stream[offset + 8:offset + 8 + size])
        offset += 8 + size
    return b"".join(out).decode("utf-8", "replace")


def remove(socket_path: str, name: str) -> None:
    docker_request(socket_path, "DELETE", "/containers/%s?force=1" % quote(name, safe=""), REQUEST_TIMEOUT_S)


def run_in_container(socket_path: str, spec: Mapping[str, Any], timeout: float,
                     clock: Callable[[], float] = time.monotonic) -> Dict[str, Any]:
    """Start the container, wait for its end or ``timeout`` seconds, return {rc, timed_out, seconds, output};
    the container is removed on every path."""
    started = clock()
    name = spec["name"]
    try:
        body = _container.create_body(spec, stop_timeout=1)
        _container.ensure_started(socket_path, name, body, False, REQUEST_TIMEOUT_S)
        state = wait(socket_path, name, started + timeout, clock)
        status, logs = docker_request(socket_path, "GET", "/containers/%s/logs?stdout=1&stderr=1&tail=all"
                                      % quote(name, safe=""), REQUEST_TIMEOUT_S)
        output = demux(logs[-LOG_TAIL_BYTES:] if status == 200 else b"")
    except (OSError, ValueError, _container.DockerError) as exc:
        return {"rc": None, "timed_out": False, "seconds": round(clock() - started, 3), "output": "",
                "error": "%s: %s" % (name, exc)}
    finally:
        try:
            remove(socket_path, name)
        except (OSError, ValueError):
            pass
    return {"rc": state.get("ExitCode") if not state.get("Running") else None, "timed_out": bool(state.get("Running")),
            "seconds": round(clock() - started, 3), "output": output}


def wait(socket_path: str, name: str, deadline: float, clock: Callable[[], float]) -> Dict[str, Any]:
    """The container's state once it ended, or at the deadline (still running)."""
    while True:
        status, answer = docker_request(socket_path, "GET", "/containers/%s/json" % quote(name, safe=""),
                                        REQUEST_TIMEOUT_S)
        state = (json.loads(answer.decode("utf-8")).get("State") or {}) if status == 200 else {}
        if status != 200 or not state.get("Running") or clock() >= deadline:
            return state
        time.sleep(POLL_S)


def image_config(socket_path: str, image: str) -> Optional[Dict[str, Any]]:
    """The image's inspect answer; None when the node does not have it."""
    status, answer = docker_request(socket_path, "GET", "/images/%s/json" % quote(image, safe=""), REQUEST_TIMEOUT_S)
    if status == 404:
        return None
    if status != 200:
        raise _container.DockerError("inspecting the image %s answered HTTP %d: %s"
                                     % (image, status, _container.message_of(answer)))
    return json.loads(answer.decode("utf-8"))


def tools_missing(socket_path: str, image: str, paths: Sequence[str], probe_name: str) -> List[str]:
    """Which of ``paths`` the image lacks: absolute paths asked as they are, a bare name along the image's PATH.
    Nothing runs: a container is created (not started), its filesystem asked, and removed."""
    config = image_config(socket_path, image)
    if config is None:
        raise LookupError("%s is not on the node" % image)
    search = [p for p in dict(e.split("=", 1) for e in (config.get("Config") or {}).get("Env") or []
                              if "=" in e).get("PATH", "/usr/bin:/bin").split(":") if p]
    body = {"Image": image, "Cmd": ["true"], "Labels": {"clusterval.fabric": "probe"}}
    remove(socket_path, probe_name)
    _container.call(socket_path, "POST", "/containers/create?name=%s" % quote(probe_name, safe=""), body,
                    REQUEST_TIMEOUT_S, "creating %s" % probe_name, (201,))
    try:
        return [path for path in paths if not any(
            exists(socket_path, probe_name, candidate)
            for candidate in ([path] if path.startswith("/") else ["%s/%s" % (d.rstrip("/"), path) for d in search]))]
    finally:
        remove(socket_path, probe_name)


def exists(socket_path: str, container: str, path: str) -> bool:
    status, dummy = docker_request(socket_path, "HEAD", "/containers/%s/archive?path=%s"
                                   % (quote(container, safe=""), quote(path, safe="")), REQUEST_TIMEOUT_S)
    return status == 200
