# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin clusterval.training.compare_plan: both sides of a comparison planned from its file, on the
controller; a launch whose apple-to-apple values differ is refused before any node is touched."""
from __future__ import annotations

import datetime
import os
import secrets

from ansible_collections.clusterval.training.plugins.module_utils import _compare, _compare_run
from ansible_collections.clusterval.training.plugins.module_utils._config import (
    check_overrides, load_config_file, merge_overrides)
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import DEFAULT_GPUS_PER_NODE
from ansible_collections.clusterval.training.plugins.plugin_utils._action import PlanningAction, failed, load_comparison

ARGUMENT_SPEC = {
    "comparison": {"type": "path", "required": True},
    "nvidia_hosts": {"type": "str", "default": "compare_nvidia"},
    "amd_hosts": {"type": "str", "default": "compare_amd"},
    "iterations": {"type": "int"},
    "gpus_per_node": {"type": "int"},
    "images": {"type": "dict", "default": {}},
    "overrides": {"type": "dict", "default": {}},
    "training_overrides": {"type": "raw", "default": {}},
    "training_overrides_extra": {"type": "raw", "default": {}},
    "data_path": {"type": "str"},
    "tokenizer": {"type": "str"},
    "runs_dir": {"type": "path"},
}


class ActionModule(PlanningAction):

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "compare_plan")
        try:
            path, _found = self._config_path(args["comparison"])
            comparison = load_comparison(path)
            config_path, _config_found = self._config_path(comparison.training_config)
            raw_config = load_config_file(config_path)
            base = merge_overrides(check_overrides(args["training_overrides"], "training_overrides"),
                                   check_overrides(args["training_overrides_extra"], "compare_training_overrides"))
            compare_id = "%s-%s-%s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
                                       secrets.token_hex(3), comparison.name)
            iterations = args["iterations"] or int(_compare.side_arguments(comparison, "nvidia")["train_iters"])
            settings = {}
            for side in _compare.SIDES:
                hosts = self._hosts({"hosts": self._group(args["%s_hosts" % side], task_vars)}, task_vars)
                own = args["overrides"].get(side) or {}
                if not isinstance(own, dict):
                    raise ConfigError("compare_overrides.%s" % side, "a mapping of Megatron-LM arguments",
                                      type(own).__name__)
                settings[side] = {
                    "hosts": hosts, "config": raw_config, "config_path": config_path,
                    "gpu_arch": comparison.sides[side].gpu_arch, "gpus_per_node": args["gpus_per_node"],
                    "run_id": "%s-%s" % (compare_id, side), "remote_user": self._remote_user(hosts, task_vars),
                    "base_overrides": base, "overrides": own,
                    "image": args["images"].get(side) or (None if (base.get("config") or {}).get("container_image")
                                                          else comparison.sides[side].image),
                }
            sides, mismatches = _compare_run.plan_sides(comparison, settings, iterations, args["data_path"],
                                                        args["tokenizer"])
        except ConfigError as exc:
            return failed(result, "compare_plan", exc)
        runs_dir = os.path.abspath(args["runs_dir"] or os.path.join(os.getcwd(), "runs"))
        result.update(
            changed=False, comparison=path, compare_id=compare_id,
            compare_dir=os.path.join(runs_dir, compare_id), training_config=config_path, model=comparison.model,
            iterations=iterations, gpus_per_node=args["gpus_per_node"] or DEFAULT_GPUS_PER_NODE,
            mismatches=[m._asdict() for m in mismatches],
            sides={side: {"run_id": settings[side]["run_id"], "gpu_arch": settings[side]["gpu_arch"],
                          "hosts": [h.name for h in settings[side]["hosts"]],
                          "stack": comparison.sides[side].stack,
                          "command": _first_command(sides[side]["plan"]),
                          "training_overrides": sides[side]["training_overrides"]} for side in _compare.SIDES})
        for side in _compare.SIDES:
            for warning in sides[side]["warnings"]:
                self._display.warning(warning)
        if mismatches:
            result.update(failed=True, msg=_compare_run.refusal(mismatches))
        else:
            where = ", ".join("%s on %s" % (comparison.sides[s].label, ", ".join(result["sides"][s]["hosts"]))
                              for s in _compare.SIDES)
            result["msg"] = "comparison %s: both launches rendered with the same apple-to-apple values (%s)" % (
                compare_id, where)
        return result

    @staticmethod
    def _group(pattern, task_vars):
        groups = task_vars.get("groups") or {}
        if pattern in groups:
            names = list(groups[pattern])
        else:
            names = [name for name in pattern.replace(":", ",").split(",") if name]
        if not names:
            raise ConfigError("compare hosts", "an inventory group or host names with at least one host",
                              repr(pattern))
        return names


def _first_command(plan):
    for node in (plan.get("nodes") or {}).values():
        return (node.get("launch") or {}).get("command")
    return None
