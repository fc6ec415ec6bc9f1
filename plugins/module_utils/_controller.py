# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Faults of the controller itself, named as such: it could not write the run directory (a full disk, a quota,
a read-only mount), or could not collect a node's training log.

A full disk on the controller is no node's failure: the teardown that removed every container succeeded, and
the training's own verdict stands. The results document keeps both: the verdict of the training, and the
controller's fault (``controller_faults``), which makes the run a FAIL (its exit code is non-zero, so its report
never says PASS) without naming a node.
"""
from __future__ import annotations

import errno
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._report import (
    ReportsNotWritten, results_json, write_reports, write_with_room)
from ansible_collections.clusterval.training.plugins.module_utils._results import document_of

# Errors of a write that says nothing of the data written, only of where it goes.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
WRITE_ERRORS = tuple(os.strerror(number) for number in WRITE_ERRNOS)
PREFIX = "controller: cannot write the run directory "
# `[Errno 28] No space left on device: '/runs/x/watch/r/node1.json'` (an OSError naming its file).
ERRNO_PATH = re.compile(r"\[Errno (\d+)\] ([^:\]]+): '([^']+)'")
OWN_LINE = re.compile(re.escape(PREFIX) + r"(.+?): (%s)" % "|".join(re.escape(e) for e in WRITE_ERRORS))


def run_dir_fault(run_dir: str, reason: str) -> str:
    """The one line: `controller: cannot write the run directory <run dir>: <reason>`."""
    return "%s%s: %s" % (PREFIX, run_dir, reason)


def is_write_fault(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS


def inside(path: str, directory: str) -> bool:
    path, directory = os.path.normpath(path), os.path.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def faults_in_text(run_dir: str, text: str) -> List[str]:
    """The controller faults a message (a stop reason) states: an OSError of a write fault naming a file in the
    run directory, or a line this module wrote."""
    found = []
    for number, reason, path in ERRNO_PATH.findall(text or ""):
        if int(number) in WRITE_ERRNOS and run_dir and inside(path, run_dir):
            found.append(run_dir_fault(run_dir, reason.strip()))
    for directory, reason in OWN_LINE.findall(text or ""):
        found.append(run_dir_fault(directory, reason))
    return found


def log_write_error(error: str) -> Optional[str]:
    """The write fault in a failed log collection's message, if any. The node only reads its log; a full disk, a
    quota or a read-only file system is where the controller writes the copy."""
    for reason in WRITE_ERRORS:
        if reason in (error or ""):
            return reason
    return None


def log_outcomes(run_dir: str, teardown: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """host -> {error, write_error, copy, size, expected} of every node whose log could not be collected.

    The incomplete copy is not left looking like a log: an empty one is removed, a partial one is renamed
    `training.log.partial` (what could be kept is kept)."""
    found: Dict[str, Dict[str, Any]] = {}
    for host in sorted(teardown):
        outcome = teardown[host] or {}
        error = str(outcome.get("log_error") or "")
        if not error:
            continue
        copy = os.path.join(run_dir, "logs", host, "training.log")
        entry: Dict[str, Any] = {"error": error, "write_error": log_write_error(error), "copy": None}
        entry.update(keep_partial(copy))
        found[host] = entry
    return found


def keep_partial(copy: str) -> Dict[str, Any]:
    """An incomplete copy of a log: removed when empty, else renamed `<copy>.partial` ({copy, size})."""
    try:
        size = os.stat(copy).st_size
    except OSError:
        return {"copy": None, "size": 0}
    try:
        if size == 0:
            os.unlink(copy)
            return {"copy": None, "size": 0}
        os.replace(copy, copy + ".partial")
    except OSError:
        return {"copy": copy, "size": size}
    return {"copy": copy + ".partial", "size": size}


def controller_faults(run_dir: str, stop_reason: Optional[str], logs: Mapping[str, Mapping[str, Any]],
                      written_error: Optional[BaseException] = None) -> List[str]:
    """Every controller fault of the run, one line per directory and reason: from the stop reason, the log
    collection, the reports."""
    faults = faults_in_text(run_dir, stop_reason or "")
    lost = [host for host, entry in sorted(logs.items()) if entry.get("write_error")]
    for reason in sorted({str(logs[host]["write_error"]) for host in lost}):
        hosts = [host for host in lost if logs[host]["write_error"] == reason]
        faults.append(run_dir_fault(run_dir, "%s (training log of %s not collected)" % (reason, compact_hosts(hosts))))
    if written_error is not None and is_write_fault(written_error):
        faults.append(run_dir_fault(run_dir, str(written_error.strerror)))
    return merged(faults)


def merged(faults: Sequence[str]) -> List[str]:
    """One line per directory and reason, the details of each (in parentheses) joined."""
    lines: Dict[str, List[str]] = {}
    for fault in faults:
        head, detail = (fault[:-1].split(" (", 1) + [""])[:2] if fault.endswith(")") and " (" in fault else (fault, "")
        details = lines.setdefault(head, [])
        if detail and detail not in details:
            details.append(detail)
    return [head + (" (%s)" % "; ".join(details) if details else "") for head, details in lines.items()]


def log_failures(logs: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """The nodes whose log could not be collected for another reason than the controller's disk."""
    return ["%s: training log not collected: %s" % (host, entry["error"])
            for host, entry in sorted(logs.items()) if not entry.get("write_error")]


