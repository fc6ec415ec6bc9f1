# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_probe: with O(plan), the node's probe arguments are computed here from the plan
and the preflight role's settings (one Python call instead of a chain of role variables templated per node);
without it, the task's arguments go to the module as they are."""
from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._probe_args import probe_args


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        module_args = dict(self._task.args)
        plan = module_args.pop("plan", None)
        settings = module_args.pop("settings", None) or {}
        if plan is not None:
            host = str(task_vars.get("inventory_hostname") or "")
            try:
                if not isinstance(plan, dict) or not isinstance(settings, dict):
                    raise ConfigError("plan", "the plan (a dict) and the preflight settings (a dict)",
                                      "%s and %s" % (type(plan).__name__, type(settings).__name__))
                derived = probe_args(plan, host, settings, len(task_vars.get("ansible_play_hosts") or [host]),
                                     bool(self._task.check_mode))
            except (ConfigError, KeyError, TypeError, ValueError) as exc:
                result.update(failed=True, msg="training_probe: %s" % getattr(exc, "message", exc))
                return result
            module_args = dict(derived, **module_args)
        result.update(self._execute_module(module_name="clusterval.training.training_probe", module_args=module_args,
                                           task_vars=task_vars))
        return result
