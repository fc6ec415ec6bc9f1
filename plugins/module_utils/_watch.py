# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The controller side of one poll of one node: merge, decide, record.

The action plugin clusterval.training.training_watch runs clusterval.training.training_log on the node and
hands its result here. Every node has a state file ``<run_dir>/watch/<host>.json`` holding what the polls
so far found (offset, steps, errors); a node that fails claims ``<run_dir>/abort.json`` so that every other
node stops at its next poll. The contract is in docs/architecture.md ("Controller-side watch").
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils import _atomic
from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDED
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, show
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE
from ansible_collections.clusterval.training.plugins.module_utils._plan import MEGATRON, node_view

WATCH_DIR = "watch"
ABORT_FILE = "abort.json"
# Seconds a missing log is waited for after the launch before it counts as a failure.
LOG_GRACE_S = 60.0
MISSING_FILE = "No such file"
DOCKER_SOCKET = "/var/run/docker.sock"

State = Dict[str, Any]


@dataclass(frozen=True)
class Limits:
    hang_timeout: float
    startup_timeout: float
    deadline: float


@dataclass(frozen=True)
class Decision:
    done: bool
    failed: bool
    reason: str
    msg: str


RUNNING = Decision(False, False, "running", "")


@dataclass(frozen=True)
class Watch:
    """What one poll of one node needs to know about the run."""
    run_dir: str
    host: str
    node: Mapping[str, Any]
    final_step: int
    limits: Limits
    printer: Optional[str]
    framework: str = "auto"
    docker_socket: str = DOCKER_SOCKET

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], host: str, run_dir: str, limits: Limits,
                  docker_socket: str = DOCKER_SOCKET) -> "Watch":
        node = node_view(plan, host)
        return cls(run_dir, host, node, final_step_of(plan), limits, printer_of(plan, node),
                   plan.get("framework", "auto"), docker_socket)

    @property
    def state_path(self) -> str:
        return state_path(self.run_dir, self.host)


# -- state files ----------------------------------------------------------------------------------

def state_path(watch_directory: str, host: str) -> str:
    """A node's state file in the run's watch directory (``watch_dir``)."""
    return os.path.join(watch_directory, f"{host}.json")


def abort_path(run_dir: str) -> str:
    return os.path.join(run_dir, ABORT_FILE)


read_json = _atomic.read_json


def write_json_atomically(path: str, data: Mapping[str, Any]) -> None:
    _atomic.write_json(path, data, makedirs=True)


def new_state(host: str, started_at: float) -> State:
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
        "container": None,
        "summary": {},
        "done": False,
        "failed": False,
        "reason": None,
        "msg": "",
    }


def load_state(run_dir: str, host: str, started_at: float) -> State:
    return read_json(state_path(run_dir, host)) or new_state(host, started_at)


def save_state(run_dir: str, state: State) -> None:
    write_json_atomically(state_path(run_dir, state["host"]), state)


