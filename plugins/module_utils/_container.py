# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The training container's create request for the Docker Engine API (started by ``_docker.Engine``).

A container spec (the plan's ``container`` with the role's overrides: image, command, env, labels, devices,
volumes, mounts, groups, capabilities, ...) becomes one create request. The request's digest is kept as a label:
a container of the same name with the same digest is the same container (left running, or started again), any
other is removed and replaced, as ``community.docker.docker_container`` does with strict comparisons.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Mapping

from ansible_collections.clusterval.training.plugins.module_utils._docker import DIGEST_LABEL

SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def size_in_bytes(value: Any) -> int:
    """Docker's sizes: ``1G``, ``512m``, ``65536`` (1024 multiples, as the docker CLI reads them)."""
    match = re.fullmatch(r"\s*(\d+)\s*([bkmgt]?)b?\s*", str(value).lower())
    if not match:
        raise ValueError("shm_size: expected a size such as 64G or 512m, found %r" % (value,))
    return int(match.group(1)) * SIZE_UNITS[match.group(2)]


def device(text: str) -> Dict[str, str]:
    """``/dev/kfd``, ``/host/dri:/dev/dri`` or ``/dev/dri:/dev/dri:rw``."""
    parts = text.split(":")
    host = parts[0]
    inside = parts[1] if len(parts) > 1 and parts[1] else host
    return {"PathOnHost": host, "PathInContainer": inside, "CgroupPermissions": parts[2] if len(parts) > 2 else "rwm"}


def ulimit(text: str) -> Dict[str, Any]:
    """``memlock:-1:-1`` (name, soft, hard; hard defaults to soft)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("ulimits: expected name:soft[:hard], found %r" % text)
    return {"Name": parts[0], "Soft": int(parts[1]), "Hard": int(parts[-1])}


def mount(spec: Mapping[str, Any]) -> Dict[str, Any]:
    return {"Type": spec.get("type", "bind"), "Source": spec["source"], "Target": spec["target"],
            "ReadOnly": bool(spec.get("read_only", False))}


def device_request(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """A GPU request (``--gpus``): driver, count or device_ids, capabilities, options."""
    request: Dict[str, Any] = {"Driver": spec.get("driver", ""), "Capabilities": spec.get("capabilities") or [],
                               "Options": spec.get("options") or {}}
    if spec.get("device_ids"):
        request["DeviceIDs"] = [str(d) for d in spec["device_ids"]]
    else:
        request["Count"] = int(spec.get("count", -1))
    return request


def create_body(spec: Mapping[str, Any], stop_timeout: int) -> Dict[str, Any]:
    """The Docker API's create request for a container spec."""
    host: Dict[str, Any] = {
        "Binds": list(spec.get("volumes") or []),
        "Mounts": [mount(m) for m in spec.get("mounts") or []],
        "Devices": [device(d) for d in spec.get("devices") or []],
        "DeviceRequests": [device_request(r) for r in spec.get("device_requests") or []],
        "GroupAdd": [str(g) for g in spec.get("groups") or []],
        "CapAdd": list(spec.get("capabilities") or []),
        "SecurityOpt": list(spec.get("security_opts") or []),
        "Ulimits": [ulimit(u) for u in spec.get("ulimits") or []],
        "Privileged": bool(spec.get("privileged", False)),
        "RestartPolicy": {"Name": "no"},
    }
    for key, name in (("network_mode", "NetworkMode"), ("ipc_mode", "IpcMode")):
        if spec.get(key):
            host[name] = spec[key]
    if spec.get("shm_size"):
        host["ShmSize"] = size_in_bytes(spec["shm_size"])
    env = spec.get("env") or {}
    body = {"Image": spec["image"], "Cmd": [str(a) for a in spec.get("command") or []],
            "Env": ["%s=%s" % (k, v) for k, v in sorted(env.items())], "Labels": dict(spec.get("labels") or {}),
            "StopTimeout": int(stop_timeout), "HostConfig": host}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    body["Labels"][DIGEST_LABEL] = digest
    return body
