# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Teardown on one node without a plan: the collection's containers, found by their labels, and
what their runs left (lease, lock, preflight marker, HF token copy, status directory).

Every labelled container on the node is this cluster's (Docker runs on the node). The run index lives in a
home directory that another cluster with the same node names may share: only this cluster's entries are
cleared (``_runlock.same_cluster``), the others are left alone and named."""
from __future__ import annotations

import base64
import gzip
import os
import shutil
import stat
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _run_node, _run_ship, _runlock
from ansible_collections.clusterval.training.plugins.module_utils._docker import Engine

DOCKER_TIMEOUT_S = 30.0


def runs_to_clear(containers: List[Mapping[str, Any]], run_id: str, run_dir: str, data_cache_dir: str,
                  node: str, cluster: Optional[Mapping[str, str]] = None) -> Tuple[Dict[str, Dict[str, str]], List[str]]:
    """(run id -> {run_dir, data_cache_dir}, left alone): the given run, the containers' labels and the node's
    run index (only `run_id`'s entry when given, else every run's), the index entries of this `cluster` only
    (``_runlock.cluster_identity``); the others' are named in the second item."""
    runs: Dict[str, Dict[str, str]] = {}
    labelled = {c["run_id"] for c in containers}
    ours, left = [], []
    for rid, entry in sorted(_runlock.indexed_runs(node, run_id).items()):
        if rid in labelled or _runlock.same_cluster(entry["cluster"], cluster or {}, bool(run_id)):
            ours.append((rid, entry))
        else:
            left.append("run %s (%s)" % (rid, _runlock.describe_cluster(node, entry["cluster"])))
    found = [(c["run_id"], c) for c in containers] + ours
    if run_id and (run_dir or data_cache_dir or not left):
        found.insert(0, (run_id, {"run_dir": run_dir, "data_cache_dir": data_cache_dir}))
    for rid, where in found:
        known = runs.setdefault(rid, {"run_dir": "", "data_cache_dir": "", "indexed": ""})
        for key in ("run_dir", "data_cache_dir"):
            known[key] = known[key] or where.get(key) or ""
    for rid in runs:  # another cluster's entry of a run named here stays in the index
        runs[rid]["indexed"] = "" if left and rid == run_id else "ours"
    return runs, left


def remove_file(path: str, dry_run: bool) -> bool:
    if not os.path.lexists(path):
        return False
    if not dry_run:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
    return True


def remove_tree(path: str, dry_run: bool) -> bool:
    """Remove a directory every node may be removing at the same time (shared filesystem)."""
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    if not dry_run:
        shutil.rmtree(path, ignore_errors=True)
    return True


def mark_taken_over(runs: Mapping[str, Mapping[str, str]], by: Mapping[str, Any]) -> None:
    """Tell the watch of each run taken over which run took it, before its containers go: its next poll
    reads this instead of blaming a node for the containers that vanish."""
    for rid, where in runs.items():
        status = _run_ship.status_dir(where["data_cache_dir"], rid) if where.get("data_cache_dir") else ""
        if status and os.path.isdir(status):
            try:
                _atomic.write_json(os.path.join(status, _run_node.TAKEOVER_FILE), dict(by, time=time.time()))
            except OSError:
                pass


def clear_run_files(run_id: str, run_dir: str, data_cache_dir: str, dry_run: bool,
                    keep_lock: bool = False, node: str = "", keep_status: bool = False) -> List[str]:
    """Remove the run's lease, the HF token copy the controller handed over, its lock (when it holds it,
    unless `keep_lock`), its preflight marker and its status directory on the shared cache (a later run of
    the same id never reads its records); what was removed."""
    removed = []
    if run_dir:
        if remove_file(_runlock.lease_path(run_dir), dry_run):
            removed.append("lease %s" % _runlock.lease_path(run_dir))
        if remove_file(_run_ship.handed_token_path(run_dir), dry_run):
            removed.append("HF token copy %s" % _run_ship.handed_token_path(run_dir))
        lock = _runlock.lock_path(run_dir)
        held = _runlock.read_lock(lock)
        if not keep_lock and held is not None and held.get("run_id") == run_id and remove_file(lock, dry_run):
            removed.append("lock %s" % lock)
    if data_cache_dir and remove_file(_runlock.marker_path(data_cache_dir, run_id), dry_run):
        removed.append("preflight marker %s" % _runlock.marker_path(data_cache_dir, run_id))
    if data_cache_dir and not keep_status and remove_tree(_run_ship.status_dir(data_cache_dir, run_id), dry_run):
        removed.append("status directory %s" % _run_ship.status_dir(data_cache_dir, run_id))
    if node and not keep_lock and not dry_run:
        _runlock.forget_run(run_id, node)
    return removed


