# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The run's decisions, pure: records folded into node states, each node decided, the cluster settled, the
rest aborted, the cluster's answer, and the one decision of the culprit that every output uses.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import natural_key
from ansible_collections.clusterval.training.plugins.module_utils._run_records import (
    RUNNING, RECORD_KEYS, SUPERVISOR_STOPS, ClusterLimits, Decision, Limits, State, deadline_passed,
    eta_of, exit_decision, failure_in_log, hang, new_cluster_state, root_error)
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE


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
        state["exit_time"] = record.get("time")
        state["supervisor"] = "ended"
    elif kind == "sample":
        state["sample"] = item_of(record)


def forget_earlier_supervisor(state: State) -> None:
    """A new supervisor started this node's stream anew (a new container of the run id): what an earlier
    one wrote says nothing about this job."""
    fresh = new_cluster_state(state["host"], state["started_at"])
    fresh.update(stream_offset=state["stream_offset"], polls=state["polls"], steps_reset=True)
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
        times = [r["time"] for r in records if isinstance(r.get("time"), (int, float)) and not isinstance(r["time"], bool)]
        if times:
            state["last_record_time"] = max(times)
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
    return Decision.failure(SUPERVISOR_STOPS.get(reason, "exit"),
                            f"{state['host']}: the node's supervisor stopped the job at step {state['last_step']}: "
                            f"{words.get(reason, reason)}")


def ended(state: State, final_step: int, prints_steps: bool) -> Optional[Decision]:
    """The process exited: non-zero fails; zero is a completion for a node that reached the final step."""
    if state["exit_code"] is None:
        return None
    if int(state["exit_code"]) == 0 and prints_steps and state["final_reached_at"] is not None:
        return Decision.finished("completed", f"{state['host']}: reached the final step {final_step} and exited 0")
    if int(state["exit_code"]) == 0 and not prints_steps:
        return Decision.finished("completed", f"{state['host']}: the training process exited with status 0")
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
    return Decision.failure("hang", f"{state['host']}: hang: the training process did not exit "
                                    f"{cluster.exit_grace:.0f} s {why} (rank {state.get('node_rank', '?')})")


def stale(state: State, cluster: ClusterLimits, now: float) -> Optional[Decision]:
    """No record from the node's supervisor for too long: the node, its container or the shared FS is gone."""
    allowed = cluster.stale_timeout if state["polls"] and state["supervisor"] else cluster.first_record_grace
    quiet = now - state["last_record_at"]
    if quiet <= allowed:
        return None
    state["stale_timeout"] = allowed
    return Decision.failure("unreachable", f"{state['host']}: no status from the node's supervisor for "
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


# What the job is doing before its first step, from the least advanced printing node's supervisor.
PHASES = ((None, "starting"), ("up", "waiting for the gang"), ("running", "compiling, first step"))


def job_phase(printing: List[State]) -> Optional[str]:
    """The phase before the first step (``None`` once a step came): as the supervisors' streams tell it."""
    if any(s["last_step"] is not None for s in printing):
        return None
    supervisors = {s["supervisor"] for s in printing}
    return next((text for supervisor, text in PHASES if supervisor in supervisors), None)


def cluster_progress(states: Mapping[str, State], final_step: int, started_at: float, now: float,
                     slowest_max: int = 5, printers: Optional[List[str]] = None) -> Dict[str, Any]:
    """Contract 6 ``progress``: counts, step spread, median rate, ETA, the slowest nodes and, before the first
    step, the job's phase. Only the nodes that print steps (``printers``, every node by default) are judged
    for speed: a Megatron-LM rank that prints nothing is never the slow one."""
    printing = [s for h, s in states.items() if printers is None or h in printers]
    steps = [s["last_step"] for s in printing if s["last_step"] is not None]
    metric = rate_metric_of(states)
    rates = [s["steps"][-1][metric] for s in printing
             if metric and s["steps"] and isinstance(s["steps"][-1].get(metric), (int, float))]
    etas = [e for e in (eta_of(s, final_step) for s in printing if not s["done"]) if e is not None]
    ranked = sorted(printing, key=lambda s: (-1 if s["last_step"] is None else s["last_step"], s["host"]))
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
        "phase": job_phase(printing),
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
                   suspects: List[str], run: Optional[Mapping[str, Any]] = None,
                   printers: Optional[List[str]] = None) -> Dict[str, Any]:
    """The contract-6 result of one poll; its message is the one decision's (``analyse``)."""
    done = all(s["done"] for s in states.values())
    analysis = analyse(states, run)
    failed = analysis["culprit"] is not None or analysis["run_cause"] is not None
    return {
        "done": done,
        "failed": failed,
        "reason": reason_of(analysis, states) if failed else ("completed" if done else "running"),
        "msg": failure_headline(analysis) if failed else ("every node completed" if done else ""),
        "culprit": analysis["culprit"],
        "run_cause": analysis["run_cause"],
        "progress": cluster_progress(states, final_step, started_at, now, printers=printers),
        "failures": cluster_failures(states),
        "suspects": suspects,
        "rank_start_spread_s": rank_start_spread(states),
        "simulated": any(s["simulated"] for s in states.values()),
    }


