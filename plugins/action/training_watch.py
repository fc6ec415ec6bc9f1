# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of clusterval.training.training_watch: validate, then one step of the run watch.

- With ``status_dir`` (the cluster watch): one poll of the whole cluster, ``_run_watch.ClusterWatch.poll``
  over one call of clusterval.training.training_status on the task's host.
- With ``conclude``: the end of the watch, ``_run_watch.conclude`` (the one decision of the culprit).
- Otherwise a direct look at one node (clusterval.training.training_log on it), ``_run_direct``.
"""
from __future__ import annotations

import os
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterval.training.plugins.module_utils import _launch_slurm, _room, _run_direct, _run_fold, _run_watch
from ansible_collections.clusterval.training.plugins.module_utils._console import poll_line
from ansible_collections.clusterval.training.plugins.module_utils._controller import is_write_fault, run_dir_fault
from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._run_records import (
    ClusterLimits, Limits, final_step_of)
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction, failed

LOG_MODULE = "clusterval.training.training_log"
STATUS_MODULE = "clusterval.training.training_status"

ARGUMENT_SPEC: dict[str, Any] = {
    "plan": {"type": "dict"},
    "run_dir": {"type": "path", "required": True},
    "hang_timeout": {"type": "float", "default": 600.0},
    "startup_timeout": {"type": "float", "default": 1800.0},
    "deadline": {"type": "float", "default": 14400.0},
    "started_at": {"type": "float"},
    "max_steps": {"type": "int", "default": 2000},
    "patterns": {"type": "list", "elements": "dict", "default": []},
    "advisories": {"type": "list", "elements": "str", "default": []},
    **ENDPOINT_OPTION,
    "status_dir": {"type": "path"},
    "hosts": {"type": "list", "elements": "str"},
    "stale_timeout": {"type": "float", "default": 30.0},
    "exit_grace": {"type": "float", "default": 120.0},
    "settle": {"type": "float", "default": 5.0},
    "lease_timeout": {"type": "float"},
    "controller": {"type": "int"},
    "fresh": {"type": "bool", "default": False},
    "conclude": {"type": "bool", "default": False},
    "looks": {"type": "dict", "default": {}},
    "slurm_job": {"type": "str"},
    "slurm_record": {"type": "dict"},
    "drain": {"type": "bool", "default": False},
    "pending_timeout": {"type": "float"},
}


def limits_of(args: dict[str, Any]) -> Limits:
    return Limits(*(float(args[key]) for key in ("hang_timeout", "startup_timeout", "deadline")))


class ActionModule(CollectionAction):
    # Runs the module on the task's host.
    _requires_connection = True
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._validated(ARGUMENT_SPEC, "training_watch")
        plan = args["plan"] or task_vars.get("training_plan")
        if not isinstance(plan, dict) or not isinstance(plan.get("nodes"), dict):
            result.update(failed=True, done=True, msg="training_watch: no plan (run clusterval.training.training_plan)")
            return result
        try:
            final_step_of(plan)
            if args["conclude"]:
                return self._conclude(result, plan, args)
            if args["status_dir"]:
                return self._cluster_poll_with_room(result, plan, args, task_vars)
            return self._direct_look(result, plan, args, task_vars)
        except ConfigError as exc:
            return dict(failed(result, "training_watch", exc), done=True)
        except OSError as exc:
            # The watch keeps its memory in the run directory: a controller that cannot write there is said so.
            reason = exc.strerror if is_write_fault(exc) else str(exc)
            result.update(failed=True, done=True, reason="controller", msg=run_dir_fault(args["run_dir"], reason))
            return result

    # -- the cluster watch ---------------------------------------------------------------------------

    def _cluster_poll_with_room(self, result: dict[str, Any], plan: dict[str, Any], args: dict[str, Any],
                                task_vars: dict[str, Any]) -> dict[str, Any]:
        """A poll that met a full disk is polled again once, in the room kept for the watch (``_room``)."""
        try:
            return self._cluster_poll(result, plan, args, task_vars)
        except OSError as exc:
            if not (is_write_fault(exc) and _room.release(args["run_dir"], "watch")):
                raise
        return self._cluster_poll(result, plan, args, task_vars)

    def _cluster_poll(self, result: dict[str, Any], plan: dict[str, Any], args: dict[str, Any],
                      task_vars: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        if args["controller"] is not None and os.getppid() != args["controller"]:
            # ansible-playbook died (SIGKILL) and left this worker behind: renewing the lease would keep every
            # job alive with nobody watching it. The lease lapses, the jobs stop.
            result.update(failed=True, done=True, reason="controller", msg="the controller is gone: not renewing")
            return result
        cluster = ClusterLimits(float(args["stale_timeout"]), float(args["exit_grace"]), float(args["settle"]))
        watch = _run_watch.ClusterWatch.load(plan, list(args["hosts"] or plan["nodes"]), args["run_dir"],
                                             limits_of(args), cluster, args["lease_timeout"],
                                             args["controller"] or 0, args["started_at"] or now,
                                             args["pending_timeout"])
        module_args = {"status_dir": args["status_dir"], "hosts": watch.watched(), "offsets": watch.offsets(),
                       "lease": watch.next_lease(now)}
        if args["slurm_job"]:
            module_args["slurm_job"] = args["slurm_job"]
        read = self._run_module(STATUS_MODULE, module_args, task_vars)
        reader = self._task.delegate_to or task_vars.get("inventory_hostname", "")
        result.update(watch.poll(read, reader, time.time()),
                      changed=False, state_dir=watch.directory)
        result["line"] = poll_line(result, task_vars.get("inventory_hostname", ""))
        return result

    def _conclude(self, result: dict[str, Any], plan: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        hosts = list(args["hosts"] or plan["nodes"])
        directory = _run_watch.watch_dir(args["run_dir"], str(plan.get("run_id") or "run"))
        for host, look in args["looks"].items():
            if _run_direct.look_that_never_answered(look):
                _run_direct.save_look(directory, host, _run_direct.unanswered(host, look))
        record = args["slurm_record"]
        scheduler = _launch_slurm.scheduler_record(*(str(record.get(key) or "") for key in (
            "job_id", "sacct", "output", "job", "node_reasons"))) if record else None
        outcome = _run_watch.conclude(args["run_dir"], str(plan.get("run_id") or "run"), hosts, scheduler)
        headline = _run_fold.failure_headline(outcome)
        if scheduler is not None:
            culprit = outcome["culprit"]
            drain = _launch_slurm.drain_argv(culprit["host"], str(plan.get("run_id")), headline or "") if culprit else []
            scheduler["drain"] = {"argv": drain, "run": bool(drain) and args["drain"]}
            result.update(scheduler=scheduler, drain=drain if args["drain"] else [])
        result.update(changed=False, done=True, failed=headline is not None, msg=headline or "every node completed",
                      culprit=outcome["culprit"], run_cause=outcome["run_cause"],
                      consequences=outcome["consequences"], independent=outcome["independent"])
        return result

    # -- a direct look at one node -------------------------------------------------------------------

    def _direct_look(self, result: dict[str, Any], plan: dict[str, Any], args: dict[str, Any],
                     task_vars: dict[str, Any]) -> dict[str, Any]:
        host = task_vars.get("inventory_hostname", self._task.delegate_to or "")
        if host not in plan["nodes"]:
            result.update(failed=True, done=True, msg=f"{host}: no plan for this host")
            return result
        directory = _run_watch.watch_dir(args["run_dir"], str(plan.get("run_id") or "run"))
        watch = _run_direct.Watch.from_plan(plan, host, directory, limits_of(args), args["docker_host"])
        now = time.time()
        started = args["started_at"] or now
        state = _run_direct.new_state(host, started) if args["fresh"] else \
            _run_direct.load_state(directory, host, started)
        result.update(host=host, state_path=watch.state_path, changed=False)
        if state["done"]:
            result.update(_run_direct.answer(state, watch.final_step, now))
            return result
        abort = _run_watch.read_json(_run_watch.abort_path(directory))
        poll = self._run_module(LOG_MODULE, _run_direct.log_args(watch, state, args["max_steps"], args["patterns"],
                                                                 args["advisories"]), task_vars)
        if args["fresh"]:
            look = _run_direct.look(watch, state, poll, now)
            _run_direct.save_look(directory, host, look)
            result.update(look)
            return result
        if poll.get("unreachable"):
            msg = _run_direct.record_unreachable(directory, state, to_text(poll.get("msg", "")))
            result.update(unreachable=True, done=True, reason="unreachable", msg=msg)
            return result
        _run_direct.record_poll(watch, state, poll, abort, now)
        result.update(_run_direct.answer(state, watch.final_step, now))
        result["line"] = poll_line(result, host)
        return result

    def _run_module(self, name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._execute_module(module_name=name, task_vars=task_vars, module_args=module_args)
        except AnsibleConnectionFailure as exc:
            return {"unreachable": True, "msg": to_text(exc)}
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
