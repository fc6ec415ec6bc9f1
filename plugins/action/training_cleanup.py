# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_cleanup: one call per node removes the run and brings its training log back,
which is written here to ``log_copy``; the result is the node's teardown outcome (ok, unreachable, msg)."""
from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup


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
        result["failed"] = not result["ok"] and not result["unreachable"]
        if log.get("data"):
            result["log_bytes"] = log.get("kept")
        return result
