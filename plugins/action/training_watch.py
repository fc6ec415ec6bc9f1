# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of clusterval.training.training_watch.

With ``status_dir`` (the cluster watch): one poll of the whole cluster. One call of
clusterval.training.training_status on the task's host renews the run's lease and reads the lines every
node's supervisor appended to its status stream on the shared directory; the node states live in this
worker process between the retries of the task and go to ``<run_dir>/watch/<run_id>/`` when the watch ends.

Without it (the direct check): one poll of one node, clusterval.training.training_log on the node from the
offset the previous poll stopped at. Merging, deciding and the state files are in plugins/module_utils/_watch.py.
"""
from __future__ import annotations

import os
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils import _watch
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view

LOG_MODULE = "clusterval.training.training_log"
STATUS_MODULE = "clusterval.training.training_status"
# The cluster watch's node states between two polls (the retries of one task run in one worker process).
CLUSTER_STATES: dict[tuple[str, str], dict[str, Any]] = {}

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
    "docker_socket": {"type": "path", "default": _watch.DOCKER_SOCKET},
    "status_dir": {"type": "path"},
    "hosts": {"type": "list", "elements": "str"},
    "stale_timeout": {"type": "float", "default": 30.0},
    "exit_grace": {"type": "float", "default": 120.0},
    "settle": {"type": "float", "default": 5.0},
    "fresh": {"type": "bool", "default": False},
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
        if args["status_dir"]:
            return self._cluster_poll(result, plan, args, task_vars)
        host = task_vars.get("inventory_hostname", self._task.delegate_to or "")
        if not isinstance(plan, dict) or host not in plan.get("nodes", {}):
            result.update(failed=True, done=True,
                          msg=f"{host}: no plan for this host (run clusterval.training.training_plan first)")
            return result
        limits = _watch.Limits(*(float(args[key]) for key in ("hang_timeout", "startup_timeout", "deadline")))
        try:
            directory = _watch.watch_dir(args["run_dir"], str(plan.get("run_id") or "run"))
            watch = _watch.Watch.from_plan(plan, host, directory, limits, args["docker_socket"])
        except ConfigError as exc:
            result.update(failed=True, done=True, msg=f"{host}: {exc}")
            return result
        return self._poll(result, watch, args, task_vars)

    def _poll(self, result: dict[str, Any], watch: _watch.Watch, args: dict[str, Any],
              task_vars: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        if args["fresh"]:
            state = _watch.new_state(watch.host, args["started_at"] or now)
        else:
            state = _watch.load_state(watch.run_dir, watch.host, args["started_at"] or now)
        result.update(host=watch.host, state_path=watch.state_path, changed=False)
        if state["done"]:
            result.update(_watch.answer(state, watch.final_step, now))
            return result
        abort = _watch.read_json(_watch.abort_path(watch.run_dir))
        try:
            poll = self._execute_module(module_name=LOG_MODULE, task_vars=task_vars,
                                        module_args=_watch.log_args(watch, state, args["max_steps"], args["patterns"],
                                                                    args["advisories"]))
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

    # -- the cluster watch ---------------------------------------------------------------------------

    def _cluster_poll(self, result: dict[str, Any], plan: Any, args: dict[str, Any],
                      task_vars: dict[str, Any]) -> dict[str, Any]:
        try:
            cluster = ClusterRun.from_args(plan, args)
        except (ConfigError, KeyError, TypeError) as exc:
            result.update(failed=True, done=True, msg=f"cluster watch: {exc}")
            return result
        if cluster.controller_gone():
            # ansible-playbook died (SIGKILL) and left this worker behind: renewing the lease would keep every
            # job alive with nobody watching it, and nobody reads this result. The lease lapses, the jobs stop.
            os._exit(1)
        now = time.time()
        module_args = {"status_dir": args["status_dir"], "hosts": cluster.watched(), "offsets": cluster.offsets(),
                       "lease": cluster.next_lease(now)}
        reader = task_vars.get("inventory_hostname", "")
        try:
            read = self._execute_module(module_name=STATUS_MODULE, task_vars=task_vars, module_args=module_args)
        except AnsibleConnectionFailure as exc:
            read = {"unreachable": True, "msg": to_text(exc)}
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if read.get("unreachable") or read.get("failed"):
            cluster.reader_failed(reader, read, now)
        else:
            cluster.fold(read.get("nodes") or {}, now)
        result.update(cluster.decide(now), changed=False, state_dir=cluster.directory)
        return result


class ClusterRun:
    """The node states of one run's cluster watch and the steps of one poll."""

    def __init__(self, plan: dict[str, Any], args: dict[str, Any]) -> None:
        self.plan = plan
        self.hosts = list(args["hosts"] or plan["nodes"].keys())
        self.final_step = _watch.final_step_of(plan)
        self.limits = _watch.Limits(*(float(args[k]) for k in ("hang_timeout", "startup_timeout", "deadline")))
        self.cluster = _watch.ClusterLimits(float(args["stale_timeout"]), float(args["exit_grace"]),
                                            float(args["settle"]))
        self.directory = _watch.watch_dir(args["run_dir"], str(plan.get("run_id") or "run"))
        key = (self.directory, args["status_dir"])
        fresh = key not in CLUSTER_STATES
        started = args["started_at"] or time.time()
        self.memory = CLUSTER_STATES.setdefault(key, {"started_at": started, "renewal": 0, "saved": False,
                                                      "states": {}, "nodes": {}, "controller": os.getppid()})
        if fresh:
            self.memory["states"] = {h: self.new_node_state(h, started) for h in self.hosts}
        self.states: dict[str, dict[str, Any]] = self.memory["states"]

    @classmethod
    def from_args(cls, plan: Any, args: dict[str, Any]) -> "ClusterRun":
        if not isinstance(plan, dict) or not isinstance(plan.get("nodes"), dict):
            raise ConfigError("plan", "the plan of clusterval.training.training_plan", type(plan).__name__)
        return cls(plan, args)

    def new_node_state(self, host: str, started: float) -> dict[str, Any]:
        state = _watch.new_cluster_state(host, started)
        node = self.node(host)
        state["node_rank"] = node.get("node_rank")
        state["container"] = {"name": (node.get("container") or {}).get("name"), "status": None,
                              "exit_code": None, "oom_killed": False}
        return state

    def node(self, host: str) -> dict[str, Any]:
        nodes = self.memory.setdefault("nodes", {})
        if host not in nodes:
            nodes[host] = node_view(self.plan, host)
        return nodes[host]

    def controller_gone(self) -> bool:
        """The worker's parent, the ansible-playbook process, is no longer the one of the first poll."""
        return os.getppid() != self.memory["controller"]

    def watched(self) -> list[str]:
        return [h for h, s in self.states.items() if not s["done"]]

    def offsets(self) -> dict[str, int]:
        return {h: s["stream_offset"] for h, s in self.states.items() if not s["done"]}

    def next_lease(self, now: float) -> dict[str, Any]:
        """The lease content of this poll: a new renewal number opens the gang start and keeps every job alive."""
        self.memory["renewal"] += 1
        return {"renewal": self.memory["renewal"], "go": True, "time": now}

    def fold(self, nodes: dict[str, Any], now: float) -> None:
        for host, read in nodes.items():
            if host in self.states and not self.states[host]["done"]:
                _watch.fold_stream(self.states[host], read, now)

    def reader_failed(self, reader: str, read: dict[str, Any], now: float) -> None:
        """The node that reads the shared directory for everyone cannot: it is named, the watch ends."""
        state = self.states.get(reader)
        how = "unreachable" if read.get("unreachable") else "could not read the status directory"
        msg = f"{reader}: {how} during the run: {to_text(read.get('msg', ''))}"
        if state is not None and not state["done"]:
            _watch.apply_decision(state, _watch.Decision(True, True, "unreachable", msg), now)

    def printer_of(self, host: str) -> dict[str, Any] | None:
        printer = _watch.printer_of(self.plan, self.node(host))
        return self.states.get(printer) if printer and printer != host else None

    def decide(self, now: float) -> dict[str, Any]:
        suspects = []
        for host, state in self.states.items():
            if state["done"]:
                continue
            decision = _watch.decide_cluster_node(state, self.node(host), self.final_step, self.limits, self.cluster,
                                                  self.printer_of(host), now)
            _watch.apply_decision(state, decision, now)
            if decision.reason == "unreachable" and decision.failed:
                suspects.append(host)
        culprit = _watch.first_failure(self.states)
        if culprit is not None and _watch.settle_cluster(self.states, self.cluster, now):
            _watch.abort_the_rest(self.states, culprit, now)
        answer = _watch.cluster_answer(self.states, self.final_step, self.memory["started_at"], now,
                                       sorted(h for h, s in self.states.items()
                                              if s["reason"] == "unreachable" and s["failed"]))
        if answer["done"] and not self.memory["saved"]:
            _watch.save_cluster_states(self.directory, self.states)
            self.memory["saved"] = True
        _watch.save_progress(self.directory, answer)
        return answer
