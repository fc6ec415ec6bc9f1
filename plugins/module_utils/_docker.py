# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Docker launcher's node driver: what a node does with the run's containers (create, start, replace, state,
stop, remove, the labelled ones a busy check and a teardown find), through the Docker Engine API over the daemon's
unix socket, with the standard library only.

As community.docker's engine driver, one object (``Engine``) is the only way the node-side code (the container's
start, the direct look, the busy check, the teardown, preflight, the fabric gate, Slurm's step) talks to Docker, and
the daemon's endpoint (``docker_host``, ``DEFAULT_HOST``) is read in one place (``socket_of``). Node-side modules use
it where a check must cost milliseconds and need no Docker SDK on the node.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote

from ansible_collections.clusterval.training.plugins.module_utils._errors import ClustervalError

# The one endpoint option of the modules and actions that talk to Docker (doc fragment clusterval.training.docker).
DEFAULT_HOST = "unix:///var/run/docker.sock"
ENDPOINT_OPTION = {"docker_host": {"type": "str", "default": DEFAULT_HOST}}
ENDED = ("exited", "dead", "missing")
DIGEST_LABEL = "clusterval.container_digest"
STATE_TIMEOUT_S = 5.0


class DockerError(ClustervalError):
    """The daemon refused a request; the message says which and why."""


def socket_of(docker_host: str) -> str:
    """The socket path of a `unix://` Docker host (or a plain path)."""
    if docker_host.startswith("unix://"):
        return docker_host[len("unix://"):]
    if "://" in docker_host:
        raise ValueError("only a unix socket Docker host is supported here, not %s" % docker_host)
    return docker_host


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


def parse(answer: bytes) -> Any:
    try:
        return json.loads(answer.decode("utf-8")) if answer.strip() else None
    except ValueError:
        return None


def message_of(answer: bytes) -> str:
    found = parse(answer)
    if isinstance(found, dict) and found.get("message"):
        return str(found["message"])[:300]
    return answer.decode("utf-8", "replace").strip()[:300]


def path_of(name: str, action: str = "json") -> str:
    return "/containers/%s/%s" % (quote(name, safe=""), action)