def reason_of(analysis: Mapping[str, Any], states: Mapping[str, State]) -> str:
    if analysis["culprit"] is not None:
        return str(states.get(analysis["culprit"]["host"], {}).get("reason") or analysis["culprit"]["class"])
    return str(analysis["run_cause"]["class"])


# -- the one decision of the culprit ----------------------------------------------------------------
#
# Each failed node has a cause: its first failure line that is not a consequence of a peer's
# (``_failures.CONSEQUENCES``), else the evidence that it went silent while the others went on (its
# supervisor's stream stopped, the controller could not reach it), else its first failure line, else how it
# ended (exit status, hang, deadline). Causes are ordered by when they happened: the line's own time, else
# when the watch first read it; a silent node's cause is the time of its last record. The culprit is the
# earliest cause that is evidence of the node's own; a node is named only then. Otherwise the run's cause
# says why no node stands out: the controller went away past the lease, the run was taken over, state it
# needs was removed, every node stopped at the same place (a lock-step hang), or every stream stopped at once.

ENDINGS = ("exit", "hang", "deadline", "unreachable", "error", "lease", "stopped")
# Process states that single out the node whose training process is in one while no other node's is.
STUCK_STATES = {"D": "in uninterruptible sleep (D)", "T": "stopped (T)", "t": "stopped by a tracer (t)"}
STOPPED_BY_WATCH = ("aborted",)
LOST = "node lost"


