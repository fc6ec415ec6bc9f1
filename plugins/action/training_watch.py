# Copyright: clusterval developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of clusterval.training.training_watch: one poll of one node.

Every call runs clusterval.training.training_log on the node from the offset
the previous poll stopped at, merges what is new into the node's state file
``<run_dir>/watch/<host>.json`` and decides whether the node is done.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

LOG_MODULE = "clusterval.training.training_log"
ABORT_FILE = "abort.json"
# Failure classes that usually follow another node's failure (a peer vanished) rather than cause it.
SECONDARY_CLASSES = frozenset({"coordination", "network"})
# Seconds a missing log is waited for after the launch before it counts as a failure.
LOG_GRACE_S = 60.0
THROUGHPUT_KEYS = (
    "tokens_per_sec_per_gpu",
    "tokens_per_gpu",
    "tokens_per_sec",
    "tflops_per_sec_per_gpu",
    "throughput_per_gpu",
)

ARGUMENT_SPEC: dict[str, Any] = {
    "plan": {"type": "dict"},
    "run_dir": {"type": "path", "required": True},
    "hang_timeout": {"type": "float", "default": 600.0},
    "startup_timeout": {"type": "float", "default": 1800.0},
    "deadline": {"type": "float", "default": 14400.0},
    "started_at": {"type": "float"},
    "max_steps": {"type": "int", "default": 2000},
    "patterns": {"type": "list", "elements": "dict", "default": []},
}


# ---------------------------------------------------------------- state files

def state_path(run_dir: str, host: str) -> str:
    return os.path.join(run_dir, "watch", f"{host}.json")


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def write_json_atomically(path: str, data: dict[str, Any]) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, allow_nan=True)
    os.replace(tmp, path)