@dataclass(frozen=True)
class Engine:
    """The node's Docker daemon at ``socket_path``; ``timeout`` bounds each request."""
    socket_path: str
    timeout: float = 30.0

    @classmethod
    def at(cls, docker_host: str, timeout: float = 30.0) -> "Engine":
        return cls(socket_of(docker_host), timeout)

    def request(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None,
                timeout: Optional[float] = None) -> Tuple[int, bytes]:
        return docker_request(self.socket_path, method, path, self.timeout if timeout is None else timeout, body)

    def call(self, method: str, path: str, body: Optional[Mapping[str, Any]], what: str,
             expected: tuple) -> Dict[str, Any]:
        """The answer of a request that must end in one of ``expected``; any other is a DockerError saying ``what``."""
        status, answer = self.request(method, path, body)
        if status not in expected:
            raise DockerError("%s: Docker answered HTTP %d: %s" % (what, status, message_of(answer)))
        found = parse(answer)
        return found if isinstance(found, dict) else {}

    def version(self) -> str:
        status, body = self.request("GET", "/version")
        if status != 200:
            raise ValueError("answered HTTP %d" % status)
        return str(json.loads(body.decode("utf-8")).get("Version", "?"))

    def image(self, image: str) -> Optional[Dict[str, Any]]:
        """The image's inspect answer; None when the node does not have it."""
        return self.inspected("/images/%s/json" % quote(image, safe="/:@"), "the image %s" % image)

    def inspect(self, name: str) -> Optional[Dict[str, Any]]:
        """The container's inspect answer; None when there is no such container."""
        return self.inspected(path_of(name), name)

    def inspected(self, path: str, what: str) -> Optional[Dict[str, Any]]:
        status, answer = self.request("GET", path)
        if status == 404:
            return None
        found = parse(answer)
        if status != 200 or not isinstance(found, dict):
            raise DockerError("inspecting %s answered HTTP %d: %s" % (what, status, message_of(answer)))
        return found

    def state(self, name: str) -> Dict[str, Any]:
        """{name, status, exit_code, oom_killed, ended}; status `missing` when there is no such container, `unknown`
        when the daemon cannot tell; `ended`: the container no longer runs (exited, dead or removed)."""
        state: Dict[str, Any] = {"name": name, "status": "unknown", "exit_code": None, "oom_killed": False,
                                 "ended": False}
        try:
            status, body = self.request("GET", path_of(name), timeout=min(self.timeout, STATE_TIMEOUT_S))
            found = json.loads(body.decode("utf-8")).get("State", {}) if status == 200 else None
        except (OSError, ValueError):
            return state
        if status == 404:
            return dict(state, status="missing", ended=True)
        if not isinstance(found, dict):
            return state
        status_name = str(found.get("Status", "unknown"))
        return dict(state, status=status_name, exit_code=found.get("ExitCode"),
                    oom_killed=bool(found.get("OOMKilled")), ended=status_name in ENDED)

    def ensure_started(self, name: str, body: Mapping[str, Any], check_mode: bool = False) -> Dict[str, Any]:
        """Starts the container ``name`` as ``body`` (``_container.create_body``) says: ``action`` is ``unchanged``
        (the same one running), ``started`` (the same one, stopped), ``created`` or ``replaced``."""
        found = self.inspect(name)
        same = found is not None and (found.get("Config") or {}).get("Labels", {}).get(DIGEST_LABEL) == \
            body["Labels"][DIGEST_LABEL]
        running = bool(found and (found.get("State") or {}).get("Running"))
        if same and running:
            return {"action": "unchanged", "id": found.get("Id"), "changed": False}
        action = "started" if same else ("replaced" if found else "created")
        if check_mode:
            return {"action": action, "id": found.get("Id") if found else None, "changed": True}
        if found and not same:
            self.call("DELETE", "/containers/%s?force=1" % quote(found["Id"], safe=""), None,
                      "removing the earlier container %s" % name, (204, 404))
        container_id = found["Id"] if same else self.create(name, body)
        self.call("POST", path_of(container_id, "start"), None, "starting %s" % name, (204, 304))
        return {"action": action, "id": container_id, "changed": True}

    def create(self, name: str, body: Mapping[str, Any]) -> Optional[str]:
        """Creates (does not start) the container ``name``; its id."""
        created = self.call("POST", "/containers/create?name=%s" % quote(name, safe=""), body, "creating %s" % name,
                            (201,))
        return created.get("Id")

    def stop(self, name: str, grace: int) -> None:
        """docker stop: the container's command has ``grace`` seconds to end after SIGTERM."""
        self.request("POST", "%s?t=%d" % (path_of(name, "stop"), grace), timeout=grace + self.timeout)

    def remove(self, ref: str) -> None:
        """Kill and remove a container (docker rm -f); gone already is fine."""
        status, body = self.request("DELETE", "/containers/%s?force=1" % quote(ref, safe=""))
        if status not in (204, 404):
            detail = body.decode("utf-8", "replace").strip()[:200]
            raise ValueError("answered HTTP %d removing %s: %s" % (status, ref[:12], detail))

    def labelled(self, label: str) -> List[Dict[str, Any]]:
        """The node's containers (any state) carrying ``label`` (``key`` or ``key=value``), as the daemon lists them."""
        query = quote(json.dumps({"label": [label]}), safe="")
        status, body = self.request("GET", "/containers/json?all=1&filters=%s" % query)
        if status != 200:
            raise ValueError("answered HTTP %d listing containers" % status)
        return json.loads(body.decode("utf-8"))

    def logs(self, name: str) -> bytes:
        """The container's log stream (stdout and stderr, multiplexed); empty when the daemon has none."""
        status, logs = self.request("GET", "%s?stdout=1&stderr=1&tail=all" % path_of(name, "logs"))
        return logs if status == 200 else b""

    def has_path(self, name: str, path: str) -> bool:
        """Whether the (created) container's filesystem has ``path``; nothing runs."""
        status, dummy = self.request("HEAD", "%s?path=%s" % (path_of(name, "archive"), quote(path, safe="")))
        return status == 200
