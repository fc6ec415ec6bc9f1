# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The reports of a run whose controller stopped before writing them (Ctrl-C, SIGTERM, AWX's cancel, kill -9).

ansible-playbook runs no ``always:`` after an interrupt, and its workers die with it. So once the run has a
plan, a small process of its own (the guard), in its own session, waits for the controller's process to end.
When the run wrote its final reports (``watch/<run_id>/reported.json``), the guard exits; otherwise it writes
``results.json``, ``junit.xml`` and ``report.html`` with what the run directory knows: the stage it stopped in,
the signal when the callback recorded it, the nodes whose training never started, and, when the training was
watched, the verdict of the same path as ``training_assert`` (``_run_watch.conclude``, the one decision),
never a second one. Then it exits. One guard per run (``guard.json``, created exclusively); it holds nothing
on any node: the nodes stop their jobs themselves when the lease lapses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _room
from ansible_collections.clusterval.training.plugins.module_utils._results import (
    INTERRUPT_FILE, LAUNCHED_FILE, REPORTED_FILE, keep_earlier_run, recorded_fabric, run_watch_dir, stage_of_task)

GUARD_FILE = "guard.json"
GUARD_LOG = "guard.out"  # its stderr (not a .log: the training logs are the run's .log files)
POLL_S = 0.5
# The guard never outlives this (a controller that never ends: the run's deadline is far shorter).
MAX_WAIT_S = 7 * 24 * 3600.0
CHILD = ("import sys, json\n"
         "from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder\n"
         "_AnsibleCollectionFinder(paths=json.loads(sys.argv[1]), scan_sys_paths=False)._install()\n"
         "from ansible_collections.clusterval.training.plugins.module_utils._report_guard import main\n"
         "sys.exit(main(sys.argv[2:]))\n")


def guard_path(run_dir: str, run_id: str) -> str:
    return os.path.join(run_watch_dir(run_dir, run_id), GUARD_FILE)


def mark(run_dir: str, run_id: str, name: str, data: Mapping[str, Any]) -> None:
    """A marker of the run (launched.json, reported.json, interrupted.json) in its watch directory."""
    _atomic.write_json(os.path.join(run_watch_dir(run_dir, run_id), name), dict(data), makedirs=True)


