# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one procedure of the run watch.

Each poll of the cluster watch loads what the previous poll saved (``<run_dir>/watch/<run_id>/run.json``),
folds every node's new records into its state, decides each node, settles and aborts the rest, and saves it
all again with the progress; at the end of the run ``conclude`` adds what direct looks at silent nodes found
and writes the one decision of the culprit (``outcome.json``), which the verdict and every report use.
A node's steps go to ``steps/<host>.jsonl`` as they come, so a poll's cost does not grow with the run's length.
"""
from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _launch_slurm, _room
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.module_utils._run_fold import (
    ANALYSIS_KEYS, abort_the_rest, analyse, cluster_answer, decide_cluster_node, first_failure, fold_stream, settle_cluster)
from ansible_collections.clusterval.training.plugins.module_utils._run_records import (
    ClusterLimits, Decision, Limits, State, apply_decision, new_cluster_state, printer_of)

WATCH_DIR = "watch"
ABORT_FILE = "abort.json"
PROGRESS_FILE = "progress.json"
RUN_FILE = "run.json"
# Events after which no node reports again: every node still running is stopped with the run's cause.
ABORTING_EVENTS = ("removed", "takeover", "pending", "login")
OUTCOME_FILE = "outcome.json"
STEPS_DIR = "steps"
DIRECT_DIR = "direct"

read_json = _atomic.read_json


def state_path(watch_directory: str, host: str) -> str:
    """A node's state file in the run's watch directory (``watch_dir``)."""
    return os.path.join(watch_directory, f"{host}.json")


def abort_path(run_dir: str) -> str:
    return os.path.join(run_dir, ABORT_FILE)


def write_json_atomically(path: str, data: Any) -> None:
    _atomic.write_json(path, data, makedirs=True)


def watch_dir(run_dir: str, run_id: str) -> str:
    """Contract 2: a run's node states and abort file, never shared with another run of the same run dir."""
    return os.path.join(run_dir, WATCH_DIR, run_id)


