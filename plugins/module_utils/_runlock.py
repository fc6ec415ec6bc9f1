# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""One run per node at a time: the lock in the node's run root and the busy decision.

The lock is ``<run root>/clusterval.lock`` (run root = parent of the node run dir), JSON
``{run_id, controller, started_at}``. It is taken atomically (a hard link of a complete file, which
fails when the lock exists, also on NFS) and released by teardown. A node is busy for a run when a
container of another run carries the collection's labels and runs, or when another run's lock is
there and that run still has a container or took the lock less than ``stale_after_s`` ago (a run
in preflight or node preparation has no container yet). A lock whose run has no container left
and is older than that is stale: it is taken over, with a warning. So is a lock whose run's containers have all
exited and whose lease lapsed (an interrupted run: its supervisors stopped their jobs; only a teardown would
remove the exited containers).

Taking the lock also records the run in the node's run index (``~/.cache/clusterval/runs/<run id>@<node>.json``,
``{run_dir, data_cache_dir, cluster}``; keyed by node because home directories are often shared): a teardown given
only the run id, or none, finds the run's lock, lease and marker there even when the run was interrupted before any
container carried their paths in its labels. ``cluster`` is the identity of the cluster that recorded it
(``{address, controller}``: the node's address as the inventory gives it, the controller's ``user@host``). Two
clusters whose nodes have the same names may share a home directory, so a teardown clears only its own cluster's
entries (``same_cluster``): the shared state of another cluster's run (its status directory, marker, lease, lock,
index entry) is never touched.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence
from urllib.parse import quote, unquote

from ansible_collections.clusterval.training.plugins.module_utils import _atomic
from ansible_collections.clusterval.training.plugins.module_utils._docker import Engine

LOCK_NAME = "clusterval.lock"
RUN_ID_LABEL = "clusterval.run_id"
RUN_DIR_LABEL = "clusterval.run_dir"
DATA_CACHE_LABEL = "clusterval.data_cache_dir"
MARKER_PREFIX = ".clusterval-preflight-"
LEASE_NAME = "lease"
DOCKER_TIMEOUT_S = 10.0
RUN_INDEX_DIR = "~/.cache/clusterval/runs"
# The supervisor's config in the node run dir (``_run_ship.supervisor_files``): its lease files and timeout.
SUPERVISOR_CONFIG = "supervisor/config.json"


def run_root(run_dir: str) -> str:
    return os.path.dirname(run_dir.rstrip("/")) or "/"


def lock_path(run_dir: str) -> str:
    return os.path.join(run_root(run_dir), LOCK_NAME)


def marker_path(data_cache_dir: str, run_id: str) -> str:
    return os.path.join(data_cache_dir, MARKER_PREFIX + run_id)


def lease_path(run_dir: str) -> str:
    return os.path.join(run_dir, LEASE_NAME)


def lock_record(run_id: str, controller: str, now: Optional[float] = None) -> Dict[str, str]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    return {"run_id": run_id, "controller": controller, "started_at": stamp}


def read_lock(path: str) -> Optional[Dict[str, Any]]:
    """The lock's record and its age in seconds (`age_s`); None when there is no lock.

    A lock that does not parse is held by run `unknown`."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(65536)
        age = max(0.0, time.time() - os.stat(path).st_mtime)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"run_id": "unknown", "controller": "?", "started_at": "?", "age_s": 0.0,
                "error": "cannot read %s: %s" % (path, exc.strerror)}
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not record.get("run_id"):
        record = {"run_id": "unknown", "controller": "?", "started_at": "?"}
    return dict(record, age_s=age)


def take_lock(path: str, record: Mapping[str, str], replace: bool = False) -> bool:
    """Write the lock atomically; False when another lock is there (unless `replace`)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return _atomic.write_json(path, dict(record), replace=replace)


def index_path(run_id: str, node: str) -> str:
    name = "%s@%s.json" % (quote(run_id, safe=""), quote(node, safe=""))
    return os.path.join(os.path.expanduser(RUN_INDEX_DIR), name)


def cluster_identity(address: str, controller: str) -> Dict[str, str]:
    """Who records a run: the node's address as the inventory gives it and the controller's ``user@host``."""
    return {"address": address or "", "controller": controller or ""}


def same_cluster(recorded: Mapping[str, Any], here: Mapping[str, Any], named: bool) -> bool:
    """Whether a run-index entry recorded by `recorded` belongs to the cluster `here` (both ``cluster_identity``).

    A run named by its id is another cluster's only when the entry gives another address for the node (a
    teardown from another controller is what one does when the first one died). Every run (no run id): the
    entry must give this address and this controller; an entry without an identity (an older version wrote
    it) or a caller without one is never taken for this cluster's."""
    address, controller = recorded.get("address") or "", recorded.get("controller") or ""
    if named:
        return not (address and here.get("address") and address != here.get("address"))
    return bool(address and controller) and address == here.get("address") and controller == here.get("controller")


