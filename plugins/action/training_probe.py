# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_probe. With O(plan) (or O(settings), the plan then being the fact C(training_plan)),
the whole preflight of one node in one task: the node's
probe arguments computed here from the plan and the preflight role's settings (one Python call instead of a
chain of role variables templated per node), the controller's HF token handed over in the same module call,
the run this one takes over torn down, the node's report printed, and the task failed naming every failed
check. Without it, the task's arguments go to the module as they are."""
from __future__ import annotations

from typing import Any

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.utils.display import Display

from ansible_collections.clusterval.training.plugins.module_utils._console import human_stdout
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._probe_args import (
    SETTINGS, kernel_log_only_args, probe_args, takeover_args, token_dest, verdict)
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction
from ansible_collections.clusterval.training.plugins.plugin_utils._node_task import role_vars, without_invocation

PROBE = "clusterval.training.training_probe"
# The collection's settings that the preflight role's unset variables stand for.
COLLECTION_SETTINGS = {"gpu_arch": "training_gpu_arch", "hf_token_source": "training_hf_token_controller_file",
                       "takeover": "training_takeover"}
CLEANUP = "clusterval.training.training_cleanup"


class ActionModule(CollectionAction):
    # Runs the module on the task's host.
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        part = self._task.args.get("part") or "all"
        plan, settings, module_args = self._inputs(task_vars)
        if plan is None:
            result.update(self._execute_module(module_name=PROBE, module_args=module_args, task_vars=task_vars))
            return result
        host = str(task_vars.get("inventory_hostname") or "")
        if part == "kernel_log":
            return self._kernel_log(result, host, settings, module_args, task_vars)
        try:
            if not isinstance(plan, dict) or not isinstance(settings, dict):
                raise ConfigError("plan", "the plan (a dict) and the preflight settings (a dict)",
                                  "%s and %s" % (type(plan).__name__, type(settings).__name__))
            derived = probe_args(plan, host, settings, len(task_vars.get("ansible_play_hosts") or [host]),
                                 bool(self._task.check_mode))
            token = self._token(plan, host, settings)
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            result.update(failed=True, msg="training_probe: %s" % getattr(exc, "message", exc))
            return result
        except OSError as exc:
            result.update(failed=True, msg="training_probe: the HF token file on the controller: %s" % exc)
            return result
        result.update(without_invocation(self._execute_module(
            module_name=PROBE, module_args=dict(derived, **module_args, **token), task_vars=task_vars)))
        if result.get("failed") or result.get("unreachable"):
            return result
        if result.get("took_over"):
            self._take_over(result, plan, host, settings, task_vars)
        self._show(result)
        return result if part == "probe" else self._judge(result, host, result.get("checks") or [], task_vars)

    def _kernel_log(self, result: dict[str, Any], host: str, settings: dict[str, Any], module_args: dict[str, Any],
                    task_vars: dict[str, Any]) -> dict[str, Any]:
        """The node's verdict on the checks of its probe (the role's earlier task, part probe) and, where that probe
        said the kernel log needs root, the kernel log read by this task (run with become): no remote call
        elsewhere, so nothing runs as root where it need not."""
        probe = task_vars.get("%s_probe" % self._task.args.get("settings_from")) or {}
        checks = list(probe.get("checks") or [])
        if probe.get("kernel_log_become"):
            try:
                derived = kernel_log_only_args(host, settings)
            except ConfigError as exc:
                result.update(failed=True, msg="training_probe: %s" % exc.message)
                return result
            answer = without_invocation(self._execute_module(
                module_name=PROBE, module_args=dict(derived, **module_args), task_vars=task_vars))
            result.update(answer)
            if answer.get("failed") or answer.get("unreachable"):
                return result
            self._show(answer)
            checks += answer.get("checks") or []
        result.update(checks=checks, failed_checks=[c["check"] for c in checks if not c["ok"]])
        return self._judge(result, host, checks, task_vars)

    @staticmethod
    def _show(answer: dict[str, Any]) -> None:
        # Beside a machine-read stdout (json), the result's lines carry the report.
        if human_stdout(str(C.DEFAULT_STDOUT_CALLBACK)):
            for line in answer.get("lines") or []:
                Display().display(line)

    @staticmethod
    def _judge(result: dict[str, Any], host: str, checks: list[dict[str, Any]],
               task_vars: dict[str, Any]) -> dict[str, Any]:
        message = verdict(host, checks, str(task_vars.get("inventory_file") or ""))
        if message:
            result.update(failed=True, msg=message)
        return result

    def _inputs(self, task_vars: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        """The plan (with settings, the fact training_plan by default), the settings (the role's variables under
        those given) and the module's own arguments."""
        module_args = dict(self._task.args)
        module_args.pop("part", None)
        plan = module_args.pop("plan", None)
        settings = module_args.pop("settings", None)
        role = module_args.pop("settings_from", None)
        if role:
            settings = dict(self._role_settings(task_vars, str(role)), **(settings or {}))
            role_plan = settings.pop("plan", None)
            plan = role_plan if plan is None else plan
        if plan is None and settings is not None:
            plan = (task_vars.get("ansible_facts") or {}).get("training_plan")
        return plan, settings or {}, module_args

    def _role_settings(self, task_vars: dict[str, Any], role: str) -> dict[str, Any]:
        """The role's variables (<role>_<setting>) as settings, and the node's address."""
        settings = role_vars(self._templar, task_vars, role, SETTINGS + ("plan",), COLLECTION_SETTINGS)
        host = str(task_vars.get("inventory_hostname") or "")
        settings["address"] = self._templar.template(task_vars.get("ansible_host") or host)
        settings["hf_token_handed"] = bool(settings.get("hf_token_source"))
        settings["check_sudo"] = self._become_unattended(task_vars)
        return settings

    def _become_unattended(self, task_vars: dict[str, Any]) -> bool:
        """Whether become is sudo without a password, which `sudo -n true` on the node tells in advance."""
        method = task_vars.get("ansible_become_method") or self._play_context.become_method or "sudo"
        password = (task_vars.get("ansible_become_password") or task_vars.get("ansible_become_pass")
                    or self._play_context.become_pass)
        return str(method) in ("sudo", "ansible.builtin.sudo") and not password

    def _token(self, plan: dict[str, Any], host: str, settings: dict[str, Any]) -> dict[str, Any]:
        """The controller's token file (an AWX credential's), handed over in the probe's call; never in check
        mode (nothing is written)."""
        source = settings.get("hf_token_source") or ""
        if not source or self._task.check_mode:
            return {}
        with open(source, encoding="utf-8") as handle:
            content = handle.read()
        return {"hf_token": {"content": content, "dest": token_dest(plan, host, settings)}}

    def _take_over(self, result: dict[str, Any], plan: dict[str, Any], host: str, settings: dict[str, Any],
                   task_vars: dict[str, Any]) -> None:
        run_id = result["took_over"]["run_id"]
        try:
            cleanup = self._execute_module(module_name=CLEANUP, module_args=takeover_args(
                plan, host, settings, result["took_over"]), task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            cleanup = {"failed": True, "msg": to_text(exc)}
        result["takeover"] = cleanup
        result.setdefault("lines", []).append("%s: TAKEOVER of run %s: %s" % (host, run_id, cleanup.get("msg", "")))
        if cleanup.get("failed"):
            result.update(failed=True, msg="%s: the takeover of run %s failed: %s" % (host, run_id, cleanup.get("msg")))
