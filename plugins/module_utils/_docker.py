# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Docker Engine API over the daemon's unix socket, with the standard library only.

Node-side modules use it where a check must cost milliseconds and need no Docker SDK on the node.
"""
from __future__ import annotations

import json
import socket
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import quote

ENDED = ("exited", "dead", "missing")


def docker_get(socket_path: str, path: str, timeout: float = 10.0) -> Tuple[int, bytes]:
    """An HTTP GET over the daemon's unix socket."""
    return docker_request(socket_path, "GET", path, timeout)


def docker_request(socket_path: str, method: str, path: str, timeout: float,
                   body: Optional[Mapping[str, Any]] = None) -> Tuple[int, bytes]:
    """(HTTP status, body) of one request over the daemon's unix socket, with a JSON body if given."""
    payload = b"" if body is None else json.dumps(body).encode("utf-8")
    head = b"%s %s HTTP/1.0\r\nHost: docker\r\n" % (method.encode("ascii"), path.encode("ascii"))
    if body is not None:
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(payload)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(socket_path)
        conn.sendall(head + b"\r\n" + payload)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    answer_head, dummy, answer = b"".join(chunks).partition(b"\r\n\r\n")
    status_line = answer_head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise ValueError("answered %r" % " ".join(status_line))
    return int(status_line[1]), answer


def container_state(socket_path: str, name: str) -> Dict[str, Any]:
    """{name, status, exit_code, oom_killed}; status `missing` when there is no such container, `unknown`
    when the daemon cannot tell."""
    state: Dict[str, Any] = {"name": name, "status": "unknown", "exit_code": None, "oom_killed": False}
    try:
        status, body = docker_get(socket_path, "/containers/%s/json" % quote(name, safe=""), timeout=5.0)
        found = json.loads(body.decode("utf-8")).get("State", {}) if status == 200 else None
    except (OSError, ValueError):
        return state
    if status == 404:
        return dict(state, status="missing")
    if not isinstance(found, dict):
        return state
    return dict(state, status=str(found.get("Status", "unknown")), exit_code=found.get("ExitCode"),
                oom_killed=bool(found.get("OOMKilled")))