def with_faults(outcome: Mapping[str, Any], faults: Sequence[str], log_lines: Sequence[str],
                stopped_by_fault: bool) -> Dict[str, Any]:
    """The outcome with the controller's faults (`controller_faults`) and the logs not collected: a FAIL, whose
    headline keeps the training's own verdict and names no node for the controller's fault."""
    result = dict(outcome, controller_faults=list(faults))
    if not faults and not log_lines:
        return result
    result["failures"] = list(outcome.get("failures") or []) + list(faults) + list(log_lines)
    headline = str(outcome.get("headline") or outcome.get("verdict") or "")
    lead = "; ".join(list(faults) + list(log_lines))
    if stopped_by_fault:
        headline = "FAIL: %s (stopped before the verdict)" % lead
    elif outcome.get("verdict") == "PASS" or headline.startswith("PASS"):
        headline = "FAIL: %s; the training itself: %s" % (lead, headline)
    else:
        headline = "%s; %s" % (headline or "FAIL", lead)
    result.update(verdict="FAIL", headline=headline)
    return result


def reported_run(plan: Mapping[str, Any], run_dir: str, verdict: Optional[Mapping[str, Any]],
                 stop_reason: Optional[str], teardown: Optional[Mapping[str, Any]],
                 seconds: Optional[float] = None, extra: Optional[Mapping[str, Any]] = None,
                 stop: Optional[Mapping[str, Any]] = None, stages: Optional[List[Dict[str, Any]]] = None
                 ) -> Dict[str, Any]:
    """Write the run's reports: {document, paths (those written), error (the controller fault, or None)}.
    ``extra``: more sections of the document (the fabric gate's); ``stop``, ``stages``: where the run stopped
    and its timeline (``_results.stop_and_stages``).

    The document is the verdict's (or a stop's) with each node's teardown and the controller's faults; when
    the reports themselves cannot all be written, that fault is added and results.json rewritten, if it was
    written at all, so that it never says less than the console."""
    logs = log_outcomes(run_dir, teardown or {})
    if teardown is not None and logs:
        teardown = {host: dict(outcome or {}, log_copy=logs[host]["copy"]) if host in logs else outcome
                    for host, outcome in teardown.items()}
    judged = bool(verdict and verdict.get("verdict"))
    base = dict(document_of(plan, verdict, stop_reason, teardown, run_dir, stop, stages), **(extra or {}))
    stopped = not judged and bool(faults_in_text(run_dir, stop_reason or ""))
    faults = controller_faults(run_dir, stop_reason, logs)
    document = with_faults(base, faults, log_failures(logs), stopped)
    try:
        return {"document": document, "paths": write_reports(run_dir, document, seconds), "error": None}
    except ReportsNotWritten as exc:
        paths, cause = dict(exc.written), exc
    except OSError as exc:
        paths, cause = {}, exc
    fault = run_dir_fault(run_dir, str(cause.strerror or cause))
    if not any(seen.startswith(fault) for seen in faults):
        document = with_faults(base, merged(faults + [fault]), log_failures(logs), stopped)
        if "results.json" in paths:
            try:
                write_with_room(paths["results.json"], results_json(document), run_dir)
            except OSError:
                pass  # the first results.json stays; the console and the exit code say the rest
    return {"document": document, "paths": paths, "error": fault}