def claim_abort(run_dir: str, host: str, reason: str, msg: str, secondary: bool) -> dict[str, Any]:
    """Write abort.json unless another node already did; a root cause replaces a mere symptom."""
    path = os.path.join(run_dir, ABORT_FILE)
    record = {"host": host, "reason": reason, "msg": msg, "secondary": secondary, "time": time.time()}
    os.makedirs(run_dir, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        existing = read_json(path) or {}
        if existing.get("secondary") and not secondary:
            write_json_atomically(path, record)
            return record
        return existing or record
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return record


def new_state(host: str, started_at: float) -> dict[str, Any]:
    return {
        "host": host,
        "started_at": started_at,
        "last_progress_at": started_at,
        "offset": 0,
        "lineno": 0,
        "polls": 0,
        "framework": None,
        "simulated": False,
        "steps": [],
        "errors": [],
        "last_step": None,
        "completed": False,
        "exit_code": None,
        "summary": {},
        "done": False,
        "failed": False,
        "reason": None,
        "msg": "",
    }


# ---------------------------------------------------------------- merging

def is_finite_number(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def merge_poll(state: dict[str, Any], poll: dict[str, Any], now: float) -> None:
    """Fold one training_log result into the accumulated state."""
    last = state["last_step"]
    new_steps = [s for s in poll.get("steps") or [] if last is None or s.get("step", -1) > last]
    if new_steps:
        state["steps"].extend(new_steps)
        state["last_step"] = new_steps[-1].get("step", last)
        state["last_progress_at"] = now
    state["errors"].extend(poll.get("errors") or [])
    state["offset"] = poll.get("offset", state["offset"])
    state["lineno"] = poll.get("lineno", state["lineno"])
    state["completed"] = bool(state["completed"] or poll.get("completed"))
    state["exit_code"] = poll.get("exit_code", state["exit_code"])
    state["framework"] = poll.get("framework") or state["framework"]
    state["simulated"] = bool(state["simulated"] or poll.get("simulated"))
    if poll.get("summary"):
        state["summary"] = poll["summary"]
    state["polls"] += 1


def log_not_there_yet(poll: dict[str, Any], state: dict[str, Any], args: dict[str, Any], now: float) -> bool:
    """The launch is detached: the log may appear a moment after the first poll."""
    missing = "No such file" in to_text(poll.get("msg", ""))
    waited = now - state["started_at"]
    return missing and state["polls"] == 0 and waited < LOG_GRACE_S


def first_nonfinite_step(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    for step in steps:
        if step.get("nonfinite") or not all(is_finite_number(v) for v in step.values()):
            return step
    return None


def root_error(errors: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e for e in errors if e.get("class") not in SECONDARY_CLASSES), errors[0])


def is_secondary(state: dict[str, Any]) -> bool:
    """A failure seen only as a lost peer: another node may hold the root cause."""
    return state["reason"] == "error" and bool(state["errors"]) and root_error(state["errors"]).get("class") in SECONDARY_CLASSES


def describe_error(host: str, error: dict[str, Any]) -> str:
    line = error.get("lineno") or error.get("line")
    text = to_text(error.get("text", "")).strip()
    return f"{host}: {error.get('class', 'error')} failure in the training log (line {line}): {text}"


# ---------------------------------------------------------------- decision

def decide(state: dict[str, Any], node: dict[str, Any], final_step: int, limits: dict[str, float],
           printer_state: dict[str, Any] | None, now: float) -> tuple[bool, bool, str, str]:
    """Return (done, failed, reason, msg) for one node after a poll."""
    host = state["host"]
    prints_steps = bool(node.get("prints_steps", True))
    if state["errors"]:
        return True, True, "error", describe_error(host, root_error(state["errors"]))
    bad = first_nonfinite_step(state["steps"])
    if bad is not None:
        return True, True, "error", f"{host}: nan failure: non-finite value at step {bad.get('step')} ({bad})"
    if state["completed"] or (state["last_step"] is not None and state["last_step"] >= final_step):
        return True, False, "completed", f"{host}: reached the final step {final_step}"
    exit_code = state["exit_code"]
    if exit_code is not None:
        if int(exit_code) != 0:
            return True, True, "exit", f"{host}: the training process exited with status {exit_code} at step {state['last_step']}"
        if not prints_steps:
            return True, False, "exit", f"{host}: the training process exited with status 0"
        return True, True, "exit", (f"{host}: the training process exited with status 0 before the final step "
                                    f"{final_step} (last step {state['last_step']})")
    if not prints_steps and printer_state and printer_state.get("completed"):
        return True, False, "completed", f"{host}: the job's printing node {printer_state.get('host')} completed"
    if now - state["started_at"] > limits["deadline"]:
        return True, True, "deadline", (f"{host}: the overall deadline of {limits['deadline']:.0f} s passed "
                                        f"at step {state['last_step']} of {final_step}")
    if prints_steps:
        quiet_for = now - state["last_progress_at"]
        allowed = limits["hang_timeout"] if state["last_step"] is not None else max(limits["hang_timeout"], limits["startup_timeout"])
        if quiet_for > allowed:
            where = f"after step {state['last_step']}" if state["last_step"] is not None else "before the first step"
            return True, True, "hang", f"{host}: hang: no new step for {quiet_for:.0f} s {where} (timeout {allowed:.0f} s)"
    return False, False, "running", ""


def progress_of(state: dict[str, Any], final_step: int, now: float) -> dict[str, Any]:
    steps = state["steps"]
    last = steps[-1] if steps else {}
    throughput = next((last[k] for k in THROUGHPUT_KEYS if isinstance(last.get(k), (int, float))), None)
    eta = None
    elapsed = state["last_progress_at"] - state["started_at"]
    if len(steps) >= 2 and state["last_step"] is not None and elapsed > 0:
        per_step = elapsed / max(1, state["last_step"] - steps[0].get("step", 0) + 1)
        eta = round(max(0.0, (final_step - state["last_step"]) * per_step), 1)
    return {
        "step": state["last_step"],
        "final_step": final_step,
        "tokens_per_sec": throughput,
        "loss": last.get("loss"),
        "eta_s": eta,
        "elapsed_s": round(now - state["started_at"], 1),
    }


def printer_of(plan: dict[str, Any], node: dict[str, Any]) -> str | None:
    for job in plan.get("jobs", []):
        if job.get("name") == node.get("job"):
            for host in job.get("hosts", []):
                if plan["nodes"].get(host, {}).get("prints_steps", True):
                    return host
    return None


# ---------------------------------------------------------------- plugin

class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        plan = args["plan"] or task_vars.get("training_plan")
        host = task_vars.get("inventory_hostname", self._task.delegate_to or "")
        if not isinstance(plan, dict) or host not in plan.get("nodes", {}):
            result.update(failed=True, done=True, msg=f"{host}: no plan for this host (run clusterval.training.training_plan first)")
            return result
        return self._poll(result, plan, host, args, task_vars)

    def _poll(self, result: dict[str, Any], plan: dict[str, Any], host: str, args: dict[str, Any],
              task_vars: dict[str, Any]) -> dict[str, Any]:
        run_dir = args["run_dir"]
        node = plan["nodes"][host]
        final_step = int(plan["final_step"])
        now = time.time()
        path = state_path(run_dir, host)
        state = read_json(path) or new_state(host, args["started_at"] or now)
        result.update(host=host, state_path=path, changed=False)
        if state["done"]:
            return self._answer(result, state, final_step, now)

        abort = read_json(os.path.join(run_dir, ABORT_FILE))
        # Another node failed: one last look at this node's own log, which may hold the root cause.
        try:
            poll = self._execute_module(module_name=LOG_MODULE, module_args=self._log_args(plan, node, state, args),
                                        task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            msg = f"{host}: unreachable during the run: {to_text(exc)}"
            self._finish(state, path, True, "unreachable", msg)
            claim_abort(run_dir, host, "unreachable", msg, secondary=False)
            result.update(unreachable=True, done=True, reason="unreachable", msg=msg)
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

        if poll.get("unreachable"):
            msg = f"{host}: unreachable during the run: {poll.get('msg', '')}"
            self._finish(state, path, True, "unreachable", msg)
            claim_abort(run_dir, host, "unreachable", msg, secondary=False)
            result.update(unreachable=True, done=True, reason="unreachable", msg=msg)
            return result
        if poll.get("failed") and log_not_there_yet(poll, state, args, now):
            write_json_atomically(path, state)
            return self._answer(result, state, final_step, now)
        if poll.get("failed"):
            msg = f"{host}: reading the training log {node.get('log_path')} failed: {poll.get('msg', '')}"
            self._finish(state, path, True, "error", msg)
            claim_abort(run_dir, host, "error", msg, secondary=False)
            return self._answer(result, state, final_step, now)

        merge_poll(state, poll, now)
        printer = printer_of(plan, node)
        printer_state = read_json(state_path(run_dir, printer)) if printer and printer != host else None
        limits = {k: float(args[k]) for k in ("hang_timeout", "startup_timeout", "deadline")}
        done, failed, reason, msg = decide(state, node, final_step, limits, printer_state, now)
        if abort and abort.get("host") != host and not failed:
            return self._stop(result, state, path, final_step, now, abort)
        if done:
            self._finish(state, path, failed, reason, msg)
            if failed:
                claim_abort(run_dir, host, reason, msg, secondary=is_secondary(state))
        else:
            write_json_atomically(path, state)
        return self._answer(result, state, final_step, now)

    @staticmethod
    def _log_args(plan: dict[str, Any], node: dict[str, Any], state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        log_args: dict[str, Any] = {
            "path": node["log_path"],
            "framework": plan.get("framework", "auto"),
            "offset": state["offset"],
            "lineno": state["lineno"],
            "final_step": int(plan["final_step"]),
            "max_steps": args["max_steps"],
        }
        if node.get("exit_code_path"):
            log_args["exit_code_path"] = node["exit_code_path"]
        if args["patterns"]:
            log_args["patterns"] = args["patterns"]
        return log_args

    @staticmethod
    def _finish(state: dict[str, Any], path: str, failed: bool, reason: str, msg: str) -> None:
        state.update(done=True, failed=failed, reason=reason, msg=msg, finished_at=time.time())
        write_json_atomically(path, state)

    def _stop(self, result: dict[str, Any], state: dict[str, Any], path: str, final_step: int, now: float,
              abort: dict[str, Any]) -> dict[str, Any]:
        msg = f"{state['host']}: stopped because {abort.get('host')} failed: {abort.get('msg')}"
        state.update(stopped_by=abort.get("host"))
        self._finish(state, path, False, "aborted", msg)
        result["stopped_by"] = abort.get("host")
        return self._answer(result, state, final_step, now)

    @staticmethod
    def _answer(result: dict[str, Any], state: dict[str, Any], final_step: int, now: float) -> dict[str, Any]:
        result.update(
            done=bool(state["done"]),
            failed=bool(state["failed"]),
            reason=state["reason"] or "running",
            msg=state["msg"] or f"{state['host']}: step {state['last_step']} of {final_step}",
            progress=progress_of(state, final_step, now),
            errors=state["errors"][:5],
            simulated=state["simulated"],
        )
        if state.get("stopped_by"):
            result["stopped_by"] = state["stopped_by"]
        return result