class ClusterWatch:
    """One run's cluster watch: its saved memory and one poll."""

    def __init__(self, plan: Mapping[str, Any], hosts: List[str], directory: str, limits: Limits,
                 cluster: ClusterLimits, lease_timeout: Optional[float], memory: Dict[str, Any],
                 pending_limit: Optional[float] = None) -> None:
        self.plan = plan
        self.hosts = hosts
        self.directory = directory
        self.limits = limits
        self.cluster = cluster
        self.lease_timeout = lease_timeout
        self.memory = memory
        self.pending_limit = pending_limit
        self.states: Dict[str, State] = memory["states"]
        self.final_step = int(plan["final_step"])

    @classmethod
    def load(cls, plan: Mapping[str, Any], hosts: List[str], run_dir: str, limits: Limits, cluster: ClusterLimits,
             lease_timeout: Optional[float], controller: int, now: float,
             pending_limit: Optional[float] = None) -> "ClusterWatch":
        directory = watch_dir(run_dir, str(plan.get("run_id") or "run"))
        memory = read_json(os.path.join(directory, RUN_FILE))
        if not isinstance(memory, dict) or memory.get("controller") != controller:
            memory = {"started_at": now, "renewal": 0, "controller": controller, "last_poll_at": None,
                      "limits": {"deadline": limits.deadline, "final_step": int(plan["final_step"])}, "events": [],
                      "states": {h: fresh_state(plan, h, now) for h in hosts}}
        return cls(plan, hosts, directory, limits, cluster, lease_timeout, memory, pending_limit)

    def watched(self) -> List[str]:
        return [h for h, s in self.states.items() if not s["done"]]

    def offsets(self) -> Dict[str, int]:
        return {h: s["stream_offset"] for h, s in self.states.items() if not s["done"]}

    def next_lease(self, now: float) -> Dict[str, Any]:
        """The lease content of this poll: a new renewal number opens the gang start and keeps every job alive."""
        self.memory["renewal"] += 1
        return {"renewal": self.memory["renewal"], "go": True, "time": now}

    def poll(self, read: Mapping[str, Any], reader: str, now: float) -> Dict[str, Any]:
        """Fold one read of every stream (``training_status``'s result), decide, save; the poll's answer."""
        self.note_absence(now)
        if read.get("missing"):
            self.event("removed", "the run's status directory %s was removed during the run: the supervisors "
                                  "can no longer report nor be renewed (not a node failure)" % read.get("status_dir"),
                       now)
        elif read.get("taken_over"):
            taker = read["taken_over"]
            self.event("takeover", "the run was taken over by run %s (controller %s, training_takeover=true): its "
                                   "containers were removed" % (taker.get("by"), taker.get("controller", "?")), now,
                       since=taker.get("time") if isinstance(taker.get("time"), (int, float)) else None)
        elif read.get("unreachable") or read.get("failed"):
            self.reader_failed(reader, read, now)
        elif self.scheduler_holds(read.get("scheduler"), now):
            pass
        else:
            for host, stream in (read.get("nodes") or {}).items():
                if host in self.states and not self.states[host]["done"]:
                    fold_stream(self.states[host], stream, now)
        answer = self.decide(now)
        self.memory["last_poll_at"] = now
        self.save(answer)
        return answer

    def scheduler_holds(self, scheduler: Optional[Mapping[str, Any]], now: float) -> bool:
        """Slurm's view of the job (``training_launcher=slurm``): while it pends, no timer runs and a pending limit
        ends the run with the scheduler's reason; once it is over, its end joins the evidence (a node Slurm lost,
        or the run's own end: time limit, preemption, a cancel by someone else)."""
        if not scheduler or scheduler.get("error") or not isinstance(scheduler.get("job"), dict):
            return False
        view = scheduler["job"]
        self.memory["scheduler"] = view
        if _launch_slurm.is_pending(view):
            since = self.memory.setdefault("pending_since", now)
            for state in self.states.values():
                state.update(started_at=now, last_progress_at=now, last_record_at=now)
            self.memory["started_at"] = now
            if self.pending_limit is not None and now - since > self.pending_limit:
                cause = _launch_slurm.pending_cause(view, now - since, self.pending_limit)
                self.event(cause["class"], cause["text"], now, since=since)
            return True
        if _launch_slurm.is_over(view):
            self.scheduler_ended(view, scheduler.get("reasons") or [], now)
        return False

    def scheduler_ended(self, view: Mapping[str, Any], reasons: List[Mapping[str, str]], now: float) -> None:
        known = {e.get("class") for e in self.memory["events"]}
        for host, record in _launch_slurm.node_failures(view, reasons, now).items():
            state = self.states.get(host)
            if state is not None and not any(e.get("evidence") == "slurm" for e in state["errors"]):
                record["time"] = state.get("last_record_time")
                state["errors"].append(record)
        ending = _launch_slurm.run_ending(view)
        if ending is not None and ending["class"] not in known:
            self.event(ending["class"], ending["text"], now, since=view.get("ended_at"))
        # What a supervisor wrote before its task ended reaches the shared directory within a settle period.
        ended_at = self.memory.setdefault("job_ended_seen_at", now)
        if now - ended_at < self.cluster.settle:
            return
        for state in self.states.values():
            ended = "%s: the Slurm job ended (%s) before this node's supervisor reported its end" % (
                state["host"], view.get("state"))
            apply_decision(state, Decision.failure("exit", ended), now)

    def note_absence(self, now: float) -> None:
        """The controller away (paused, suspended) longer than the lease: the supervisors stop, by design."""
        last = self.memory.get("last_poll_at")
        if last is None or self.lease_timeout is None or now - last <= self.lease_timeout:
            return
        self.event("controller", "the controller was away for %.0f s between two polls, longer than the lease "
                                 "timeout (%.0f s): the nodes' supervisors stopped their jobs, as they must; no node "
                                 "failed" % (now - last, self.lease_timeout), now, since=last)

    def event(self, kind: str, text: str, now: float, since: Optional[float] = None) -> None:
        self.memory["events"].append({"class": kind, "text": text, "time": now,
                                      "since": now if since is None else since})
        if kind in ABORTING_EVENTS:
            for state in self.states.values():
                if not state["done"]:
                    state.update(done=True, failed=False, reason="aborted", finished_at=now,
                                 msg="%s: stopped: %s" % (state["host"], text))

    def reader_failed(self, reader: str, read: Mapping[str, Any], now: float) -> None:
        """The node that reads the shared directory for everyone cannot: unreachable, it is named."""
        state = self.states.get(reader)
        how = "unreachable" if read.get("unreachable") else "could not read the status directory"
        msg = f"{reader}: {how} during the run: {one_line(read.get('msg', ''))}"
        if state is None:
            self.event("login", "the login host %s" % msg, now)
        elif not state["done"]:
            state["ssh_unreachable"] = bool(read.get("unreachable"))
            apply_decision(state, Decision.failure("unreachable", msg), now)

    def decide(self, now: float) -> Dict[str, Any]:
        for host, state in self.states.items():
            if state["done"]:
                continue
            printer = printer_of(self.plan, node_of(self.plan, host))
            decision = decide_cluster_node(state, node_of(self.plan, host), self.final_step, self.limits,
                                           self.cluster, self.states.get(printer) if printer != host else None, now)
            apply_decision(state, decision, now)
        culprit = first_failure(self.states)
        if culprit is not None and settle_cluster(self.states, self.cluster, now):
            abort_the_rest(self.states, culprit, now)
        suspects = sorted(h for h, s in self.states.items() if s["reason"] == "unreachable" and s["failed"])
        printers = [h for h in self.states if node_of(self.plan, h).get("prints_steps", True)]
        return cluster_answer(self.states, self.final_step, self.memory["started_at"], now, suspects, self.memory,
                              printers)

    def save(self, answer: Mapping[str, Any]) -> None:
        for state in self.states.values():
            spill_steps(self.directory, state)
        write_json_atomically(os.path.join(self.directory, RUN_FILE), self.memory)
        write_json_atomically(os.path.join(self.directory, PROGRESS_FILE), answer)
        if answer["done"]:
            save_states(self.directory, self.states, self.memory)


