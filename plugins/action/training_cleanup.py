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

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction
from ansible_collections.clusterval.training.plugins.plugin_utils._node_task import role_vars, without_invocation

# What settings_from reads from the role's variables (<role>_<name>): the options of these names, and the
# role's settings below them. The teardown role leaves most of them unset: their defaults are computed here.
ROLE_OPTIONS = ("docker_host", "plan", "run_id", "controller", "log_copy")
ROLE_SETTINGS = ("run_dir", "collect_logs", "docker_timeout")


def paths_from_plan(plan: Any, host: str, run_id: str, collect_log: bool) -> dict[str, str]:
    """The run's directory, data cache and training log on ``host``, from the plan of ``run_id``."""
    if not isinstance(plan, dict) or host not in (plan.get("nodes") or {}) or not run_id:
        return {}
    node = node_view(plan, host)
    paths = {"run_dir": node.get("run_dir") or "", "data_cache_dir": plan.get("data_cache_dir") or ""}
    if collect_log:
        paths["log_path"] = node.get("log_path") or ""
    return paths


class ActionModule(CollectionAction):
    # Runs the module on the task's host.
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        host = str(task_vars.get("inventory_hostname") or "")
        module_args = dict(self._task.args)
        role = module_args.pop("settings_from", None)
        plan = module_args.pop("plan", None)
        if role:
            module_args = dict(self._role_arguments(task_vars, str(role), host, plan), **module_args)
            plan = module_args.pop("plan")
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
        log = without_invocation(answer).pop("log", None) or {}
        log_error = _cleanup.write_log_copy(log, copy) if log else ""
        result.update(answer)
        result.update(_cleanup.outcome_of(host, dict(answer, log=log), log_error))
        # An unreachable node's teardown fails too (its containers may still run); its outcome says so.
        result["failed"] = not result["ok"]
        if log.get("data"):
            result["log_bytes"] = log.get("kept")
        return result

    def _role_arguments(self, task_vars: dict[str, Any], role: str, host: str, plan: Any) -> dict[str, Any]:
        """The module's arguments from the role's variables; those left unset take the plan's run (its id, and
        its log collected into the run directory), the collection's training_* settings or the defaults."""
        settings = role_vars(self._templar, task_vars, role, ROLE_OPTIONS + ROLE_SETTINGS,
                             {"docker_host": "training_docker_host", "run_dir": "training_run_dir"})
        role_plan = settings.pop("plan", None)
        plan = role_plan if plan is None else plan
        if plan is None:
            plan = (task_vars.get("ansible_facts") or {}).get("training_plan")
        run_dir = str(settings.pop("run_dir", "") or "")
        given_run = (plan.get("run_id") if isinstance(plan, dict) else None) or task_vars.get("training_run_id")
        arguments = {"node": host, "address": self._templar.template(task_vars.get("ansible_host") or host),
                     "plan": plan, "run_id": self._templar.template(given_run or ""),
                     "timeout": settings.pop("docker_timeout", 30),
                     "collect_log": bool(run_dir) and host in ((plan or {}).get("nodes") or {})}
        if run_dir:
            arguments["log_copy"] = os.path.join(run_dir, "logs", host, "training.log")
        if "collect_logs" in settings:
            arguments["collect_log"] = settings.pop("collect_logs")
        return dict(arguments, **settings)
