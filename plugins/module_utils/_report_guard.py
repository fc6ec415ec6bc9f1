# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The reports of a run whose controller stopped before writing them (Ctrl-C, SIGTERM, AWX's cancel, kill -9).

ansible-playbook runs no ``always:`` after an interrupt, and its workers die with it. So once the run has a
plan, a small process of its own (the guard), in its own session, waits for the controller's process to end.
When the run wrote its final reports (``watch/<run_id>/reported.json``), the guard exits; otherwise it fetches
the nodes' training logs that exist (``playbooks/collect_logs.yml``, through the controller's ansible-playbook
and inventories: the teardown that would have collected them never ran), then writes
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
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.module_utils._results import (
    INTERRUPT_FILE, LAUNCHED_FILE, REPORTED_FILE, keep_earlier_run, recorded_fabric, run_watch_dir, stage_of_task)

GUARD_FILE = "guard.json"
GUARD_LOG = "guard.out"  # its stderr (not a .log: the training logs are the run's .log files)
EXTRA_VARS_ENV = "CLUSTERVAL_GUARD_EXTRA_VARS"
COLLECT_PLAYBOOK = "clusterval.training.collect_logs"
# The bound of the collection of an interrupted run's logs (an unreachable node must not hold the reports back).
COLLECT_TIMEOUT_S = 600.0
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
          python: str = sys.executable, collect: Optional[Mapping[str, Any]] = None) -> Optional[int]:
    """Start the run's guard unless it has one; returns its pid (None when one was there already).

    ``collect``: how the guard reaches the nodes for their logs, as the controller did (``ansible_playbook``,
    ``inventories``, ``cwd``, ``extra_vars``); the extra variables go in the guard's environment, never a file."""
    run_id, run_dir = str(plan.get("run_id") or "run"), os.path.abspath(os.path.expanduser(run_dir))
    directory = run_watch_dir(run_dir, run_id)
    os.makedirs(directory, exist_ok=True)
    try:
        descriptor = os.open(guard_path(run_dir, run_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    collect = dict(collect or {})
    environment = dict(os.environ, **{EXTRA_VARS_ENV: json.dumps(list(collect.pop("extra_vars", None) or []))})
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"controller_pid": int(controller_pid), "run_dir": run_dir, "plan": plan, "time": time.time(),
                   "collect": dict(collect, collection_paths=[os.path.abspath(p) for p in collection_paths])},
                  handle)
    with open(os.path.join(directory, GUARD_LOG), "ab") as log:
        child = subprocess.Popen(  # pylint: disable=consider-using-with  # it outlives this process on purpose
            [python, "-c", CHILD, json.dumps([os.path.abspath(p) for p in collection_paths]),
             guard_path(run_dir, run_id)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            cwd=directory, env=environment)
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
    concluded = _run_watch.conclusion(run_dir, run_id, hosts)
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


def reported(run_dir: str, run_id: str) -> bool:
    """Whether the run wrote its final reports itself."""
    if os.path.exists(os.path.join(run_watch_dir(run_dir, run_id), REPORTED_FILE)):
        return True
    written = _atomic.read_json(os.path.join(run_dir, "results.json"))
    # The final reports (with the teardown), their marker not written (a full disk).
    return isinstance(written, dict) and written.get("run_id") == run_id and written.get("teardown") is not None


def node_logs(plan: Mapping[str, Any]) -> Dict[str, str]:
    """host -> its training log on the node, from the plan."""
    logs = {str(host): node_view(plan, host).get("log_path") for host in plan.get("nodes") or {}}
    return {host: path for host, path in logs.items() if path}


def collect_argv(guard: Mapping[str, Any], extra_vars: Sequence[str]) -> Optional[list]:
    """The controller's ansible-playbook with its inventories and extra variables, running collect_logs.yml for the
    run's nodes; None when the guard does not know how the controller reached them."""
    how = guard.get("collect") or {}
    logs = node_logs(guard["plan"])
    if not how.get("ansible_playbook") or not logs:
        return None
    variables = {"collect_logs": logs, "collect_dir": os.path.join(str(guard["run_dir"]), "logs")}
    inventories = [arg for path in how.get("inventories") or [] for arg in ("-i", str(path))]
    given = [arg for value in extra_vars for arg in ("-e", str(value))]
    return [str(how["ansible_playbook"]), *inventories, *given, "-e", json.dumps(variables), COLLECT_PLAYBOOK]


def collect_logs(guard: Mapping[str, Any]) -> None:
    """The training logs that exist on the nodes of a run stopped before its teardown, fetched to
    ``<run dir>/logs/<host>/training.log`` as the teardown would (nothing on the nodes is touched)."""
    argv = collect_argv(guard, json.loads(os.environ.get(EXTRA_VARS_ENV) or "[]"))
    if argv is None:
        return
    how = guard["collect"]
    environment = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(how.get("collection_paths") or []))
    environment.pop(EXTRA_VARS_ENV, None)
    try:
        subprocess.run(argv, cwd=how.get("cwd") or None, env=environment, stdin=subprocess.DEVNULL,
                       stdout=sys.stderr, stderr=sys.stderr, timeout=COLLECT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write("guard: the nodes' logs were not collected: %s\n" % exc)


def report_stop(guard: Mapping[str, Any], collect: bool = False) -> Optional[Dict[str, Any]]:
    """Write the reports of a run whose controller ended without them, with the nodes' logs first when
    ``collect``; None when the run wrote its own."""
    run_dir, run_id = str(guard["run_dir"]), str(guard["plan"].get("run_id") or "run")
    if reported(run_dir, run_id):
        return None
    # An earlier run's files (its logs/ too) moved aside before this run's logs come.
    keep_earlier_run(run_dir, run_id)
    if collect:
        collect_logs(guard)
    return stop_reports(guard)


def stop_reports(guard: Mapping[str, Any]) -> Dict[str, Any]:
    from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run  # pylint: disable=import-outside-toplevel
    from ansible_collections.clusterval.training.plugins.module_utils._results import stop_and_stages  # pylint: disable=import-outside-toplevel
    plan, run_dir = dict(guard["plan"]), str(guard["run_dir"])
    run_id = str(plan.get("run_id") or "run")
    directory = run_watch_dir(run_dir, run_id)
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


def unreachable_reports(plan: Mapping[str, Any], run_dir: str, unreachable: Mapping[str, Mapping[str, Any]]
                        ) -> Dict[str, Any]:
    """The reports of a run that lost every node over SSH, written by the controller's callback at the
    playbook's end: Ansible takes an unreachable node out of the play, its rescue and always included, so no
    node was left to write them. ``unreachable``: host -> {task, msg} (Ansible's words). When no node answered,
    none stands out: the controller's way to them is the suspect, and the reports name no node."""
    from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run  # pylint: disable=import-outside-toplevel
    from ansible_collections.clusterval.training.plugins.module_utils._results import stop_and_stages  # pylint: disable=import-outside-toplevel
    records = {str(host): {"task": str(info.get("task") or ""), "msg": "unreachable (%s)" % ssh_error(info.get("msg")),
                           "reached": ""} for host, info in unreachable.items()}
    stop, stages = stop_and_stages(plan, run_dir, None, None, records, [], None)
    stop = dict(stop or {})
    planned = sorted(str(host) for host in plan.get("nodes") or {})
    if len(planned) > 1 and set(planned) <= set(records):
        stop.update(hosts=[], cause="no node answered over SSH (%s); no node stands out: the controller's way to "
                                    "them (address, user, key, network) is the first suspect" % compact_hosts(planned))
    if stop.get("stage") not in ("plan", "preflight"):
        stop["cause"] = "%s; %s" % (stop.get("cause"), how_nodes_stop(str(stop.get("stage"))))
    written = reported_run(plan, run_dir, None, stop["cause"], None, extra=None, stop=stop, stages=stages)
    if written["paths"].get("results.json"):
        try:
            mark(run_dir, str(plan.get("run_id") or "run"), REPORTED_FILE, {"time": time.time(), "by": "playbook"})
        except OSError:
            pass  # results.json says the run reported itself (``reported``)
    return written


def ssh_error(msg: Any) -> str:
    """SSH's own words from Ansible's unreachable message (``... reached over ssh: ssh: connect to host ...``)."""
    text = " ".join(str(msg or "no answer over SSH").split())
    head, found, tail = text.partition("can be reached over ssh: ")
    return (tail if found and tail else head).rstrip(".")


def main(argv: Sequence[str]) -> int:
    guard = _atomic.read_json(argv[0])
    if not isinstance(guard, dict) or not isinstance(guard.get("plan"), dict):
        sys.stderr.write("guard: no guard file at %s\n" % argv[0])
        return 2
    wait_for(int(guard["controller_pid"]))
    written = report_stop(guard, collect=True)
    if written is not None:
        sys.stderr.write("guard: %s\n" % written["document"]["headline"])
        mark(str(guard["run_dir"]), str(guard["plan"].get("run_id") or "run"), REPORTED_FILE,
             {"time": time.time(), "by": "guard"})
    return 0


def how_nodes_stop(stage: str) -> str:
    """What stops the nodes' jobs now: the lease, once a node's container started; before the gang start a node
    that pulled its image leaves the wait to the gang timeout (``train_gang_lease``)."""
    if stage in ("node preparation", "container start"):
        return ("every container that started stops itself within the lease timeout (train_lease_timeout; "
                "train_gang_timeout where a node pulled its image) and removes the HF token's copy; a teardown "
                "stops it now and cleans a node whose container never started")
    return "the nodes stop their jobs themselves within the lease timeout"