def describe_cluster(node: str, recorded: Mapping[str, Any]) -> str:
    """`node1 at 10.0.0.11 from alice@login1`, or `node1, no cluster recorded`."""
    if not recorded.get("address") and not recorded.get("controller"):
        return "%s, no cluster recorded" % node
    return "%s at %s from %s" % (node, recorded.get("address") or "?", recorded.get("controller") or "?")


def record_run(run_id: str, node: str, run_dir: str, data_cache_dir: str,
               cluster: Optional[Mapping[str, str]] = None) -> None:
    """Put the node's run into the run index (atomically), with the identity of the cluster that runs it."""
    path = index_path(run_id, node)
    _atomic.write_json(path, {"run_dir": run_dir, "data_cache_dir": data_cache_dir, "cluster": dict(cluster or {})},
                       makedirs=True)


def indexed_runs(node: str, run_id: str = "") -> Dict[str, Dict[str, Any]]:
    """run id -> {run_dir, data_cache_dir, cluster} of the node's runs in the run index: all, or only `run_id`.

    `cluster` is the recorded ``cluster_identity`` ({} when the entry has none)."""
    directory = os.path.expanduser(RUN_INDEX_DIR)
    suffix = "@%s.json" % quote(node, safe="")
    try:
        names = [os.path.basename(index_path(run_id, node))] if run_id else sorted(os.listdir(directory))
    except OSError:
        return {}
    runs = {}
    for name in (n for n in names if n.endswith(suffix)):
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                entry = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict):
            found: Dict[str, Any] = {key: str(entry.get(key) or "") for key in ("run_dir", "data_cache_dir")}
            cluster = entry.get("cluster")
            found["cluster"] = {key: str(cluster.get(key) or "") for key in ("address", "controller")
                                if cluster.get(key)} if isinstance(cluster, dict) else {}
            runs[unquote(name[:-len(suffix)])] = found
    return runs


def forget_run(run_id: str, node: str) -> bool:
    try:
        os.unlink(index_path(run_id, node))
    except OSError:
        return False
    return True


def release_lock(path: str, run_id: str) -> bool:
    """Remove the lock when `run_id` holds it; True when removed."""
    held = read_lock(path)
    if held is None or held.get("run_id") != run_id:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def labelled(containers: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """{name, id, run_id, state, run_dir, data_cache_dir} of the Docker API's container list items."""
    found = []
    for item in containers:
        labels = item.get("Labels") or {}
        if RUN_ID_LABEL not in labels:
            continue
        names = item.get("Names") or [item.get("Id", "?")[:12]]
        found.append({"name": str(names[0]).lstrip("/"), "id": item.get("Id", ""),
                      "run_id": labels[RUN_ID_LABEL], "state": item.get("State", "unknown"),
                      "run_dir": labels.get(RUN_DIR_LABEL, ""), "data_cache_dir": labels.get(DATA_CACHE_LABEL, "")})
    return found


def occupancy(own_run_id: str, lock: Optional[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]],
              stale_after_s: float, lapsed: Optional[str] = None) -> Dict[str, Any]:
    """Whether another run holds the node: {busy, stale, run_id, controller, started_at, containers, reason}.

    `containers` are `labelled()` items; `lock` is `read_lock()`'s answer; `lapsed`: how the lock's run's lease
    lapsed on this node (`lease_lapsed`), None while it is renewed or not known."""
    others = [c for c in containers if c["run_id"] != own_run_id]
    running = [c for c in others if c["state"] in ("running", "restarting", "paused", "created")]
    other_lock = lock if lock is not None and lock.get("run_id") != own_run_id else None
    holder = running[0]["run_id"] if running else (other_lock or {}).get("run_id")
    answer = {"busy": False, "stale": False, "run_id": holder, "controller": None, "started_at": None,
              "containers": sorted(c["name"] for c in others if c["run_id"] == holder), "reason": ""}
    if other_lock is not None and other_lock.get("run_id") == holder:
        answer.update(controller=other_lock.get("controller"), started_at=other_lock.get("started_at"))
    if running:
        return dict(answer, busy=True, reason="its container%s %s %s running" % (
            "s" if len(answer["containers"]) > 1 else "", ", ".join(answer["containers"]),
            "are" if len(answer["containers"]) > 1 else "is"))
    if other_lock is None:
        return answer
    if answer["containers"] and lapsed:
        return dict(answer, stale=True, reason="its container%s %s exited and %s" % (
            "s" * (len(answer["containers"]) > 1), ", ".join(answer["containers"]), lapsed))
    if answer["containers"]:
        return dict(answer, busy=True, reason="it holds the lock and its containers %s are still there"
                    % ", ".join(answer["containers"]))
    if float(other_lock.get("age_s", 0.0)) < stale_after_s:
        return dict(answer, busy=True, reason="it took the lock %ds ago and has no container yet (preflight or "
                                              "node preparation); a lock is stale after %ds"
                    % (int(other_lock.get("age_s", 0.0)), int(stale_after_s)))
    return dict(answer, stale=True, reason="its lock is %ds old and none of its containers is left"
                % int(other_lock.get("age_s", 0.0)))


