# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin clusterval.training.training_slurm: the Slurm job a plan emits, on the controller. Nothing runs
on any host: the role writes the files on the login host and submits the script there."""
from __future__ import annotations

import os
from typing import Any

from ansible_collections.clusterval.training.plugins.module_utils import _launch_slurm, _run_ship
from ansible_collections.clusterval.training.plugins.module_utils._container import create_body
from ansible_collections.clusterval.training.plugins.module_utils._docker import DEFAULT_HOST
from ansible_collections.clusterval.training.plugins.module_utils._errors import ClustervalError, ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._launch_docker import container_spec, node_files
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction, failed

MODULE_UTILS_DIR = os.path.dirname(os.path.abspath(_launch_slurm.__file__))

ARGUMENT_SPEC: dict[str, Any] = {
    "plan": {"type": "dict", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "shipments": {"type": "dict", "required": True},
    "settings": {"type": "dict", "default": {}},
    "spec_overrides": {"type": "dict", "default": {}},
    "host_spec_overrides": {"type": "dict", "default": {}},
    "hf_token_present": {"type": "bool", "default": True},
    "deadline": {"type": "float", "required": True},
}


def node_parts(plan: dict[str, Any], hosts: list[str], shipments: dict[str, Any], overrides: dict[str, Any],
               token_present: bool, docker_host: str, host_overrides: dict[str, Any]) -> dict[str, Any]:
    """host -> its container spec and the part its task reads (``_launch_slurm.node_part``); a host's own
    overrides (a host variable, as on the SSH path) before the run's."""
    parts = {}
    for host in hosts:
        job = (shipments.get(host) or {}).get("container") or {}
        spec = container_spec(plan, host, host_overrides.get(host) or overrides, job.get("command"), job.get("extra_volumes") or [],
                              None, token_present)
        own = node_files(plan, host)
        stop_timeout = int(job.get("stop_timeout") or 10)
        part = _launch_slurm.node_part(spec, create_body(spec, stop_timeout), own["files"] + list(job.get("files") or []),
                                       own["directories"] + list(job.get("directories") or []), docker_host,
                                       stop_timeout)
        parts[host] = {"spec": spec, "part": part}
    return parts


class ActionModule(CollectionAction):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        del tmp
        args = self._validated(ARGUMENT_SPEC, "training_slurm")
        settings = dict(args["settings"], deadline=args["deadline"])
        plan = args["plan"]
        try:
            missing = [h for h in args["hosts"] if h not in args["shipments"]]
            if missing:
                raise ConfigError("shipments", "every host's supervisor shipment", "none for %s" % ", ".join(missing))
            parts = node_parts(plan, args["hosts"], args["shipments"], args["spec_overrides"],
                               args["hf_token_present"], str(settings.get("docker_host") or DEFAULT_HOST),
                               args["host_spec_overrides"])
            status = _run_ship.status_dir(plan["data_cache_dir"], plan["run_id"])
            sources = _run_ship.module_closure(MODULE_UTILS_DIR, start="_slurm_step")
            job = _launch_slurm.job(plan, args["hosts"], parts, settings, sources, status)
        except ClustervalError as exc:
            return failed(result, "training_slurm", exc)
        except (KeyError, TypeError, ValueError) as exc:
            result.update(failed=True, msg="training_slurm: %s" % exc)
            return result
        result.update(changed=False, job=job, status_dir=status,
                      msg="sbatch %s: %d nodes, --time=%d, runtime %s" % (
                          job["script_path"], len(args["hosts"]), job["time_limit_minutes"], job["runtime"]))
        return result
