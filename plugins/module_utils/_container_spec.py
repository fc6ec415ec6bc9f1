# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A node's container spec, on the controller: the plan's, with the user's overrides, the HF token's mount and
the extra volumes, and the run's files that must be on the node before the container starts."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view


def container_spec(plan: Mapping[str, Any], host: str, overrides: Mapping[str, Any],
                   command: Optional[Sequence[str]] = None, extra_volumes: Sequence[str] = (),
                   token_file: Optional[str] = None, token_present: bool = True) -> Dict[str, Any]:
    """The plan's container for ``host`` with ``overrides`` merged over it (``env`` key by key, every value a
    string, as Docker wants). The HF token reaches the container as a read-only bind mount, never through its
    environment; a bind mount fails on a missing file instead of creating a directory there."""
    node = node_view(plan, host)
    spec = dict(node.get("container") or {})
    env = dict(spec.get("env") or {})
    env.update((overrides or {}).get("env") or {})
    spec.update(overrides or {})
    spec["env"] = {str(key): str(value) for key, value in env.items()}
    if command:
        spec["command"] = list(command)
    spec["volumes"] = list(spec.get("volumes") or []) + list(extra_volumes)
    token = node.get("hf_token_file") if token_file is None else token_file
    spec["mounts"] = [{"type": "bind", "source": token, "target": node["launch"]["hf_token_path"],
                       "read_only": True}] if token and token_present else []
    return spec


def node_files(plan: Mapping[str, Any], host: str) -> Dict[str, List[Any]]:
    """The directories and files (launch script, framework config) the plan puts on ``host``."""
    node = node_view(plan, host)
    return {"directories": list(node.get("directories") or []), "files": list(node.get("files") or [])}