def when(record: Mapping[str, Any], state: Mapping[str, Any]) -> float:
    for value in (record.get("time"), record.get("first_seen"), state.get("failed_at")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return math.inf


def node_failed(state: Mapping[str, Any]) -> bool:
    exit_code = state.get("exit_code")
    return bool(state.get("errors")) or (exit_code is not None and exit_code != 0) or \
        state.get("reason") in ENDINGS + STOPPED_BY_WATCH


def went_silent(host: str, state: Mapping[str, Any], states: Mapping[str, Mapping[str, Any]]) -> bool:
    """The controller cannot reach the node while it reaches another, or the node's stream stopped while
    another node's went on."""
    others = [other for name, other in states.items() if name != host]
    if state.get("ssh_unreachable"):
        return any(not other.get("ssh_unreachable") for other in others)
    if state.get("reason") != "unreachable":
        return False
    last = state.get("last_record_at")
    if not isinstance(last, (int, float)):
        return False
    margin = float(state.get("stale_timeout") or 0.0) / 2.0
    return any(isinstance(other.get("last_record_at"), (int, float)) and other["last_record_at"] > last + margin
               for other in others)


def silence_record(state: Mapping[str, Any]) -> Dict[str, Any]:
    """A node gone silent is "node lost" in every output, from the watch's first word to the verdict; what a
    direct look found (unreachable over SSH) is its text."""
    last = state.get("last_record_time")
    return {"class": LOST,
            "text": state.get("msg") or "no status from the node", "lineno": None, "step": state.get("last_step"),
            "time": last if isinstance(last, (int, float)) else None, "first_seen": state.get("last_record_at"),
            "consequence": False, "evidence": "silence"}


def ending_record(state: Mapping[str, Any]) -> Dict[str, Any]:
    """How the node ended, without a failure line. Its own process dying (a non-zero exit status, a container
    killed or removed) is evidence of its own, timed when it died; a hang, a stop or an abort is not."""
    reason = state.get("reason")
    exit_code = state.get("exit_code")
    if reason in (None, "completed") and exit_code not in (None, 0):
        reason = "exit"
    text = state.get("msg") or ("exited with status %s" % exit_code if exit_code not in (None, 0) else str(reason))
    died = reason == "exit" and exit_code not in (None, 0) and state.get("exit_reason") in (None, "exit")
    died_at = state.get("exit_time") or state.get("last_record_time") if died else None
    return {"class": reason or "exit", "text": text, "lineno": None, "step": state.get("last_step"),
            "time": died_at, "first_seen": None, "consequence": reason in STOPPED_BY_WATCH, "ending": not died,
            "evidence": "exit" if died else None}


def cause_of(host: str, state: Mapping[str, Any], states: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The node's cause record with its time."""
    errors = [e for e in state.get("errors") or [] if isinstance(e, dict)]
    ordered = sorted(errors, key=lambda e: (when(e, state), e.get("lineno") or 0))
    own = [e for e in ordered if not e.get("consequence")]
    if own:
        record = dict(own[0])
    elif went_silent(host, state, states):
        record = silence_record(state)
    else:
        record = dict((ordered or [ending_record(state)])[0])
    record["at"] = when(record, state)
    return record


def failures(nodes: Mapping[str, Mapping[str, Any]]) -> List[Tuple[str, Dict[str, Any]]]:
    """(host, cause) of every failed node, earliest first (natural host order breaks ties)."""
    failed = [(host, cause_of(host, state, nodes)) for host, state in nodes.items()
              if isinstance(state, dict) and node_failed(state)]
    return sorted(failed, key=lambda item: (item[1]["at"], natural_key(item[0])))


# What the one decision holds (``analyse``), as outcome.json keeps it beside the events.
ANALYSIS_KEYS = ("culprit", "run_cause", "consequences", "independent", "stopped_at")


def analyse(nodes: Mapping[str, Mapping[str, Any]], run: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``culprit`` (a node singled out by evidence, or None), ``run_cause`` (why no node is named),
    ``consequences`` and ``independent`` host lists, ``stopped_at`` (host -> last step of the failed nodes)."""
    nodes = {h: s for h, s in nodes.items() if isinstance(s, dict)}
    ordered = failures(nodes)
    result: Dict[str, Any] = {"culprit": None, "run_cause": None, "consequences": [], "independent": [],
                              "stopped_at": {h: nodes[h].get("last_step") for h, dummy in ordered}}
    if not ordered:
        return result
    run_cause = cause_of_run(nodes, run or {}, ordered) or deadline_cause(nodes, run or {}, ordered)
    primary = [item for item in ordered if not item[1].get("consequence") and not item[1].get("ending")]
    if run_cause is not None and not any(c.get("evidence") != "silence" and c["at"] < run_cause["since"]
                                         for dummy, c in primary):
        result.update(run_cause=run_cause, consequences=sorted((h for h, dummy in ordered), key=natural_key))
        return result
    common = common_cause(nodes, primary)
    if common is not None:
        result.update(run_cause=common, consequences=sorted((h for h, dummy in ordered), key=natural_key))
        return result
    if not primary:
        singled = singled_out(nodes, ordered)
        if singled is None:
            result.update(run_cause=undetermined(nodes, ordered),
                          consequences=sorted((h for h, dummy in ordered), key=natural_key))
            return result
        primary = [singled]
    host, cause = primary[0]
    others = [(h, c) for h, c in ordered if h != host]
    independent = [h for h, c in others if not c.get("consequence") and not c.get("ending")
                   and not lost_peer_symptom(cause, c)]
    consequences = [h for h, c in others if h not in independent]
    result.update(culprit=culprit_record(host, cause), consequences=sorted(consequences, key=natural_key),
                  independent=sorted(independent, key=natural_key))
    return result


# What the survivors of a lost node report about it: a lost connection, a failed collective, a wait.
PEER_SYMPTOMS = ("network", "coordination", "hang")
# A node gone: silent on the status streams, or lost by Slurm (NODE_FAIL).
LOST_EVIDENCE = ("silence", "slurm")


def lost_peer_symptom(culprit: Mapping[str, Any], cause: Mapping[str, Any]) -> bool:
    """After the culprit's failure, what the others show of it: a process that died without a word, and after a
    node went silent, the network and coordination failures its silence caused."""
    after = cause.get("at", math.inf) >= culprit.get("at", math.inf)
    if cause.get("evidence") == "exit":
        return after
    return after and culprit.get("evidence") in LOST_EVIDENCE and cause.get("class") in PEER_SYMPTOMS


def cause_of_run(nodes: Mapping[str, Mapping[str, Any]], run: Mapping[str, Any],
                 ordered: List[Tuple[str, Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """A cause outside every node: recorded by the watch (the controller away, a takeover, removed state), or the
    lease lapsing on every node at once. ``since``: when it began; what the nodes showed after it (the lines of
    ranks whose peers were stopped, the supervisors' own stops) is what it did, not a node's own failure."""
    events = [e for e in run.get("events") or [] if isinstance(e, dict)]
    lease_stops = [h for h, dummy in ordered if nodes[h].get("exit_reason") == "lease"]
    for event in events:
        if event.get("class") == "controller" and not lease_stops:
            continue
        since = event.get("since", event.get("time"))
        return {"class": event.get("class"), "text": event.get("text"), "time": event.get("time"),
                "since": since if isinstance(since, (int, float)) else math.inf}
    if lease_stops and len(lease_stops) == len(nodes):
        stops = [nodes[h].get("exit_time") for h in lease_stops if isinstance(nodes[h].get("exit_time"), (int, float))]
        return {"class": "lease", "time": None, "since": min(stops) if stops else math.inf,
                "text": "the lease lapsed on every node at once: the controller stopped renewing it (it was paused, "
                        "cut off or killed); every node's supervisor stopped its job, as it must"}
    return None


def deadline_cause(nodes: Mapping[str, Mapping[str, Any]], run: Mapping[str, Any],
                   ordered: List[Tuple[str, Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The run's deadline passed: a limit of the run, not a failure of a node (the nodes the watch stopped after
    it are its consequence): ``300 s passed at step 957 of 999 on every node``."""
    reached = [h for h, dummy in ordered if nodes[h].get("reason") == "deadline"]
    if not reached or any(nodes[h].get("reason") not in ("deadline",) + STOPPED_BY_WATCH for h, dummy in ordered):
        return None
    limits = run.get("limits") or {}
    seconds = limits.get("deadline")
    steps = sorted({nodes[h].get("last_step") for h in reached}, key=lambda s: (s is None, s))
    where = "before the first step" if steps == [None] else "at step%s %s" % (
        "s" * (len(steps) > 1), ", ".join("none" if s is None else str(s) for s in steps))
    final = " of %s" % limits["final_step"] if limits.get("final_step") is not None and steps != [None] else ""
    on = "every node" if len(reached) == len(nodes) else ", ".join(sorted(reached, key=natural_key))
    what = "%.0f s passed" % seconds if isinstance(seconds, (int, float)) else "the run's deadline passed"
    return {"class": "deadline", "time": None, "since": math.inf,
            "text": "%s %s%s on %s" % (what, where, final, on),
            "evidence": {h: evidence_of(nodes[h]) for h, dummy in ordered}}


def common_cause(nodes: Mapping[str, Mapping[str, Any]],
                 primary: List[Tuple[str, Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """Every node failed on its own with the same line (numbers aside): a cause they share (the config, the
    image, the fabric), which singles out none of them."""
    lines = [cause for dummy, cause in primary if cause.get("lineno") is not None or cause.get("evidence") == "line"]
    if len(nodes) < 2 or len(lines) != len(nodes):
        return None
    texts = {re.sub(r"\d+", "#", str(cause.get("text") or "")).strip() for cause in lines}
    if len(texts) != 1:
        return None
    first = lines[0]
    return {"class": first.get("class"), "time": None,
            "text": "all %d nodes failed alike: %s; no node stands out (a cause they share: the config, the image, "
                    "the fabric)" % (len(nodes), first.get("text")),
            "evidence": {h: evidence_of(nodes[h]) for h, dummy in primary}}


def singled_out(nodes: Mapping[str, Mapping[str, Any]],
                ordered: List[Tuple[str, Dict[str, Any]]]) -> Optional[Tuple[str, Dict[str, Any]]]:
    """Among failures without a line of their own: the one node that evidence sets apart, else None.

    A failed node whose peers all completed; a node stuck in uninterruptible sleep (D state) while no other is;
    a node that stopped at an earlier step than every other failed node (lock-step frameworks stop the others
    one collective later)."""
    if len(ordered) == 1 and all(nodes[h].get("reason") == "completed" for h in nodes if h != ordered[0][0]):
        return ordered[0]
    stuck = [item for item in ordered if (nodes[item[0]].get("sample") or {}).get("state") in STUCK_STATES]
    if len(stuck) == 1:
        host, cause = stuck[0]
        sample = nodes[host]["sample"]
        return host, dict(cause, evidence="process", text="%s; its training process is %s in %s, no other node's is" % (
            cause.get("text"), STUCK_STATES[sample["state"]], sample.get("wchan") or "the kernel"))
    steps = {h: nodes[h].get("last_step") for h, dummy in ordered if nodes[h].get("reason") == "hang"}
    if len(steps) > 1 and all(isinstance(s, int) for s in steps.values()):
        lowest = min(steps.values())
        behind = [h for h, s in steps.items() if s == lowest]
        if len(behind) == 1 and sorted(steps.values())[1] > lowest:
            host = behind[0]
            cause = dict(next(c for h, c in ordered if h == host))
            cause["text"] = "%s; it stopped after step %s, every other node after step %s or later" % (
                cause.get("text"), lowest, sorted(steps.values())[1])
            return host, cause
    return None


def undetermined(nodes: Mapping[str, Mapping[str, Any]], ordered: List[Tuple[str, Dict[str, Any]]]) -> Dict[str, Any]:
    """The run's cause when no node stands out, with where each failed node stopped."""
    classes = {c.get("class") for dummy, c in ordered}
    steps = sorted({nodes[h].get("last_step") for h, dummy in ordered}, key=lambda s: (s is None, s))
    count = len(ordered)
    where = ("after step %s" % steps[0]) if len(steps) == 1 and steps[0] is not None else (
        "before the first step" if steps == [None] else
        "at steps %s" % ", ".join("none" if s is None else str(s) for s in steps))
    kind = "hang" if classes == {"hang"} else ("silence" if classes == {"unreachable"} else "failure")
    noun = "node" if count == 1 else "nodes"
    subject = "all %d %s" % (count, noun) if count == len(nodes) and count > 1 else "%d %s" % (count, noun)
    if kind == "silence":
        text = "%s went silent together %s; no node stands out (the shared directory or the network of the " \
               "controller may be at fault)" % (subject, where)
    else:
        text = "%s stopped %s; no node stands out" % (subject, where)
    return {"class": kind, "text": text, "time": None,
            "evidence": {h: evidence_of(nodes[h]) for h, dummy in ordered}}


def evidence_of(state: Mapping[str, Any]) -> Dict[str, Any]:
    sample = state.get("sample") or {}
    return {"step": state.get("last_step"), "reason": state.get("reason"),
            "process": {k: sample.get(k) for k in ("state", "wchan", "stack") if sample.get(k)}}


def culprit_record(host: str, cause: Mapping[str, Any]) -> Dict[str, Any]:
    at = cause.get("at")
    return {"host": host, "class": cause.get("class"), "step": cause.get("step"), "lineno": cause.get("lineno"),
            "text": cause.get("text"), "time": at if isinstance(at, float) and math.isfinite(at) else None,
            "evidence": cause.get("evidence") or ("line" if cause.get("lineno") is not None else cause.get("class"))}


def failure_headline(analysis: Mapping[str, Any]) -> Optional[str]:
    """``FAIL: node3 crash at step 3: XlaRuntimeError: ... (3 other nodes stopped as a consequence)``, or
    ``FAIL: hang: all 4 nodes stopped after step 11; no node stands out``."""
    culprit = analysis.get("culprit")
    run_cause = analysis.get("run_cause")
    if culprit:
        step = "" if culprit.get("step") is None else " at step %s" % culprit["step"]
        text = "FAIL: %s %s%s: %s" % (culprit["host"], culprit.get("class"), step, culprit.get("text"))
    elif run_cause:
        text = "FAIL: %s: %s" % (run_cause.get("class"), run_cause.get("text"))
    else:
        return None
    consequences = len(analysis.get("consequences") or [])
    independent = len(analysis.get("independent") or [])
    notes = []
    if consequences and culprit:
        notes.append("%d other node%s stopped as a consequence" % (consequences, "" if consequences == 1 else "s"))
    if independent:
        notes.append("%d other node%s failed on their own" % (independent, "" if independent == 1 else "s"))
    return text + (" (%s)" % "; ".join(notes) if notes else "")