def lease_lapsed(lock: Optional[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]],
                 now: Optional[float] = None) -> Optional[str]:
    """How the lease of the lock's run lapsed, from its supervisor's config on the node (its lease files and
    timeout): ``its lease was last renewed 130 s ago (lease timeout 120 s)``; None while a lease file was renewed
    within the timeout, or when the config or the lease files are gone."""
    run_dirs = sorted({c["run_dir"] for c in containers if lock and c["run_id"] == lock.get("run_id") and c["run_dir"]})
    for run_dir in run_dirs:
        try:
            config = _atomic.read_json(os.path.join(run_dir, SUPERVISOR_CONFIG))
        except (OSError, ValueError):
            continue
        if not isinstance(config, dict) or not isinstance(config.get("lease_timeout"), (int, float)):
            continue
        renewed = [mtime for mtime in (modified_at(p) for p in config.get("lease_paths") or []) if mtime is not None]
        if not renewed:
            continue
        quiet = (time.time() if now is None else now) - max(renewed)
        if quiet > float(config["lease_timeout"]):
            return "its lease was last renewed %d s ago (lease timeout %d s)" % (quiet, config["lease_timeout"])
    return None


def modified_at(path: Any) -> Optional[float]:
    try:
        return os.stat(str(path)).st_mtime
    except OSError:
        return None


def busy_detail(node: str, state: Mapping[str, Any]) -> str:
    """The busy check's line: the node, the other run, when and from where it started, why, how to clear."""
    since = ""
    if state.get("started_at"):
        since = " (started %s from %s)" % (state["started_at"], state.get("controller") or "?")
    return ("%s is busy with run %s%s: %s. Stop it with `ansible-playbook -i <inventory> "
            "clusterval.training.teardown -e training_run_id=%s`, or replace it with -e training_takeover=true"
            % (node, state["run_id"], since, state["reason"], state["run_id"]))


def list_labelled(engine: Engine, run_id: str = "") -> List[Dict[str, Any]]:
    """The node's containers (any state) carrying the collection's run-id label, or only `run_id`'s."""
    return labelled(engine.labelled(RUN_ID_LABEL + ("=" + run_id if run_id else "")))


def claim(node: str, socket_path: str, run_id: str, run_dir: str, controller: str, *, take: bool,
          takeover: bool, stale_after_s: float, data_cache_dir: str = "", address: str = "") -> Dict[str, Any]:
    """The busy check of one node, taking the lock (and recording the run in the run index, with the cluster's
    identity: `address` as the inventory gives it and `controller`) when `take`.

    Returns {check, took_over}: `took_over` names the run whose containers the caller removes
    (takeover of a busy node), else None."""
    path = lock_path(run_dir)
    try:
        containers = list_labelled(Engine(socket_path, DOCKER_TIMEOUT_S))
    except (OSError, ValueError) as exc:
        return {"check": _check(False, "cannot list the node's containers at %s: %s" % (socket_path, exc)),
                "took_over": None}
    lock = read_lock(path)
    state = occupancy(run_id, lock, containers, stale_after_s, lease_lapsed(lock, containers))
    if state["busy"] and not takeover:
        return {"check": _check(False, busy_detail(node, state)), "took_over": None}
    replace = state["busy"] or state["stale"] or (lock is not None and lock.get("run_id") == run_id)
    if take and not take_lock(path, lock_record(run_id, controller), replace=replace):
        return claim(node, socket_path, run_id, run_dir, controller, take=take, takeover=takeover,
                     stale_after_s=stale_after_s, data_cache_dir=data_cache_dir, address=address)
    if take:
        record_run(run_id, node, run_dir, data_cache_dir, cluster_identity(address, controller))
    if state["busy"]:
        detail = "takeover (training_takeover=true): run %s%s is torn down before this run starts (%s)" % (
            state["run_id"], " from %s" % state["controller"] if state["controller"] else "", state["reason"])
        return {"check": _check(True, detail), "took_over": state}
    if state["stale"]:
        return {"check": _check(True, "WARNING: took over the stale lock of run %s (started %s from %s): %s"
                                % (state["run_id"], state["started_at"], state["controller"], state["reason"])),
                "took_over": None}
    what = "lock %s taken" % path if take else "no lock at %s" % path
    return {"check": _check(True, "no other run on the node (%s)" % what), "took_over": None}


def _check(ok: bool, detail: str) -> Dict[str, Any]:
    return {"check": "busy", "ok": ok, "detail": detail}
