# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A direct look at one node (the per-node watch, and the look at a suspect): clusterval.training.training_log's
result merged into the same node state as the supervisor's records, decided by the same rules.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils import _atomic
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.module_utils._run_records import (
    LOG_GRACE_S, MISSING_FILE, RUNNING, Decision, Limits, State, as_text, completion, container_ended,
    deadline_passed, exit_decision, failure_in_log, final_step_of, hang, is_secondary, new_state, parser_args,
    printer_completion, printer_of, progress_of)
from ansible_collections.clusterval.training.plugins.module_utils._run_watch import (
    DIRECT_DIR, abort_path, read_json, state_path, write_json_atomically)


@dataclass(frozen=True)
class Watch:
    """What one poll of one node needs to know about the run."""
    run_dir: str
    host: str
    node: Mapping[str, Any]
    final_step: int
    limits: Limits
    printer: Optional[str]
    # The node's container engine (training_log's docker_host); empty: its default.
    docker_host: str = ""

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], host: str, run_dir: str, limits: Limits,
                  docker_host: str = "") -> "Watch":
        node = node_view(plan, host)
        return cls(run_dir, host, node, final_step_of(plan), limits, printer_of(plan, node), docker_host)

    @property
    def state_path(self) -> str:
        return state_path(self.run_dir, self.host)


def load_state(run_dir: str, host: str, started_at: float) -> State:
    return read_json(state_path(run_dir, host)) or new_state(host, started_at)


def save_state(run_dir: str, state: State) -> None:
    write_json_atomically(state_path(run_dir, state["host"]), state)


def claim_abort(run_dir: str, host: str, reason: str, msg: str, secondary: bool) -> Dict[str, Any]:
    """Write abort.json unless another node already did; a root cause replaces a mere symptom."""
    path = abort_path(run_dir)
    record = {"host": host, "reason": reason, "msg": msg, "secondary": secondary, "time": time.time()}
    os.makedirs(run_dir, exist_ok=True)
    if _atomic.write_json(path, record, replace=False):
        return record
    return replace_symptom(path, record)


def replace_symptom(path: str, record: Dict[str, Any]) -> Dict[str, Any]:
    existing = read_json(path) or {}
    if existing.get("secondary") and not record["secondary"]:
        write_json_atomically(path, record)
        return record
    return existing or record


def merge_poll(state: State, poll: Mapping[str, Any], now: float) -> None:
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
    state["container"] = poll.get("container") or state.get("container")
    state["framework"] = poll.get("framework") or state["framework"]
    state["simulated"] = bool(state["simulated"] or poll.get("simulated"))
    if poll.get("summary"):
        state["summary"] = poll["summary"]
    state["polls"] += 1


def log_not_there_yet(poll: Mapping[str, Any], state: State, now: float) -> bool:
    """The launch is detached: the log may appear a moment after the first poll."""
    missing = MISSING_FILE in as_text(poll.get("msg", ""))
    waited = now - state["started_at"]
    return missing and state["polls"] == 0 and waited < LOG_GRACE_S


def decide(state: State, node: Mapping[str, Any], final_step: int, limits: Limits,
           printer_state: Optional[Mapping[str, Any]], now: float) -> Decision:
    """Whether one node is done after a poll, and why; the first rule that applies wins."""
    prints_steps = bool(node.get("prints_steps", True))
    return (failure_in_log(state)
            or completion(state, final_step)
            or exit_decision(state, final_step, prints_steps)
            or container_ended(state)
            or printer_completion(state, prints_steps, printer_state)
            or deadline_passed(state, final_step, limits, now)
            or hang(state, limits, prints_steps, now)
            or RUNNING)


def log_args(watch: Watch, state: State, max_steps: int, patterns: List[Dict[str, Any]],
             advisories: Optional[List[str]] = None) -> Dict[str, Any]:
    """The arguments of clusterval.training.training_log for the next poll of this node."""
    node = watch.node
    args: Dict[str, Any] = {
        "path": node["log_path"],
        **parser_args(node),
        "offset": state["offset"],
        "lineno": state["lineno"],
        "final_step": watch.final_step,
        "max_steps": max_steps,
    }
    if node.get("exit_code_path"):
        args["exit_code_path"] = node["exit_code_path"]
    if node.get("container", {}).get("name"):
        args["container"] = node["container"]["name"]
        if watch.docker_host:
            args["docker_host"] = watch.docker_host
    if patterns:
        args["patterns"] = patterns
    if advisories:
        args["advisories"] = advisories
    return args


def finish(run_dir: str, state: State, decision: Decision) -> None:
    state.update(done=True, failed=decision.failed, reason=decision.reason, msg=decision.msg,
                 finished_at=time.time())
    save_state(run_dir, state)


def fail(run_dir: str, state: State, decision: Decision, secondary: bool = False) -> None:
    finish(run_dir, state, decision)
    claim_abort(run_dir, state["host"], decision.reason, decision.msg, secondary)


