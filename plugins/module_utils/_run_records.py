# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The run's records and node state, and the rules both watch modes share.

A node's supervisor streams records (``t``: up, start, step, error, advisory, meta, beat, sample, exit,
unreadable; ``_run_node``); a direct look at a node (``_run_direct``) yields the same items. Either way
they become one node state (``new_state``), which the rules below turn into a ``Decision``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, show
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE


# Seconds a missing log is waited for after the launch before it counts as a failure.
LOG_GRACE_S = 60.0

MISSING_FILE = "No such file"

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

    @classmethod
    def failure(cls, reason: str, msg: str) -> "Decision":
        """The node is done, and failed."""
        return cls(done=True, failed=True, reason=reason, msg=msg)

    @classmethod
    def finished(cls, reason: str, msg: str) -> "Decision":
        """The node is done, and did not fail."""
        return cls(done=True, failed=False, reason=reason, msg=msg)


RUNNING = Decision(done=False, failed=False, reason="running", msg="")


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


def as_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


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


def failure_in_log(state: State) -> Optional[Decision]:
    host = state["host"]
    if state["errors"]:
        return Decision.failure("error", describe_error(host, root_error(state["errors"])))
    bad = first_nonfinite_step(state["steps"])
    if bad is not None:
        return Decision.failure("error", f"{host}: nan failure: non-finite value at step {bad.get('step')} ({bad})")
    return None


def completion(state: State, final_step: int) -> Optional[Decision]:
    if state["completed"] or (state["last_step"] is not None and state["last_step"] >= final_step):
        return Decision.finished("completed", f"{state['host']}: reached the final step {final_step}")
    return None


def exit_decision(state: State, final_step: int, prints_steps: bool) -> Optional[Decision]:
    """An exit before the final step fails a printing node: Megatron-LM exits 0 after some failures."""
    host, exit_code = state["host"], state["exit_code"]
    if exit_code is None:
        return None
    if int(exit_code) != 0:
        return Decision.failure("exit",
                                f"{host}: the training process exited with status {exit_code} at step {state['last_step']}")
    if not prints_steps:
        return Decision.finished("exit", f"{host}: the training process exited with status 0")
    return Decision.failure("exit", f"{host}: the training process exited with status 0 before the final step "
                                    f"{final_step} (last step {state['last_step']})")


def container_ended(state: State) -> Optional[Decision]:
    """The container is the job: ended without the launch script's exit status, it was killed or removed."""
    container = state.get("container") or {}
    if state["exit_code"] is not None or not container.get("ended"):
        return None
    name = container.get("name", "the training container")
    if container["status"] == "missing":
        how = "was removed"
    else:
        how = "exited with status %s%s" % (container.get("exit_code"),
                                           " (killed: out of memory)" if container.get("oom_killed") else "")
    return Decision.failure("exit", f"{state['host']}: the training container {name} {how} at step "
                                    f"{state['last_step']}, before the launch script recorded an exit status")


def printer_completion(state: State, prints_steps: bool,
                       printer_state: Optional[Mapping[str, Any]]) -> Optional[Decision]:
    if not prints_steps and printer_state and printer_state.get("completed"):
        return Decision.finished("completed",
                                 f"{state['host']}: the job's printing node {printer_state.get('host')} completed")
    return None


def deadline_passed(state: State, final_step: int, limits: Limits, now: float) -> Optional[Decision]:
    if now - state["started_at"] > limits.deadline:
        return Decision.failure("deadline", (f"{state['host']}: the overall deadline of {limits.deadline:.0f} s "
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
    return Decision.failure("hang",
                            f"{state['host']}: hang: no new step for {quiet_for:.0f} s {where} (timeout {allowed:.0f} s)")


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


PARSER_KEYS = ("warmup_steps", "seq_length", "world_size")


def parser_args(node: Mapping[str, Any]) -> Dict[str, Any]:
    """The log parser's arguments (training_log's, the supervisor's) from the node's ``log`` block, which its
    stack computed once in the plan (``_plan.node_log``): the run asks no stack question."""
    block = node.get("log")
    if not isinstance(block, Mapping) or not isinstance(block.get("format"), str):
        raise ConfigError("plan.nodes.%s.log" % node.get("host"),
                          "the node's log block (format, final_step, warmup_steps: a plan of this version)", show(block))
    args = {"framework": block["format"], "final_step": block.get("final_step")}
    args.update((key, block[key]) for key in PARSER_KEYS if block.get(key) is not None)
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


def new_cluster_state(host: str, started_at: float) -> State:
    state = new_state(host, started_at)
    state.update(advisories=[], last_record_at=started_at, supervisor=None, rank_started_at=None,
                 exit_reason=None, final_reached_at=None, failed_at=None, offset=0, lineno=0, stream_offset=0)
    return state


def apply_decision(state: State, decision: Decision, now: float) -> None:
    if decision.done and not state["done"]:
        state.update(done=True, failed=decision.failed, reason=decision.reason, msg=decision.msg, finished_at=now)
        if decision.failed:
            state["failed_at"] = now
