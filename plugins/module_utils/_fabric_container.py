# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fabric gate's benchmarks in a container on the node, through the Docker Engine API (standard library only).

The container is the training container's spec (host network, the GPU devices, the plan's NCCL/RCCL and socket
settings) with the gate's image and the benchmark as its command. It is started detached, waited for, its output
read, and removed, also when it outlives its timeout, so nothing stays running. ``tools_missing`` looks a path up
in an image without starting anything: a container is created, its filesystem asked, and removed.
"""
from __future__ import annotations

import os
import struct
import time
from typing import Any, Callable, Dict, List, Mapping, Sequence

from ansible_collections.clusterval.training.plugins.module_utils import _container
from ansible_collections.clusterval.training.plugins.module_utils._docker import DockerError, Engine

POLL_S = 0.5
REQUEST_TIMEOUT_S = 60.0
LOG_TAIL_BYTES = 1 << 20


def fabric_spec(spec: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str],
                exists: Callable[[str], bool] = os.path.exists) -> Dict[str, Any]:
    """The training container's spec for one benchmark: its own name, the benchmark as the command, the rank's
    environment over the plan's, no HF token (the gate reads none), and only the volumes whose host path the node
    has. The run's own directories do not exist yet when the gate runs, and Docker would create a missing one as
    root, where the run's user then could not write (the RDMA libraries the gate needs are there)."""
    fabric = dict(spec)
    fabric["volumes"] = [bind for bind in spec.get("volumes") or [] if exists(str(bind).split(":", 1)[0])]
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


def remove(engine: Engine, name: str) -> None:
    """The container gone, whatever the daemon answers (an unreachable daemon is the caller's error)."""
    try:
        engine.remove(name)
    except ValueError:
        pass


def run_in_container(docker_host: str, spec: Mapping[str, Any], timeout: float,
                     clock: Callable[[], float] = time.monotonic) -> Dict[str, Any]:
    """Start the container, wait for its end or ``timeout`` seconds, return {rc, timed_out, seconds, output};
    the container is removed on every path."""
    started = clock()
    name = spec["name"]
    engine = None
    try:
        engine = Engine.at(docker_host, REQUEST_TIMEOUT_S)
        engine.ensure_started(name, _container.create_body(spec, stop_timeout=1))
        state = wait(engine, name, started + timeout, clock)
        output = demux(engine.logs(name)[-LOG_TAIL_BYTES:])
    except (OSError, ValueError, DockerError) as exc:
        return {"rc": None, "timed_out": False, "seconds": round(clock() - started, 3), "output": "",
                "error": "%s: %s" % (name, exc)}
    finally:
        try:
            if engine is not None:
                remove(engine, name)
        except OSError:
            pass
    return {"rc": state.get("ExitCode") if not state.get("Running") else None, "timed_out": bool(state.get("Running")),
            "seconds": round(clock() - started, 3), "output": output}


def wait(engine: Engine, name: str, deadline: float, clock: Callable[[], float]) -> Dict[str, Any]:
    """The container's state once it ended, or at the deadline (still running)."""
    while True:
        try:
            found = engine.inspect(name)
        except DockerError:
            found = None
        state = (found or {}).get("State") or {}
        if found is None or not state.get("Running") or clock() >= deadline:
            return state
        time.sleep(POLL_S)


def tools_missing(docker_host: str, image: str, paths: Sequence[str], probe_name: str) -> List[str]:
    """Which of ``paths`` the image lacks: absolute paths asked as they are, a bare name along the image's PATH.
    Nothing runs: a container is created (not started), its filesystem asked, and removed."""
    engine = Engine.at(docker_host, REQUEST_TIMEOUT_S)
    config = engine.image(image)
    if config is None:
        raise LookupError("%s is not on the node" % image)
    search = [p for p in dict(e.split("=", 1) for e in (config.get("Config") or {}).get("Env") or []
                              if "=" in e).get("PATH", "/usr/bin:/bin").split(":") if p]
    body = {"Image": image, "Cmd": ["true"], "Labels": {"clusterval.fabric": "probe"}}
    remove(engine, probe_name)
    engine.create(probe_name, body)
    try:
        return [path for path in paths if not any(
            engine.has_path(probe_name, candidate)
            for candidate in ([path] if path.startswith("/") else ["%s/%s" % (d.rstrip("/"), path) for d in search]))]
    finally:
        remove(engine, probe_name)