def node_of(plan: Mapping[str, Any], host: str) -> Mapping[str, Any]:
    return node_view(plan, host)


def fresh_state(plan: Mapping[str, Any], host: str, now: float) -> State:
    state = new_cluster_state(host, now)
    node = node_of(plan, host)
    state["node_rank"] = node.get("node_rank")
    state["container"] = {"name": (node.get("container") or {}).get("name"), "status": None,
                          "exit_code": None, "oom_killed": False}
    return state


def spill_steps(directory: str, state: State) -> None:
    """New steps go to the node's steps file; the state keeps the first and the last (rate and ETA).
    ``steps_kept``: how many steps at the head of the state's list the file has already."""
    steps = state["steps"]
    new = steps[state.get("steps_kept", 0):]
    restart = state.pop("steps_reset", False)
    if new or restart:
        path = os.path.join(directory, STEPS_DIR, "%s.jsonl" % state["host"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, "w" if restart else "a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(s, allow_nan=True) + "\n" for s in new))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, path) from exc
    if len(steps) > 2:
        state["steps"] = [steps[0], steps[-1]]
    state["steps_kept"] = len(state["steps"])


def all_steps(directory: str, host: str) -> List[Dict[str, Any]]:
    try:
        with open(os.path.join(directory, STEPS_DIR, "%s.jsonl" % host), encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def save_states(directory: str, states: Mapping[str, State], memory: Mapping[str, Any]) -> None:
    """Contract 2: one node-state file per node (with every step) under ``<run_dir>/watch/<run_id>/``, and
    the outcome: the one decision of the culprit."""
    for state in states.values():
        full = dict(state, steps=all_steps(directory, state["host"]) or state["steps"])
        write_json_atomically(state_path(directory, state["host"]), full)
    save_outcome(directory, analyse(states, memory), memory.get("events") or [])


def save_outcome(directory: str, analysis: Mapping[str, Any], events: List[Any]) -> None:
    write_json_atomically(os.path.join(directory, OUTCOME_FILE), dict(analysis, events=list(events)))
    culprit = analysis.get("culprit")
    if culprit:
        write_json_atomically(abort_path(directory), {"host": culprit["host"], "reason": culprit["class"],
                                                      "msg": culprit["text"], "time": culprit.get("time")})


def load_states(directory: str, hosts: List[str]) -> Dict[str, State]:
    """Every node's saved state, with what a direct look at it found (``direct/<host>.json``) folded in."""
    states = {}
    for host in hosts:
        state = read_json(state_path(directory, host))
        if isinstance(state, dict):
            direct = read_json(os.path.join(directory, DIRECT_DIR, "%s.json" % host))
            states[host] = with_direct_look(state, direct) if isinstance(direct, dict) else state
    return states


def with_direct_look(state: State, direct: Mapping[str, Any]) -> State:
    """A direct look at a silent node tells why it went silent: unreachable over SSH, its container gone,
    its own failure line."""
    merged = dict(state)
    known = {(e.get("lineno"), e.get("text")) for e in state.get("errors") or []}
    extra = [e for e in direct.get("errors") or [] if (e.get("lineno"), e.get("text")) not in known]
    if extra:
        merged["errors"] = list(state.get("errors") or []) + extra
    before = state.get("msg") or state["host"]
    if direct.get("unreachable"):
        merged.update(ssh_unreachable=True, msg="%s; the controller cannot reach it either: %s"
                      % (before, one_line(direct.get("msg", ""))))
    elif direct.get("reason") == "exit":
        container = direct.get("container") or {}
        exit_code = direct.get("exit_code") if direct.get("exit_code") is not None else container.get("exit_code")
        merged.update(reason="exit", exit_code=exit_code, msg="%s (%s)" % (one_line(direct.get("msg")), before))
    elif direct.get("failed"):
        merged.update(msg="%s; a direct look found: %s" % (before, one_line(direct.get("msg"))))
    return merged


def one_line(text: Any) -> str:
    """SSH's error text on one line: the verdict is one line."""
    return " ".join(str(text or "").split())


def conclude(run_dir: str, run_id: str, hosts: List[str],
             scheduler: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The end of the watch: the states with the direct looks (or, under Slurm, srun's exit lines), decided once,
    saved as the outcome (``concluded``) that every later reader takes (``conclusion``)."""
    directory = watch_dir(run_dir, run_id)
    states, memory, scheduler = evidence(run_dir, run_id, hosts, scheduler)
    analysis = analyse(states, memory)
    outcome = dict(analysis, concluded=True, **({"scheduler": scheduler} if scheduler else {}))
    try:
        save_outcome(directory, outcome, memory.get("events") or [])
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _room.release(run_dir, "verdict"):
            raise
        save_outcome(directory, outcome, memory.get("events") or [])
    return dict(analysis, states=states)


def conclusion(run_dir: str, run_id: str, hosts: List[str]) -> Dict[str, Any]:
    """The run's one decision as the watch concluded it, read from ``outcome.json``, with the states it was
    concluded from: what the assert and the guard of an interrupted run judge. Concluded here (once, and saved)
    only where no watch concluded: the per-node watch, a watch stopped before its end."""
    outcome = load_outcome(run_dir, run_id)
    states = evidence(run_dir, run_id, hosts)[0] if outcome and outcome.get("concluded") else {}
    if not states:
        # No watch concluded, or the states it concluded from were never kept (a full disk): concluded here.
        return conclude(run_dir, run_id, hosts)
    return dict({key: outcome.get(key) for key in ANALYSIS_KEYS}, states=states)


def evidence(run_dir: str, run_id: str, hosts: List[str], scheduler: Optional[Mapping[str, Any]] = None
             ) -> Tuple[Dict[str, State], Dict[str, Any], Optional[Mapping[str, Any]]]:
    """(states, the watch's memory, Slurm's record): the saved states with what the launcher's scheduler said of
    each node (Slurm's node failures, srun's exit lines) and its ending of the run among the events."""
    directory = watch_dir(run_dir, run_id)
    memory = read_json(os.path.join(directory, RUN_FILE)) or {}
    states = load_states(directory, hosts)
    # Slurm's record, given once at the watch's end, stays with every later conclusion (the verdict's).
    scheduler = scheduler or (load_outcome(run_dir, run_id) or {}).get("scheduler")
    failures = _launch_slurm.node_failures((scheduler or {}).get("job") or {},
                                           (scheduler or {}).get("node_reasons") or [], 0.0)
    for host, record in failures.items():
        if host in states and not any(e.get("evidence") == "slurm" for e in states[host].get("errors") or []):
            states[host] = dict(states[host], errors=list(states[host].get("errors") or []) + [
                dict(record, time=states[host].get("last_record_time"), first_seen=states[host].get("finished_at"))])
    ending = _launch_slurm.final_ending(scheduler or {})
    events = memory.setdefault("events", [])
    if ending is not None and ending["class"] not in {e.get("class") for e in events}:
        events.append(ending)
    for host, error in ((scheduler or {}).get("srun_errors") or {}).items():
        if host in states:
            states[host] = _launch_slurm.with_srun_exit(states[host], error)
    return states, memory, scheduler


def load_outcome(run_dir: str, run_id: str) -> Optional[Dict[str, Any]]:
    outcome = read_json(os.path.join(watch_dir(run_dir, run_id), OUTCOME_FILE))
    return outcome if isinstance(outcome, dict) else None
