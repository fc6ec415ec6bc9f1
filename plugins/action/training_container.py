# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_container: the node's container spec and files from the plan, then one module
call on the node."""
from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._container_spec import container_spec, node_files
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    docker_host=dict(type="str", default="unix:///var/run/docker.sock"),
    spec_overrides=dict(type="dict", default={}),
    command=dict(type="list", elements="str", default=[]),
    extra_volumes=dict(type="list", elements="str", default=[]),
    hf_token_file=dict(type="str"),
    hf_token_present=dict(type="bool", default=True),
    stop_timeout=dict(type="int", default=10),
    timeout=dict(type="float", default=60.0),
    plan_files=dict(type="bool", default=True),
    directories=dict(type="list", elements="path", default=[]),
    files=dict(type="list", elements="dict", default=[]),
    owner=dict(type="str"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        plan = args["plan"] or (task_vars.get("ansible_facts") or {}).get("training_plan")
        host = task_vars.get("inventory_hostname")
        try:
            if not isinstance(plan, dict):
                raise ConfigError("plan", "the plan from clusterval.training.training_plan", "none")
            spec = container_spec(plan, host, args["spec_overrides"], args["command"], args["extra_volumes"],
                                  args["hf_token_file"], args["hf_token_present"])
            files = node_files(plan, host) if args["plan_files"] else {"directories": [], "files": []}
        except (ConfigError, KeyError, TypeError) as exc:
            result.update(failed=True, msg="training_container: %s" % getattr(exc, "message", exc))
            return result
        module_args = {"docker_host": args["docker_host"], "spec": spec, "stop_timeout": args["stop_timeout"],
                       "timeout": args["timeout"], "owner": args["owner"],
                       "directories": files["directories"] + args["directories"],
                       "files": files["files"] + args["files"]}
        result.update(self._execute_module(module_name="clusterval.training.training_container",
                                           module_args=module_args, task_vars=task_vars))
        result["container"] = spec
        return result