def claim_abort(run_dir: str, host: str, reason: str, msg: str, secondary: bool) -> Dict[str, Any]:
    """Write abort.json unless another node already did; a root cause replaces a mere symptom."""
    path = abort_path(run_dir)
    record = {"host": host, "reason": reason, "msg": msg, "secondary": secondary, "time": time.time()}
    os.makedirs(run_dir, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return replace_symptom(path, record)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return record


def replace_symptom(path: str, record: Dict[str, Any]) -> Dict[str, Any]:
    existing = read_json(path) or {}
    if existing.get("secondary") and not record["secondary"]:
        write_json_atomically(path, record)
        return record
    return existing or record


# -- merging --------------------------------------------------------------------------------------

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


def as_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def log_not_there_yet(poll: Mapping[str, Any], state: State, now: float) -> bool:
    """The launch is detached: the log may appear a moment after the first poll."""
    missing = MISSING_FILE in as_text(poll.get("msg", ""))
    waited = now - state["started_at"]
    return missing and state["polls"] == 0 and waited < LOG_GRACE_S


# -- decision -------------------------------------------------------------------------------------

def is_finite_number(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def first_nonfinite_step(steps: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    for step in steps:
        if step.get("nonfinite") or not all(is_finite_number(v) for v in step.values()):
            return step
    return None


def root_error(errors: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The node's own cause: its first error that is not a consequence of another node's failure
    (``consequence``, set by the log parser from _failures.CONSEQUENCES)."""
    return next((e for e in errors if not e.get("consequence")), errors[0])


def is_secondary(state: State) -> bool:
    """A failure seen only as a lost peer: another node may hold the root cause."""
    return (state["reason"] == "error" and bool(state["errors"])
            and bool(root_error(state["errors"]).get("consequence")))


def describe_error(host: str, error: Mapping[str, Any]) -> str:
    line = error.get("lineno") or error.get("line")
    text = as_text(error.get("text", "")).strip()
    return f"{host}: {error.get('class', 'error')} failure in the training log (line {line}): {text}"


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


def failure_in_log(state: State) -> Optional[Decision]:
    host = state["host"]
    if state["errors"]:
        return Decision(True, True, "error", describe_error(host, root_error(state["errors"])))
    bad = first_nonfinite_step(state["steps"])
    if bad is not None:
        return Decision(True, True, "error", f"{host}: nan failure: non-finite value at step {bad.get('step')} ({bad})")
    return None


def completion(state: State, final_step: int) -> Optional[Decision]:
    if state["completed"] or (state["last_step"] is not None and state["last_step"] >= final_step):
        return Decision(True, False, "completed", f"{state['host']}: reached the final step {final_step}")
    return None


def exit_decision(state: State, final_step: int, prints_steps: bool) -> Optional[Decision]:
    """An exit before the final step fails a printing node: Megatron-LM exits 0 after some failures."""
    host, exit_code = state["host"], state["exit_code"]
    if exit_code is None:
        return None
    if int(exit_code) != 0:
        return Decision(True, True, "exit",
                        f"{host}: the training process exited with status {exit_code} at step {state['last_step']}")
    if not prints_steps:
        return Decision(True, False, "exit", f"{host}: the training process exited with status 0")
    return Decision(True, True, "exit", f"{host}: the training process exited with status 0 before the final step "
                                        f"{final_step} (last step {state['last_step']})")


def container_ended(state: State) -> Optional[Decision]:
    """The container is the job: ended without the launch script's exit status, it was killed or removed."""
    container = state.get("container") or {}
    if state["exit_code"] is not None or container.get("status") not in ENDED:
        return None
    name = container.get("name", "the training container")
    if container["status"] == "missing":
        how = "was removed"
    else:
        how = "exited with status %s%s" % (container.get("exit_code"),
                                           " (killed: out of memory)" if container.get("oom_killed") else "")
    return Decision(True, True, "exit", f"{state['host']}: the training container {name} {how} at step "
                                        f"{state['last_step']}, before the launch script recorded an exit status")


def printer_completion(state: State, prints_steps: bool,
                       printer_state: Optional[Mapping[str, Any]]) -> Optional[Decision]:
    if not prints_steps and printer_state and printer_state.get("completed"):
        return Decision(True, False, "completed",
                        f"{state['host']}: the job's printing node {printer_state.get('host')} completed")
    return None


def deadline_passed(state: State, final_step: int, limits: Limits, now: float) -> Optional[Decision]:
    if now - state["started_at"] > limits.deadline:
        return Decision(True, True, "deadline", (f"{state['host']}: the overall deadline of {limits.deadline:.0f} s "
                                                 f"passed at step {state['last_step']} of {final_step}"))
    return None


def hang(state: State, limits: Limits, prints_steps: bool, now: float) -> Optional[Decision]:
    """A node that prints steps and printed none for too long; before the first step, start-up time counts."""
    if not prints_steps:
        return None
    started = state["last_step"] is not None
    quiet_for = now - state["last_progress_at"]
    allowed = limits.hang_timeout if started else max(limits.hang_timeout, limits.startup_timeout)
    if quiet_for <= allowed:
        return None
    where = f"after step {state['last_step']}" if started else "before the first step"
    return Decision(True, True, "hang",
                    f"{state['host']}: hang: no new step for {quiet_for:.0f} s {where} (timeout {allowed:.0f} s)")


# -- progress -------------------------------------------------------------------------------------

def progress_of(state: State, final_step: int, now: float) -> Dict[str, Any]:
    steps = state["steps"]
    last = steps[-1] if steps else {}
    return {
        "step": state["last_step"],
        "final_step": final_step,
        "tokens_per_sec": throughput_of(last),
        "loss": last.get("loss"),
        "eta_s": eta_of(state, final_step),
        "elapsed_s": round(now - state["started_at"], 1),
    }


def throughput_of(step: Mapping[str, Any]) -> Optional[float]:
    return next((step[k] for k in THROUGHPUT_PREFERENCE if isinstance(step.get(k), (int, float))), None)


def eta_of(state: State, final_step: int) -> Optional[float]:
    """Seconds left at the pace of the steps seen so far (from the launch to the last new step)."""
    steps = state["steps"]
    elapsed = state["last_progress_at"] - state["started_at"]
    if len(steps) < 2 or state["last_step"] is None or elapsed <= 0:
        return None
    per_step = elapsed / max(1, state["last_step"] - steps[0].get("step", 0) + 1)
    return round(max(0.0, (final_step - state["last_step"]) * per_step), 1)


# -- the plan -------------------------------------------------------------------------------------

def final_step_of(plan: Mapping[str, Any]) -> int:
    value = plan.get("final_step")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError("plan.final_step", "an integer", show(value))
    try:
        return int(value)
    except (ValueError, OverflowError):
        raise ConfigError("plan.final_step", "an integer", show(value)) from None


def printer_of(plan: Mapping[str, Any], node: Mapping[str, Any]) -> Optional[str]:
    """The host of the node's job that prints steps (Megatron-LM: the job's last node)."""
    for job in plan.get("jobs", []):
        if job.get("name") == node.get("job"):
            for host in job.get("hosts", []):
                if plan["nodes"].get(host, {}).get("prints_steps", True):
                    return host
    return None


def log_args(watch: Watch, state: State, max_steps: int, patterns: List[Dict[str, Any]],
             advisories: Optional[List[str]] = None) -> Dict[str, Any]:
    """The arguments of clusterval.training.training_log for the next poll of this node."""
    node = watch.node
    args: Dict[str, Any] = {
        "path": node["log_path"],
        "framework": watch.framework,
        "offset": state["offset"],
        "lineno": state["lineno"],
        "final_step": watch.final_step,
        "max_steps": max_steps,
    }
    if node.get("exit_code_path"):
        args["exit_code_path"] = node["exit_code_path"]
    if node.get("container", {}).get("name"):
        args.update(container=node["container"]["name"], docker_socket=watch.docker_socket)
    if patterns:
        args["patterns"] = patterns
    if advisories:
        args["advisories"] = advisories
    if watch.framework == MEGATRON:
        args.update(megatron_sizes(node))
    return args


def megatron_sizes(node: Mapping[str, Any]) -> Dict[str, int]:
    """seq_length and world_size, so training_log computes tokens_per_gpu for every iteration."""
    sizes = {"seq_length": positive_int(launch_env(node).get("SEQ_LENGTH")),
             "world_size": world_size_of(node)}
    return {key: value for key, value in sizes.items() if value is not None}


def launch_env(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The environment the launch command runs with: the node's container env."""
    container = node.get("container")
    env = container.get("env") if isinstance(container, Mapping) else None
    return env if isinstance(env, Mapping) else {}


def world_size_of(node: Mapping[str, Any]) -> Optional[int]:
    nnodes, gpus = positive_int(node.get("nnodes")), positive_int(node.get("gpus"))
    return nnodes * gpus if nnodes and gpus else None


def positive_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


# -- one poll, recorded ---------------------------------------------------------------------------

def finish(run_dir: str, state: State, decision: Decision) -> None:
    state.update(done=True, failed=decision.failed, reason=decision.reason, msg=decision.msg,
                 finished_at=time.time())
    save_state(run_dir, state)


def fail(run_dir: str, state: State, decision: Decision, secondary: bool = False) -> None:
    finish(run_dir, state, decision)
    claim_abort(run_dir, state["host"], decision.reason, decision.msg, secondary)


def record_unreachable(run_dir: str, state: State, detail: str) -> str:
    msg = f"{state['host']}: unreachable during the run: {detail}"
    fail(run_dir, state, Decision(True, True, "unreachable", msg))
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
    fail(watch.run_dir, state, Decision(True, True, "error", msg))


def printer_state(watch: Watch) -> Optional[Dict[str, Any]]:
    if not watch.printer or watch.printer == watch.host:
        return None
    return read_json(state_path(watch.run_dir, watch.printer))


def stop_for_abort(run_dir: str, state: State, abort: Mapping[str, Any]) -> None:
    msg = f"{state['host']}: stopped because {abort.get('host')} failed: {abort.get('msg')}"
    state["stopped_by"] = abort.get("host")
    finish(run_dir, state, Decision(True, False, "aborted", msg))


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


# -- the cluster watch: every node's supervisor stream, one task per poll ---------------------------

# Keys of a stream record that are the stream's own, not the item's.
RECORD_KEYS = ("t",)
# Supervisor stop reasons and how the node state names them.
SUPERVISOR_STOPS = {"lease": "aborted", "stopped": "aborted", "signal": "aborted", "deadline": "deadline",
                    "gang": "error", "launch": "exit"}


@dataclass(frozen=True)
class ClusterLimits:
    """Bounds of the cluster watch beyond Limits (seconds, by the controller's clock)."""
    stale_timeout: float
    exit_grace: float
    settle: float
    first_record_grace: float = LOG_GRACE_S


def watch_dir(run_dir: str, run_id: str) -> str:
    """Contract 2: a run's node states and abort file, never shared with another run of the same run dir."""
    return os.path.join(run_dir, WATCH_DIR, run_id)


def new_cluster_state(host: str, started_at: float) -> State:
    state = new_state(host, started_at)
    state.update(advisories=[], last_record_at=started_at, supervisor=None, rank_started_at=None,
                 exit_reason=None, final_reached_at=None, failed_at=None, offset=0, lineno=0, stream_offset=0)
    return state


def item_of(record: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in record.items() if k not in RECORD_KEYS}


def fold_record(state: State, record: Mapping[str, Any], now: float) -> None:
    """One supervisor record into the node state (contract 1); unknown keys of items are kept."""
    kind = record.get("t")
    if kind in ("up", "restarted") and state["supervisor"] is not None:
        forget_earlier_supervisor(state)
    if kind == "step":
        step = item_of(record)
        state["steps"].append(step)
        state["last_step"] = step.get("step", state["last_step"])
        state["last_progress_at"] = now
    elif kind in ("error", "advisory"):
        item = item_of(record)
        if item.get("first_seen") is None:
            item["first_seen"] = now
        state["errors" if kind == "error" else "advisories"].append(item)
    elif kind == "unreadable":
        state["errors"].append({"class": "log", "text": "reading the training log failed: %s" % record.get("msg"),
                                "line": None, "lineno": None, "pattern": None, "time": record.get("time"),
                                "first_seen": now, "step": state["last_step"], "consequence": False})
    elif kind == "meta":
        fold_meta(state, record)
    elif kind == "start":
        state["rank_started_at"] = record.get("time")
        state["supervisor"] = "running"
    elif kind == "up":
        state["supervisor"] = state["supervisor"] or "up"
    elif kind == "exit":
        state["exit_code"] = record.get("exit_code")
        state["exit_reason"] = record.get("reason")
        state["supervisor"] = "ended"


def forget_earlier_supervisor(state: State) -> None:
    """A new supervisor started this node's stream anew (a new container of the run id): what an earlier
    one wrote says nothing about this job."""
    fresh = new_cluster_state(state["host"], state["started_at"])
    fresh.update(stream_offset=state["stream_offset"], polls=state["polls"])
    state.clear()
    state.update(fresh)


def fold_meta(state: State, record: Mapping[str, Any]) -> None:
    state["framework"] = record.get("framework") or state["framework"]
    state["simulated"] = bool(state["simulated"] or record.get("simulated"))
    state["completed"] = bool(state["completed"] or record.get("completed"))
    if record.get("summary"):
        state["summary"] = record["summary"]


def fold_stream(state: State, read: Mapping[str, Any], now: float) -> None:
    """What one read of a node's stream brought: its records, in order, and the new offset."""
    records = read.get("records") or []
    for record in records:
        fold_record(state, record, now)
    if records:
        state["last_record_at"] = now
    state["stream_offset"] = read.get("offset", state["stream_offset"])
    state["polls"] += 1


def decide_cluster_node(state: State, node: Mapping[str, Any], final_step: int, limits: Limits,
                        cluster: ClusterLimits, printer: Optional[Mapping[str, Any]], now: float) -> Decision:
    """Whether one node is done, from its supervisor's records: every rank's end is required."""
    prints_steps = bool(node.get("prints_steps", True))
    if state["final_reached_at"] is None:
        state["final_reached_at"] = final_reached_at(state, final_step)
    return (failure_in_log(state)
            or supervisor_stop(state)
            or ended(state, final_step, prints_steps)
            or not_exiting(state, final_step, prints_steps, printer, cluster, now)
            or deadline_passed(state, final_step, limits, now)
            or hang(state, limits, prints_steps, now)
            or stale(state, cluster, now)
            or RUNNING)


def supervisor_stop(state: State) -> Optional[Decision]:
    reason = state.get("exit_reason")
    if reason in (None, "exit"):
        return None
    words = {"lease": "its lease was not renewed in time", "stopped": "the controller asked it to stop",
             "signal": "it was signalled (container stopped)", "deadline": "the run's deadline passed",
             "gang": "the gang start never came", "launch": "the launch command could not start"}
    return Decision(True, True, SUPERVISOR_STOPS.get(reason, "exit"),
                    f"{state['host']}: the node's supervisor stopped the job at step {state['last_step']}: "
                    f"{words.get(reason, reason)}")


def ended(state: State, final_step: int, prints_steps: bool) -> Optional[Decision]:
    """The process exited: non-zero fails; zero is a completion for a node that reached the final step."""
    if state["exit_code"] is None:
        return None
    if int(state["exit_code"]) == 0 and prints_steps and state["final_reached_at"] is not None:
        return Decision(True, False, "completed", f"{state['host']}: reached the final step {final_step} and exited 0")
    if int(state["exit_code"]) == 0 and not prints_steps:
        return Decision(True, False, "completed", f"{state['host']}: the training process exited with status 0")
    return exit_decision(state, final_step, prints_steps)


def final_reached_at(state: Mapping[str, Any], final_step: int) -> Optional[float]:
    """When the node printed its final step (the poll that saw it), else None."""
    if state.get("final_reached_at") is not None:
        return state["final_reached_at"]
    reached = state["completed"] or (state["last_step"] is not None and state["last_step"] >= final_step)
    return state["last_progress_at"] if reached else None


def not_exiting(state: State, final_step: int, prints_steps: bool, printer: Optional[Mapping[str, Any]],
                cluster: ClusterLimits, now: float) -> Optional[Decision]:
    """A rank whose job is over (its final step printed, or its printing node's) must also exit."""
    if prints_steps:
        over_since = state["final_reached_at"]
    else:
        over_since = final_reached_at(printer, final_step) if printer else None
    if over_since is None or now - over_since <= cluster.exit_grace:
        return None
    why = "after its final step" if prints_steps else f"after the job's printing node {printer.get('host')} completed"
    return Decision(True, True, "hang", f"{state['host']}: hang: the training process did not exit "
                                        f"{cluster.exit_grace:.0f} s {why} (rank {state.get('node_rank', '?')})")


def stale(state: State, cluster: ClusterLimits, now: float) -> Optional[Decision]:
    """No record from the node's supervisor for too long: the node, its container or the shared FS is gone."""
    allowed = cluster.stale_timeout if state["polls"] and state["supervisor"] else cluster.first_record_grace
    quiet = now - state["last_record_at"]
    if quiet <= allowed:
        return None
    return Decision(True, True, "unreachable", f"{state['host']}: no status from the node's supervisor for "
                                               f"{quiet:.0f} s (timeout {allowed:.0f} s) at step {state['last_step']}")


def is_consequence(state: State) -> bool:
    """A failure seen only through its effect on this node (a peer died, a watchdog, the agent's SIGTERM)."""
    errors = state["errors"]
    return (state["reason"] == "error" and bool(errors)
            and all(e.get("consequence") for e in errors))


def first_failure(states: Mapping[str, State]) -> Optional[State]:
    """The failed node that most likely holds the cause: a primary failure before a consequence, then the earliest."""
    failed = [s for s in states.values() if s["failed"]]
    if not failed:
        return None
    return min(failed, key=lambda s: (is_consequence(s), s.get("failed_at") or 0.0))


def settle_cluster(states: Mapping[str, State], cluster: ClusterLimits, now: float) -> bool:
    """After the first failure, the other nodes get ``settle`` seconds to report their own cause; while the only
    failures are consequences (a peer died), or a node went quiet meanwhile (killed, cut off: it may be the
    cause), they get the stale timeout on top."""
    first = min((s.get("failed_at") or now for s in states.values() if s["failed"]), default=None)
    if first is None or now - first < cluster.settle:
        return False
    culprit = first_failure(states)
    if culprit is not None and is_consequence(culprit):
        return now - first >= cluster.settle + cluster.stale_timeout
    pending_quiet = any(now - s["last_record_at"] > cluster.settle for s in states.values() if not s["done"])
    return not pending_quiet or now - first >= cluster.settle + cluster.stale_timeout


def abort_the_rest(states: Mapping[str, State], culprit: State, now: float) -> None:
    for state in states.values():
        if not state["done"]:
            state.update(done=True, failed=False, reason="aborted", stopped_by=culprit["host"], finished_at=now,
                         msg=f"{state['host']}: stopped because {culprit['host']} failed: {culprit['msg']}")


def apply_decision(state: State, decision: Decision, now: float) -> None:
    if decision.done and not state["done"]:
        state.update(done=True, failed=decision.failed, reason=decision.reason, msg=decision.msg, finished_at=now)
        if decision.failed:
            state["failed_at"] = now


def rate_metric_of(states: Mapping[str, State]) -> Optional[str]:
    for state in states.values():
        if state["steps"]:
            last = state["steps"][-1]
            for key in THROUGHPUT_PREFERENCE:
                if isinstance(last.get(key), (int, float)):
                    return key
    return None


def median_of(values: List[float]) -> Optional[float]:
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def cluster_progress(states: Mapping[str, State], final_step: int, started_at: float, now: float,
                     slowest_max: int = 5) -> Dict[str, Any]:
    """Contract 6 ``progress``: counts, step spread, median rate, ETA and the slowest nodes."""
    steps = [s["last_step"] for s in states.values() if s["last_step"] is not None]
    metric = rate_metric_of(states)
    rates = [s["steps"][-1][metric] for s in states.values()
             if metric and s["steps"] and isinstance(s["steps"][-1].get(metric), (int, float))]
    etas = [e for e in (eta_of(s, final_step) for s in states.values() if not s["done"]) if e is not None]
    ranked = sorted(states.values(), key=lambda s: (-1 if s["last_step"] is None else s["last_step"], s["host"]))
    return {
        "nodes": len(states),
        "done": sum(1 for s in states.values() if s["done"]),
        "failed": sum(1 for s in states.values() if s["failed"]),
        "final_step": final_step,
        "step": {"min": min(steps) if steps else None, "median": median_of(steps), "max": max(steps) if steps else None},
        "rate": {"median": median_of(rates)},
        "rate_metric": metric,
        "eta_s": max(etas) if etas else None,
        "elapsed_s": round(now - started_at, 1),
        "slowest": [{"host": s["host"], "step": s["last_step"]} for s in ranked[:slowest_max]
                    if not s["done"] and steps and (s["last_step"] is None or s["last_step"] < max(steps))],
    }


def cluster_failures(states: Mapping[str, State]) -> List[Dict[str, Any]]:
    """Contract 6 ``failures``: one line per failed node, the earliest first."""
    failed = sorted((s for s in states.values() if s["failed"]), key=lambda s: s.get("failed_at") or 0.0)
    lines = []
    for state in failed:
        error = root_error(state["errors"]) if state["errors"] else {}
        lines.append({"host": state["host"], "class": error.get("class") or state["reason"],
                      "step": error.get("step", state["last_step"]), "text": error.get("text") or state["msg"],
                      "time": error.get("time") or state.get("failed_at")})
    return lines


def rank_start_spread(states: Mapping[str, State]) -> Optional[float]:
    """Seconds between the first and the last rank's start (each node's clock)."""
    starts = [s["rank_started_at"] for s in states.values() if isinstance(s.get("rank_started_at"), (int, float))]
    return round(max(starts) - min(starts), 3) if len(starts) > 1 else (0.0 if starts else None)


def cluster_answer(states: Mapping[str, State], final_step: int, started_at: float, now: float,
                   suspects: List[str]) -> Dict[str, Any]:
    """The contract-6 result of one poll."""
    done = all(s["done"] for s in states.values())
    culprit = first_failure(states)
    if culprit is not None:
        msg = culprit["msg"]
        others = sum(1 for s in states.values() if s["failed"]) - 1
        if others > 0:
            msg += f" ({others} other node{'s' if others > 1 else ''} failed too)"
    else:
        msg = "every node completed" if done else ""
    return {
        "done": done,
        "failed": culprit is not None,
        "reason": (culprit["reason"] if culprit else ("completed" if done else "running")),
        "msg": msg,
        "progress": cluster_progress(states, final_step, started_at, now),
        "failures": cluster_failures(states),
        "suspects": suspects,
        "rank_start_spread_s": rank_start_spread(states),
        "simulated": any(s["simulated"] for s in states.values()),
    }


def save_cluster_states(directory: str, states: Mapping[str, State]) -> None:
    """Contract 2 and 6: one node-state file per node under ``<run_dir>/watch/<run_id>/``, and abort.json
    naming the node that most likely holds the cause."""
    for state in states.values():
        write_json_atomically(state_path(directory, state["host"]), state)
    culprit = first_failure(states)
    if culprit is not None:
        write_json_atomically(abort_path(directory), {"host": culprit["host"], "reason": culprit["reason"],
                                                      "msg": culprit["msg"], "secondary": is_consequence(culprit),
                                                      "time": culprit.get("failed_at")})


PROGRESS_FILE = "progress.json"


def save_progress(directory: str, answer: Mapping[str, Any]) -> None:
    """The latest poll's cluster result (small at any node count), for people and tools following the run."""
    write_json_atomically(os.path.join(directory, PROGRESS_FILE), answer)
