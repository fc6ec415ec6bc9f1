# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin clusterval.training.training_plan: config file -> per-host plan, on the controller."""
from __future__ import annotations

import os

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import (
    PlanOptions,
    plan_run,
)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import compact_plan
from ansible_collections.clusterval.training.plugins.module_utils._stacks import PLANNED
from ansible_collections.clusterval.training.plugins.plugin_utils._action import PlanningAction

ARGUMENT_SPEC = {
    "config": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str"},
    "model": {"type": "str"},
    "gpu_arch": {"type": "str"},
    "mode": {"type": "str", "choices": ["single_node", "multi_node"]},
    "framework": {"type": "str", "choices": list(PLANNED)},
    # raw: a list or a string gets our own message naming the variable, not the argument spec's
    "overrides": {"type": "raw", "default": {}},
    "overrides_extra": {"type": "raw", "default": {}},
    "iterations": {"type": "int"},
    "run_id": {"type": "str"},
    "remote_user": {"type": "str"},
    "warmup_steps": {"type": "int"},
    "gpus_per_node": {"type": "int"},
    "sweep": {"type": "str"},
    "compact": {"type": "bool", "default": True},
    "runs_dir": {"type": "path"},
    "hf_token_handed": {"type": "bool", "default": False},
    "container_image": {"type": "str"},
    # host -> the training_gpus module's result (playbooks/tasks/plan.yml, when the arch is detected)
    "gpus_found": {"type": "raw"},
}


def plan_result(plan, runs_dir=None):
    """The task result for a plan: `plan`, the controller's `run_dir` and the fact `training_plan`."""
    return {
        "changed": False,
        "plan": plan,
        "run_dir": os.path.join(os.path.abspath(runs_dir or os.path.join(os.getcwd(), "runs")), plan["run_id"]),
        "ansible_facts": {"training_plan": plan},
        # The ansible-playbook process (this worker's parent): the watch stops renewing the lease without it.
        "controller_pid": os.getppid(),
        "msg": "planned %s on %d host(s) in %d job(s), %s form" % (
            plan["framework"], len(plan["nodes"]), len(plan["jobs"]), plan["form"]),
    }


class ActionModule(PlanningAction):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "training_plan")
        hosts = self._hosts(args, task_vars)
        try:
            config_path, found_in = self._config_path(args["config"])
            overrides = self._overrides(args)
            gpus_found = args["gpus_found"]
            if gpus_found is not None and not isinstance(gpus_found, dict):
                raise ConfigError("gpus_found", "an object of host name to the training_gpus result",
                                  type(gpus_found).__name__)
        except ConfigError as exc:
            result.update(failed=True, msg=exc.message, problems=[problem._asdict() for problem in exc.problems])
            return result
        options = PlanOptions(
            config_path=config_path, model=args["model"], gpu_arch=args["gpu_arch"], mode=args["mode"],
            framework=args["framework"], overrides=overrides, iterations=args["iterations"],
            run_id=args["run_id"], remote_user=args["remote_user"] or self._remote_user(hosts, task_vars),
            warmup_steps=args["warmup_steps"], gpus_per_node=args["gpus_per_node"], sweep=args["sweep"],
            hf_token_handed=args["hf_token_handed"], container_image=args["container_image"],
            gpus_found=gpus_found)
        try:
            plan = plan_run(load_config_file(config_path), hosts, options)
            if args["compact"]:
                plan = compact_plan(plan)
            plan["config_found_in"] = found_in
        except ConfigError as exc:
            prefix = "" if exc.path == config_path else "training config %s (%s): " % (config_path, found_in)
            result.update(failed=True, msg=prefix + exc.message,
                          problems=[problem._asdict() for problem in exc.problems])
            return result
        for warning in plan["warnings"]:
            self._display.warning(warning)
        result.update(plan_result(plan, args["runs_dir"]))
        result["msg"] = "%s; training config %s (%s)" % (result["msg"], config_path, found_in)
        return result
