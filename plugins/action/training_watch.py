# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of clusterval.training.training_watch: one poll of one node.

Every call runs clusterval.training.training_log on the node from the offset
the previous poll stopped at; merging, deciding and the state files are in
plugins/module_utils/_watch.py.
"""
from __future__ import annotations

import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils import _watch
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

LOG_MODULE = "clusterval.training.training_log"

ARGUMENT_SPEC: dict[str, Any] = {
    "plan": {"type": "dict"},
    "run_dir": {"type": "path", "required": True},
    "hang_timeout": {"type": "float", "default": 600.0},
    "startup_timeout": {"type": "float", "default": 1800.0},
    "deadline": {"type": "float", "default": 14400.0},
    "started_at": {"type": "float"},
    "max_steps": {"type": "int", "default": 2000},
    "patterns": {"type": "list", "elements": "dict", "default": []},
    "docker_socket": {"type": "path", "default": _watch.DOCKER_SOCKET},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        plan = args["plan"] or task_vars.get("training_plan")
        host = task_vars.get("inventory_hostname", self._task.delegate_to or "")
        if not isinstance(plan, dict) or host not in plan.get("nodes", {}):
            result.update(failed=True, done=True,
                          msg=f"{host}: no plan for this host (run clusterval.training.training_plan first)")
            return result
        limits = _watch.Limits(*(float(args[key]) for key in ("hang_timeout", "startup_timeout", "deadline")))
        try:
            watch = _watch.Watch.from_plan(plan, host, args["run_dir"], limits, args["docker_socket"])
        except ConfigError as exc:
            result.update(failed=True, done=True, msg=f"{host}: {exc}")
            return result
        return self._poll(result, watch, args, task_vars)

    def _poll(self, result: dict[str, Any], watch: _watch.Watch, args: dict[str, Any],
              task_vars: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        state = _watch.load_state(watch.run_dir, watch.host, args["started_at"] or now)
        result.update(host=watch.host, state_path=watch.state_path, changed=False)
        if state["done"]:
            result.update(_watch.answer(state, watch.final_step, now))
            return result
        abort = _watch.read_json(_watch.abort_path(watch.run_dir))
        try:
            poll = self._execute_module(module_name=LOG_MODULE, task_vars=task_vars,
                                        module_args=_watch.log_args(watch, state, args["max_steps"], args["patterns"]))
        except AnsibleConnectionFailure as exc:
            return self._unreachable(result, watch, state, to_text(exc))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if poll.get("unreachable"):
            return self._unreachable(result, watch, state, poll.get("msg", ""))
        _watch.record_poll(watch, state, poll, abort, now)
        result.update(_watch.answer(state, watch.final_step, now))
        return result

    @staticmethod
    def _unreachable(result: dict[str, Any], watch: _watch.Watch, state: dict[str, Any], detail: Any) -> dict[str, Any]:
        msg = _watch.record_unreachable(watch.run_dir, state, to_text(detail))
        result.update(unreachable=True, done=True, reason="unreachable", msg=msg)
        return result