def spawn(plan: Mapping[str, Any], run_dir: str, controller_pid: int, collection_paths: Sequence[str],
          python: str = sys.executable) -> Optional[int]:
    """Start the run's guard unless it has one; returns its pid (None when one was there already)."""
    run_id, run_dir = str(plan.get("run_id") or "run"), os.path.abspath(os.path.expanduser(run_dir))
    directory = run_watch_dir(run_dir, run_id)
    os.makedirs(directory, exist_ok=True)
    try:
        descriptor = os.open(guard_path(run_dir, run_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"controller_pid": int(controller_pid), "run_dir": run_dir, "plan": plan, "time": time.time()},
                  handle)
    with open(os.path.join(directory, GUARD_LOG), "ab") as log:
        child = subprocess.Popen(  # pylint: disable=consider-using-with  # it outlives this process on purpose
            [python, "-c", CHILD, json.dumps([os.path.abspath(p) for p in collection_paths]),
             guard_path(run_dir, run_id)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            cwd=directory)
    return child.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for(pid: int, poll_s: float = POLL_S, limit_s: float = MAX_WAIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(poll_s)


def earlier_verdict(run_dir: str, run_id: str) -> Optional[Dict[str, Any]]:
    """The verdict this run wrote before it was stopped (training_assert's, in results.json), if any."""
    document = _atomic.read_json(os.path.join(run_dir, "results.json"))
    if isinstance(document, dict) and document.get("run_id") == run_id and document.get("checks") is not None \
            and not document.get("stop"):
        return document
    return None


def watched_verdict(plan: Dict[str, Any], run_dir: str) -> Optional[Dict[str, Any]]:
    """The verdict on what the watch saw, by training_assert's own path (the one decision) and by the policy the
    run was started with (``_policy``); None without a watch."""
    from ansible_collections.clusterval.training.plugins.module_utils import _policy, _run_watch  # pylint: disable=import-outside-toplevel
    run_id = str(plan.get("run_id") or "run")
    if not os.path.exists(os.path.join(run_watch_dir(run_dir, run_id), "run.json")):
        return None
    directory = run_watch_dir(run_dir, run_id)
    memory = _atomic.read_json(os.path.join(directory, "run.json"))
    hosts = list(plan.get("nodes") or {})
    if isinstance(memory, dict) and isinstance(memory.get("states"), dict) and not any(
            os.path.exists(_run_watch.state_path(directory, host)) for host in hosts):
        # The watch was stopped between two polls: its states as it would have saved them at its end.
        _run_watch.save_states(directory, memory["states"], memory)
    concluded = _run_watch.conclude(run_dir, run_id, hosts)
    states = concluded.pop("states")
    outcome = _policy.read(directory).judge(plan, states, concluded)
    keys = ("run_id", "config_name", "config_path", "framework", "model", "gpu_arch", "mode", "final_step",
            "total_steps")
    outcome.update({key: plan.get(key) for key in keys})
    return outcome


def stopped_stage(run_dir: str, run_id: str, interrupted: Mapping[str, Any]) -> str:
    """Where the controller stopped: the task the callback saw, else what the run directory shows."""
    stage = stage_of_task(interrupted.get("task"))
    if stage:
        return stage
    directory = run_watch_dir(run_dir, run_id)
    if os.path.exists(os.path.join(directory, "run.json")) or os.path.exists(os.path.join(directory, LAUNCHED_FILE)):
        return "training"
    return "an early stage (before training)"


def report_stop(guard: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """Write the reports of a run whose controller ended without them; None when the run wrote its own."""
    from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run  # pylint: disable=import-outside-toplevel
    from ansible_collections.clusterval.training.plugins.module_utils._results import stop_and_stages  # pylint: disable=import-outside-toplevel
    plan, run_dir = dict(guard["plan"]), str(guard["run_dir"])
    run_id = str(plan.get("run_id") or "run")
    directory = run_watch_dir(run_dir, run_id)
    if os.path.exists(os.path.join(directory, REPORTED_FILE)):
        return None
    written = _atomic.read_json(os.path.join(run_dir, "results.json"))
    if isinstance(written, dict) and written.get("run_id") == run_id and written.get("teardown") is not None:
        return None  # the final reports (with the teardown), their marker not written (a full disk)
    keep_earlier_run(run_dir, run_id)
    interrupted = _atomic.read_json(os.path.join(directory, INTERRUPT_FILE))
    interrupted = interrupted if isinstance(interrupted, dict) else {}
    signal_name = str(interrupted.get("signal") or "") or "ended without its reports: killed, or lost"
    verdict = earlier_verdict(run_dir, run_id)
    if verdict is None:
        try:
            verdict = watched_verdict(plan, run_dir)
        except Exception as exc:  # pylint: disable=broad-except  # the reports of the stop are written anyway
            sys.stderr.write("guard: no verdict on the watched states: %r\n" % (exc,))
    stage = stopped_stage(run_dir, run_id, interrupted)
    stop, stages = stop_and_stages(plan, run_dir, verdict, None, {}, None, None, interrupted=signal_name, stage=stage)
    how = "was interrupted (%s)" % interrupted["signal"] if interrupted.get("signal") else signal_name
    cause = "the controller (ansible-playbook, pid %s) %s in %s; %s" % (
        guard.get("controller_pid"), how, stage, how_nodes_stop(stage))
    stop = dict(stop or {}, cause=cause)
    fabric = recorded_fabric(run_dir, plan)
    written = reported_run(plan, run_dir, verdict, stop["cause"], None, extra={"fabric": fabric} if fabric else None,
                           stop=stop, stages=stages)
    _room.release_all(run_dir)
    return written


def main(argv: Sequence[str]) -> int:
    guard = _atomic.read_json(argv[0])
    if not isinstance(guard, dict) or not isinstance(guard.get("plan"), dict):
        sys.stderr.write("guard: no guard file at %s\n" % argv[0])
        return 2
    wait_for(int(guard["controller_pid"]))
    written = report_stop(guard)
    if written is not None:
        sys.stderr.write("guard: %s\n" % written["document"]["headline"])
        mark(str(guard["run_dir"]), str(guard["plan"].get("run_id") or "run"), REPORTED_FILE,
             {"time": time.time(), "by": "guard"})
    return 0


def how_nodes_stop(stage: str) -> str:
    """What stops the nodes' jobs now: the lease once the gang start came; before it (the containers starting),
    a container waits for the gang start until the gang timeout."""
    if stage in ("node preparation", "container start"):
        return ("a container that started waits for the gang start until its gang timeout (train_gang_timeout), "
                "then stops itself; a teardown stops it now")
    return "the nodes stop their jobs themselves within the lease timeout"
