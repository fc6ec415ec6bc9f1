# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Which node failed first on its own, and which failed because of it.

Each failed node has a cause: its first failure line that is not a consequence of a peer's
(``_failures.CONSEQUENCES``), else its first failure line, else how it ended (exit status, hang,
deadline, unreachable). Causes are ordered by when they happened: the line's own timestamp, else
when the watch first read it, else when the watch saw the node end. The culprit is the earliest
cause that is not a consequence; the consequences are the other failed nodes whose cause is a
consequence or only their ending. Nodes with a failure line of their own are independent failures.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import natural_key

# How a node can end without a failure line, in the watch's words (contract 1 of the brief).
ENDINGS = ("exit", "hang", "deadline", "unreachable", "error", "lease", "stopped")
STOPPED_BY_WATCH = ("aborted",)


def when(record: Mapping[str, Any], state: Mapping[str, Any]) -> float:
    for value in (record.get("time"), record.get("first_seen"), state.get("failed_at")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return math.inf


def node_failed(state: Mapping[str, Any], prints_steps: bool = True) -> bool:
    exit_code = state.get("exit_code")
    return bool(state.get("errors")) or (exit_code is not None and exit_code != 0) or \
        state.get("reason") in ENDINGS + STOPPED_BY_WATCH


def ending_record(host: str, state: Mapping[str, Any]) -> Dict[str, Any]:
    reason = state.get("reason")
    exit_code = state.get("exit_code")
    if reason in (None, "completed") and exit_code not in (None, 0):
        reason = "exit"
    text = state.get("msg") or ("exited with status %s" % exit_code if exit_code not in (None, 0) else str(reason))
    return {"class": reason or "exit", "text": text, "lineno": None, "step": state.get("last_step"),
            "time": None, "first_seen": None, "consequence": reason in STOPPED_BY_WATCH, "ending": True}


def cause_of(host: str, state: Mapping[str, Any]) -> Dict[str, Any]:
    """The node's cause record with its time: the first own failure line, else the first line, else its end."""
    errors = [e for e in state.get("errors") or [] if isinstance(e, dict)]
    ordered = sorted(errors, key=lambda e: (when(e, state), e.get("lineno") or 0))
    own = [e for e in ordered if not e.get("consequence")]
    record = dict((own or ordered or [ending_record(host, state)])[0])
    record["at"] = when(record, state)
    return record


def failures(nodes: Mapping[str, Mapping[str, Any]]) -> List[Tuple[str, Dict[str, Any]]]:
    """(host, cause) of every failed node, earliest first (natural host order breaks ties)."""
    failed = [(host, cause_of(host, state)) for host, state in nodes.items()
              if isinstance(state, dict) and node_failed(state)]
    return sorted(failed, key=lambda item: (item[1]["at"], natural_key(item[0])))


def analyse(nodes: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """``culprit`` (or None), ``consequences`` and ``independent`` host lists."""
    ordered = failures(nodes)
    if not ordered:
        return {"culprit": None, "consequences": [], "independent": []}
    primary = [item for item in ordered if not item[1].get("consequence") and not item[1].get("ending")]
    primary = primary or [item for item in ordered if not item[1].get("consequence")] or ordered
    host, cause = primary[0]
    others = [(h, c) for h, c in ordered if h != host]
    independent = [h for h, c in others if not c.get("consequence") and not c.get("ending")]
    consequences = [h for h, c in others if h not in independent]
    return {"culprit": culprit_record(host, cause), "consequences": sorted(consequences, key=natural_key),
            "independent": sorted(independent, key=natural_key)}


def culprit_record(host: str, cause: Mapping[str, Any]) -> Dict[str, Any]:
    at = cause.get("at")
    return {"host": host, "class": cause.get("class"), "step": cause.get("step"), "lineno": cause.get("lineno"),
            "text": cause.get("text"), "time": at if isinstance(at, float) and math.isfinite(at) else None}


def failure_headline(analysis: Mapping[str, Any]) -> Optional[str]:
    """``FAIL: node3 crash at step 3: XlaRuntimeError: ... (3 other nodes stopped as a consequence)``."""
    culprit = analysis.get("culprit")
    if not culprit:
        return None
    step = "" if culprit.get("step") is None else " at step %s" % culprit["step"]
    text = "FAIL: %s %s%s: %s" % (culprit["host"], culprit.get("class"), step, culprit.get("text"))
    consequences = len(analysis.get("consequences") or [])
    independent = len(analysis.get("independent") or [])
    notes = []
    if consequences:
        notes.append("%d other node%s stopped as a consequence" % (consequences, "" if consequences == 1 else "s"))
    if independent:
        notes.append("%d other node%s failed on their own" % (independent, "" if independent == 1 else "s"))
    return text + (" (%s)" % "; ".join(notes) if notes else "")
