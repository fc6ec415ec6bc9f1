# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_cleanup: one call per node removes the run and brings its training log back,
which is written here to ``log_copy``; the result is the node's teardown outcome (ok, unreachable, msg).
With ``plan`` (by default the fact ``training_plan``, when there is one; ``{}`` for none), the run's paths on the node
(its directory, data cache and log) come from the plan."""
from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup
from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view
from ansible_collections.clusterval.training.plugins.plugin_utils._role_vars import role_vars

# The options that settings_from reads from the role's variables (<role>_<option>).
ROLE_OPTIONS = ("docker_host", "plan", "run_id", "controller", "log_copy")


def paths_from_plan(plan: Any, host: str, run_id: str, collect_log: bool) -> dict[str, str]:
    """The run's directory, data cache and training log on ``host``, from the plan of ``run_id``."""
    if not isinstance(plan, dict) or host not in (plan.get("nodes") or {}) or not run_id:
        return {}
    node = node_view(plan, host)
    paths = {"run_dir": node.get("run_dir") or "", "data_cache_dir": plan.get("data_cache_dir") or ""}
    if collect_log:
        paths["log_path"] = node.get("log_path") or ""
    return paths


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        host = str(task_vars.get("inventory_hostname") or "")
        module_args = dict(self._task.args)
        role = module_args.pop("settings_from", None)
        if role:
            module_args = dict(role_vars(self._templar, task_vars, str(role), ROLE_OPTIONS), **module_args)
            module_args.setdefault("node", host)
            module_args.setdefault("address", self._templar.template(task_vars.get("ansible_host") or host))
        plan = module_args.pop("plan", None)
        if plan is None:
            plan = (task_vars.get("ansible_facts") or {}).get("training_plan")
        collect_log = boolean(module_args.pop("collect_log", True), strict=False)
        module_args.update(paths_from_plan(plan, host, str(module_args.get("run_id") or ""), collect_log))
        copy = module_args.get("log_copy")
        if not copy or os.path.exists(copy) or self._task.check_mode:
            module_args["log_path"] = ""
        try:
            answer = self._execute_module(module_name="clusterval.training.training_cleanup",
                                          module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            answer = {"unreachable": True, "msg": to_text(exc)}
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        log = answer.pop("log", None) or {}
        log_error = _cleanup.write_log_copy(log, copy) if log else ""
        result.update(answer)
        result.update(_cleanup.outcome_of(host, dict(answer, log=log), log_error))
        # An unreachable node's teardown fails too (its containers may still run); its outcome says so.
        result["failed"] = not result["ok"]
        if log.get("data"):
            result["log_bytes"] = log.get("kept")
        return result