def cleanup(docker_host: str, run_id: str = "", run_dir: str = "", data_cache_dir: str = "", *,
            dry_run: bool = False, timeout: float = DOCKER_TIMEOUT_S, node: str = "",
            cluster: Optional[Mapping[str, str]] = None,
            taken_over_by: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Remove every labelled container (or `run_id`'s) and the files of their runs: the runs of those
    containers and the runs `cluster` recorded in the node's run index.

    ``taken_over_by`` (the run taking the node over): each run removed is told so first, in its status
    directory, which stays for its own watch to read (its own teardown removes it).

    Returns {removed[], containers[], runs[], left_alone[], error}; `error` (the daemon could not be reached
    or refused a removal) is None when all went well. The run's lease and marker are removed even then
    (without its lease the node's guard stops the job); its lock stays until a teardown succeeds.
    `left_alone` names the runs another cluster recorded in the shared run index."""
    removed: List[str] = []
    containers: List[Dict[str, Any]] = []
    error: Optional[str] = None
    try:
        engine = Engine.at(docker_host, timeout)
        containers = _runlock.list_labelled(engine, run_id)
        if taken_over_by and not dry_run:
            mark_taken_over(runs_to_clear(containers, run_id, run_dir, data_cache_dir, node, cluster)[0],
                            taken_over_by)
        for container in containers:
            if not dry_run:
                engine.remove(container["id"])
            removed.append("container %s (run %s, %s)" % (container["name"], container["run_id"], container["state"]))
    except (OSError, ValueError) as exc:
        error = "Docker daemon at %s: %s" % (docker_host, exc)
    runs, left_alone = runs_to_clear(containers, run_id, run_dir, data_cache_dir, node, cluster)
    for rid, where in sorted(runs.items()):
        # Containers that may still run keep the node locked: the next run is refused, not mixed in.
        removed.extend(clear_run_files(rid, where["run_dir"], where["data_cache_dir"], dry_run,
                                       keep_lock=error is not None, node=node if where["indexed"] else "",
                                       keep_status=bool(taken_over_by)))
    return {"removed": removed, "containers": [c["name"] for c in containers], "runs": sorted(runs),
            "left_alone": left_alone, "error": error}


def summary(node: str, outcome: Mapping[str, Any], run_id: str) -> str:
    scope = "run %s" % run_id if run_id else "any run"
    left = outcome.get("left_alone") or []
    others = "; left alone, recorded by another cluster in the shared run index: %s" % ", ".join(left) if left else ""
    if outcome["error"]:
        return "%s teardown FAILED (%s): %s%s%s" % (node, scope, outcome["error"], "; removed: %s" % "; ".join(
            outcome["removed"]) if outcome["removed"] else "", others)
    if not outcome["removed"]:
        return "%s teardown: nothing to remove (%s)%s" % (node, scope, others)
    return "%s teardown removed (%s): %s%s" % (node, scope, "; ".join(outcome["removed"]), others)


def read_log(path: str, max_bytes: int) -> Dict[str, Any]:
    """The training log for the controller's copy: {data (gzip, base64), size, kept} or {missing} or {error}.
    A log longer than ``max_bytes`` keeps its end, where a failure is."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return {"error": "%s on the node is not a regular file" % path}
        # Not blocking on a FIFO put there after the check.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                handle.seek(size - max_bytes)
            data = handle.read(max_bytes)
    except FileNotFoundError:
        return {"missing": True}
    except OSError as exc:
        return {"error": "reading %s on the node: %s" % (path, exc.strerror or exc)}
    return {"data": base64.b64encode(gzip.compress(data, 6)).decode("ascii"), "size": size, "kept": len(data)}


def write_log_copy(log: Mapping[str, Any], copy: str) -> str:
    """Writes a collected log (from read_log) to the controller's copy; returns why it was not, or ''."""
    if log.get("missing"):
        return ""
    if log.get("error"):
        return str(log["error"])
    try:
        data = gzip.decompress(base64.b64decode(log["data"]))
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        _atomic.write_bytes(copy, data, 0o644, None)
    except OSError as exc:
        return str(exc)
    except (KeyError, ValueError) as exc:
        return "the node's copy of the log could not be read back: %s" % exc
    return ""


def outcome_of(host: str, result: Mapping[str, Any], log_error: str) -> Dict[str, Any]:
    """A node's teardown, as the run's reports read it: {ok, unreachable, removed, left_alone, log_error, msg}."""
    unreachable = bool(result.get("unreachable"))
    msg = str(result.get("msg") or "")
    log = result.get("log") or {}
    if log.get("kept", 0) < log.get("size", 0):
        msg += "; the training log has %d bytes, its last %d collected" % (log["size"], log["kept"])
    if unreachable:
        msg = "%s teardown FAILED: unreachable, its containers may still run: %s" % (host, msg)
    elif result.get("failed") and not msg.startswith(host + " teardown"):
        msg = "%s teardown FAILED: %s" % (host, msg or "see above")
    if log_error:
        msg += "; training log not collected: %s" % log_error
    return {"ok": not unreachable and not result.get("failed"), "unreachable": unreachable,
            "removed": list(result.get("removed") or []), "left_alone": list(result.get("left_alone") or []),
            "log_error": log_error, "msg": msg}