def record_unreachable(run_dir: str, state: State, detail: str) -> str:
    msg = f"{state['host']}: unreachable during the run: {detail}"
    fail(run_dir, state, Decision.failure("unreachable", msg))
    return msg


def record_poll(watch: Watch, state: State, poll: Mapping[str, Any], abort: Optional[Mapping[str, Any]],
                now: float) -> None:
    """Fold a training_log result into the state and record the outcome.

    `abort` is abort.json as read before the poll: another node's failure stops this node unless this
    node's own log, read one last time, shows a failure too (it may hold the root cause).
    """
    if poll.get("failed"):
        record_unreadable_log(watch, state, poll, now)
        return
    merge_poll(state, poll, now)
    decision = decide(state, watch.node, watch.final_step, watch.limits, printer_state(watch), now)
    if abort and abort.get("host") != watch.host and not decision.failed:
        stop_for_abort(watch.run_dir, state, abort)
    elif decision.failed:
        finish(watch.run_dir, state, decision)
        claim_abort(watch.run_dir, watch.host, decision.reason, decision.msg, secondary=is_secondary(state))
    elif decision.done:
        finish(watch.run_dir, state, decision)
    else:
        save_state(watch.run_dir, state)


def record_unreadable_log(watch: Watch, state: State, poll: Mapping[str, Any], now: float) -> None:
    if log_not_there_yet(poll, state, now):
        save_state(watch.run_dir, state)
        return
    msg = f"{watch.host}: reading the training log {watch.node.get('log_path')} failed: {poll.get('msg', '')}"
    fail(watch.run_dir, state, Decision.failure("error", msg))


def printer_state(watch: Watch) -> Optional[Dict[str, Any]]:
    if not watch.printer or watch.printer == watch.host:
        return None
    return read_json(state_path(watch.run_dir, watch.printer))


def stop_for_abort(run_dir: str, state: State, abort: Mapping[str, Any]) -> None:
    msg = f"{state['host']}: stopped because {abort.get('host')} failed: {abort.get('msg')}"
    state["stopped_by"] = abort.get("host")
    finish(run_dir, state, Decision.finished("aborted", msg))


def answer(state: State, final_step: int, now: float) -> Dict[str, Any]:
    """The fields of the task result for this poll."""
    result = {
        "done": bool(state["done"]),
        "failed": bool(state["failed"]),
        "reason": state["reason"] or "running",
        "msg": state["msg"] or f"{state['host']}: step {state['last_step']} of {final_step}",
        "progress": progress_of(state, final_step, now),
        "errors": state["errors"][:5],
        "simulated": state["simulated"],
    }
    if state.get("stopped_by"):
        result["stopped_by"] = state["stopped_by"]
    return result


def save_look(directory: str, host: str, look: Mapping[str, Any]) -> None:
    """What a direct look at a silent node found, for the watch's conclusion (``_run_watch.conclude``)."""
    write_json_atomically(os.path.join(directory, DIRECT_DIR, "%s.json" % host), dict(look))


def look(watch: Watch, state: State, poll: Mapping[str, Any], now: float) -> Dict[str, Any]:
    """One look at a node whose status stopped coming: can the controller reach it, and what do its log, exit
    file and container say."""
    if poll.get("unreachable"):
        return {"unreachable": True, "failed": True, "reason": "unreachable",
                "msg": f"{watch.host}: unreachable over SSH: {as_text(poll.get('msg', '')).strip()}"}
    if poll.get("failed"):
        return {"failed": True, "reason": "error",
                "msg": f"{watch.host}: reading the training log failed: {as_text(poll.get('msg', ''))}"}
    merge_poll(state, poll, now)
    decision = decide(state, watch.node, watch.final_step, watch.limits, None, now)
    return {"failed": decision.failed, "reason": decision.reason,
            "msg": decision.msg or f"{watch.host}: reachable, its job still running at step {state['last_step']}",
            "errors": state["errors"][:20], "exit_code": state["exit_code"], "container": state["container"]}


def look_that_never_answered(look: Any) -> bool:
    """A direct look's task result that ended before the look could say anything: the connection failed or the
    task's timeout struck (a node whose sshd is frozen or whose link is down)."""
    if not isinstance(look, Mapping) or look.get("skipped") or "reason" in look:
        return False
    return bool(look.get("unreachable") or look.get("failed"))


def unanswered(host: str, look: Mapping[str, Any]) -> Dict[str, Any]:
    timedout = look.get("timedout")
    if isinstance(timedout, Mapping) and timedout.get("period"):
        return {"unreachable": True, "failed": True, "reason": "unreachable",
                "msg": f"{host}: no answer over SSH within {timedout['period']} s (the look's timeout)"}
    detail = as_text(look.get("msg") or "no answer").strip().splitlines()
    return {"unreachable": True, "failed": True, "reason": "unreachable",
            "msg": f"{host}: unreachable over SSH: {detail[0] if detail else 'no answer'}"}
