# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The results document of a run on every path: a verdict, a stop before the verdict, a failed teardown.

``training_assert``'s outcome is the document of a judged run. A run that stopped before it was judged
(preflight, a crash of the controller's tasks) gets a FAIL document with the stop reason as headline and
no metrics. After teardown, each node's outcome is added under ``teardown``; a teardown that failed makes
the run a FAIL (the playbook's rc is then non-zero too, and the report never says PASS).
"""
from __future__ import annotations

import datetime
import os
import re
import shlex
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts, natural_key
from ansible_collections.clusterval.training.plugins.module_utils._report import results_document

RUN_KEYS = ("run_id", "config_name", "framework", "model", "gpu_arch", "mode", "final_step", "total_steps",
            "warmup_steps", "effective_model")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stopped_outcome(plan: Mapping[str, Any], reason: str, stop: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The outcome of a run that never reached its verdict; with ``stop`` (``stop_section``), its headline
    names the stage, the nodes and the cause."""
    outcome: Dict[str, Any] = {key: plan.get(key) for key in RUN_KEYS}
    lead = "FAIL: stopped before the verdict: %s" % reason.strip()
    failures = [reason.strip()]
    if stop:
        lead = "FAIL: stopped in %s: %s" % (stop.get("stage") or "an unknown stage", stop.get("cause") or reason.strip())
        failures = unique_lines([str(stop.get("cause") or "")] + [str(line) for line in stop.get("lines") or []]
                                + ([] if ECHO.search(reason) else [reason.strip()]))
    outcome.update(verdict="FAIL", headline=lead, failures=[line for line in failures if line],
                   checks=[], culprit=None, consequences=[], judged=[], unjudged=[],
                   summary={"nodes": {}, "cluster": {}}, series={}, simulated=bool(plan.get("simulated")))
    return outcome


def unique_lines(lines: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(lines))


# -- where a run stopped -----------------------------------------------------------------------------------

# The stages of train.yml in order, and the prefix of their tasks' names ("Preflight | Probe the node").
STAGES = ("plan", "preflight", "fabric", "node preparation", "container start", "training", "verdict", "teardown",
          "reports")
TASK_STAGES = {"preflight": "preflight", "fabric": "fabric", "node prep": "node preparation",
               "container": "container start", "train": "training", "results": "verdict", "teardown": "teardown"}
# The train role's tasks that ship the supervisor run before node preparation.
SHIP_TASKS = ("Train | What runs each rank", "Train | The run's status directory")
# The results role's tasks that record the plan run while the framework starts.
RECORD_TASKS = ("Results | Keep earlier runs apart", "Results | Run directory and plan.json")
ECHO = re.compile(r"^stopped because another node failed")
INTERRUPTED = "interrupted"


def stage_of_task(name: Any) -> Optional[str]:
    """The stage of a task of train.yml, from its name's prefix (``Role | what``); None when unknown."""
    text = str(name or "").strip()
    role = ""
    if " : " in text:  # as a callback sees it: "clusterval.training.container : Container | ..."
        role, text = (part.strip() for part in text.split(" : ", 1))
        role = role.rsplit(".", 1)[-1].replace("_", " ")
    if not text:
        return None
    if text.startswith(SHIP_TASKS) or "arg spec 'ship'" in text:
        return "node preparation"
    if text.startswith(RECORD_TASKS) or "arg spec 'plan_json'" in text:
        return "training"  # the plan is recorded while the framework starts
    prefix = text.split("|", 1)[0].strip().lower() if "|" in text else role
    return TASK_STAGES.get(prefix, "plan" if text.startswith("Plan the run") else None)


def own_failures(hosts: Mapping[str, Any]) -> Dict[str, Dict[str, str]]:
    """host -> {task, msg} of the nodes that failed on their own (not another node's echo)."""
    found = {}
    for host, info in hosts.items():
        info = info if isinstance(info, dict) else {}
        msg = str(info.get("msg") or "").strip()
        if msg and not ECHO.search(msg):
            found[str(host)] = {"task": str(info.get("task") or ""), "msg": msg}
    return found


# How far a node got when the run failed (train.yml's rescue) -> the stage the run stopped in.
REACHED_STAGES = {"plan": "preflight", "preflight": "preflight", "fabric": "node preparation",
                  "shipped": "node preparation", "training": "training"}


def left_the_play(planned: Sequence[str], hosts: Mapping[str, Any]) -> List[str]:
    """The planned nodes with no record at all while others have one: the rescue never ran on them, because
    they became unreachable (Ansible takes an unreachable node out of the play, rescue and always included)."""
    recorded = {h for h, info in hosts.items()
                if isinstance(info, dict) and any(info.get(k) for k in ("task", "msg", "reached"))}
    return [h for h in planned if recorded and h not in recorded]


def stop_section(plan: Mapping[str, Any], hosts: Mapping[str, Any], active: Optional[Sequence[str]],
                 reason: Optional[str], started: Sequence[str] = (), interrupted: Optional[str] = None,
                 stage: Optional[str] = None, gate: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Where a run stopped before its verdict, from what the playbook knows of each node.

    ``hosts``: host -> {task, msg, reached} (``host_records``); ``active``: the hosts still in the play, when
    known (else a node without any record left the play); ``started``: the nodes whose training started (the
    watch's states); ``interrupted``: the signal or words of the controller's stop; ``stage``: the stage when
    the caller knows it. Returns {stage, cause, hosts (the nodes that stopped it), never_started, lines,
    interrupted}. ``gate``: the fabric gate's verdict, whose FAIL is the gate's, not the node it ran from."""
    planned = sorted((str(h) for h in plan.get("nodes") or {}), key=natural_key)
    own = own_failures(hosts)
    gate_lines, gate_nodes = gate_failure(own, gate)
    if active is not None:
        gone = [h for h in planned if h not in set(active) and h not in own]
    else:
        gone = [h for h in left_the_play(planned, hosts) if h not in own]
    lines = ["%s: unreachable (out of the play before the run's end: no answer over SSH)" % h for h in gone]
    lines += gate_lines + [own[h]["msg"] if names(own[h]["msg"], h) else "%s: %s" % (h, own[h]["msg"])
                           for h in sorted(own, key=natural_key)]
    where = stage or ("fabric" if gate_lines and not own else stage_from_records(hosts, own))
    culprits = sorted(set(gone) | set(own) | set(gate_nodes), key=natural_key)
    if interrupted:
        where = where or "an unknown stage"
        cause = "the controller was interrupted (%s) in %s" % (interrupted, where)
    elif len(lines) == 1:
        cause = lines[0]
    elif culprits:
        cause = busy_cause(culprits, own) or "%d node(s) stopped the run: %s" % (len(culprits),
                                                                                 compact_hosts(culprits, 200))
    else:
        cause = (reason or "").strip() or "the run ended before its verdict"
        if ECHO.search(cause):
            cause = "the run ended before its verdict; no node's own failure was recorded"
    never = [h for h in planned if h not in set(started)]
    return {"stage": where or "an unknown stage", "cause": cause, "hosts": culprits, "never_started": never,
            "lines": lines, "interrupted": interrupted}


def gate_failure(own: Dict[str, Dict[str, str]], gate: Optional[Mapping[str, Any]]) -> Tuple[List[str], List[str]]:
    """The fabric gate's FAIL, recorded on the node its verdict ran from (run_once), taken out of ``own``: its
    line once, and the nodes the gate itself named (none when it singled none out)."""
    msg = str((gate or {}).get("msg") or "").strip() if (gate or {}).get("failed") else ""
    carriers = [host for host, failure in own.items() if msg and failure["msg"] == msg]
    if not carriers:
        return [], []
    for host in carriers:
        own.pop(host)
    named = [str(n.get("name")) for n in (gate or {}).get("named") or []
             if isinstance(n, dict) and n.get("kind") == "node"]
    return [msg], named


# The busy check's line (``_runlock.busy_detail``): `node3 is busy with run <id> (started ...): ...`.
BUSY = re.compile(r"\bis busy with run (\S+?)(?: \(|: )")
TEARDOWN_ADVICE = re.compile(r"Stop it with (`[^`]+`)")


def busy_cause(culprits: Sequence[str], own: Mapping[str, Mapping[str, str]]) -> Optional[str]:
    """Every node that stopped the run is busy with another run: said as such, with the runs that hold them
    and how to free them (``2 nodes are busy with run R: node[3-4]; stop it with `...```)."""
    found = [BUSY.search(own[h]["msg"]) if h in own else None for h in culprits]
    if len(culprits) < 2 or not all(found):
        return None
    runs = sorted({match.group(1) for match in found if match})
    advice = TEARDOWN_ADVICE.search(own[culprits[0]]["msg"]) if len(runs) == 1 else None
    return "%d nodes are busy with run%s %s: %s%s" % (
        len(culprits), "s" * (len(runs) > 1), ", ".join(runs), compact_hosts(list(culprits), 200),
        "; stop it with %s, or replace it with -e training_takeover=true" % advice.group(1) if advice else
        "; stop each with the teardown of its run id (clusterval.training.teardown -e training_run_id=<run id>), "
        "or replace them with -e training_takeover=true")


def names(text: str, host: str) -> bool:
    """Whether a message names the host already (``preflight failed on node2: ...``)."""
    return re.search(r"(?<![\w.-])%s(?![\w-])" % re.escape(host), text) is not None


def stage_from_records(hosts: Mapping[str, Any], own: Mapping[str, Mapping[str, str]]) -> Optional[str]:
    """The stage of the nodes' own failed tasks; else, how far the other nodes got when they were stopped."""
    tasks = [info["task"] for info in own.values()] or [
        str((info or {}).get("task") or "") for info in hosts.values() if isinstance(info, dict)]
    stages = [s for s in (stage_of_task(t) for t in tasks) if s]
    if not stages:
        stages = [REACHED_STAGES[str(info.get("reached"))] for info in hosts.values()
                  if isinstance(info, dict) and str(info.get("reached")) in REACHED_STAGES]
    if not stages:
        return None
    return max(set(stages), key=lambda s: (stages.count(s), -STAGES.index(s)))


def epoch_of_run_id(run_id: Any) -> Optional[float]:
    """The run id starts with its UTC time of planning: 20261121T101500Z-..."""
    match = re.match(r"^(\d{8}T\d{6}Z)", str(run_id or ""))
    if not match:
        return None
    moment = datetime.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


# A judged run's failed checks that say the training itself failed (a node's error, exit, stall, unfinished run,
# non-finite loss); any other failed check (a threshold, a straggler, the loss's trend) fails the verdict.
TRAINING_CHECKS = ("errors", "exit_code", "progress", "completion", "finite")


def failed_stage(verdict: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Where a judged FAIL failed: ``training`` (a node's failure, a run cause), else ``verdict`` (the figures the
    training produced); None for a PASS or a run not judged."""
    if not verdict or verdict.get("verdict") != "FAIL":
        return None
    checks = [c for c in verdict.get("checks") or [] if isinstance(c, Mapping) and c.get("status") == "fail"]
    if verdict.get("culprit") or verdict.get("run_cause") or any(c.get("check") in TRAINING_CHECKS for c in checks):
        return "training"
    return "verdict"


def timeline(plan: Mapping[str, Any], stop: Optional[Mapping[str, Any]], times: Mapping[str, Any],
             judged: bool, teardown: Optional[Mapping[str, Any]], fabric_ran: bool = False,
             failed_at: Optional[str] = None) -> List[Dict[str, Any]]:
    """The run's stages in order, each {stage, outcome (ok|failed|interrupted|not reached|skipped), start, end}.
    ``failed_at``: the stage a judged run failed in (``failed_stage``); a stage not reached has no times.

    ``times``: what is known of when: ``planned`` (the run id's time), ``launched`` (the nodes' containers
    started: the reports' start call), ``watch_started``/``watch_ended`` (the watch's files), ``now``.
    A time not known is None, never guessed."""
    now = float(times.get("now") or time.time())
    stopped_at = (stop or {}).get("stage")
    index = STAGES.index(stopped_at) if stopped_at in STAGES else None
    if stop and index is None:
        index = STAGES.index("training") if times.get("watch_started") else STAGES.index("preflight")
    teardown_failed = any((o or {}).get("unreachable") or (o or {}).get("ok") is False
                          for o in (teardown or {}).values())
    start_of = {"plan": times.get("planned"),
                "training": times.get("watch_started"), "verdict": times.get("watch_ended"),
                "teardown": times.get("watch_ended") if judged else None, "reports": now}
    end_of = {"container start": times.get("launched"), "training": times.get("watch_ended"),
              "teardown": now if teardown is not None else None, "reports": now}
    rows = []
    for position, name in enumerate(STAGES):
        if name == stopped_at and name in ("teardown", "reports"):
            outcome = INTERRUPTED if (stop or {}).get("interrupted") else "failed"
        elif name in ("teardown", "reports"):
            outcome = "failed" if name == "teardown" and teardown_failed else (
                "ok" if name == "reports" or teardown is not None else "not reached")
        elif index is None:
            outcome = "failed" if name == failed_at else "ok" if judged or name != "verdict" else "not reached"
        elif position < index:
            outcome = "ok"
        elif position == index:
            outcome = INTERRUPTED if (stop or {}).get("interrupted") else "failed"
        else:
            outcome = "not reached"
        if name == "fabric" and outcome == "ok" and not fabric_ran:
            outcome = "skipped"
        reached = outcome not in ("not reached", "skipped")
        rows.append({"stage": name, "outcome": outcome, "start": start_of.get(name) if reached else None,
                     "end": end_of.get(name) if reached else None})
    return rows


def teardown_failures(teardown: Mapping[str, Any]) -> List[str]:
    lines = []
    for host in sorted(teardown):
        outcome = teardown[host] or {}
        if outcome.get("unreachable"):
            lines.append("%s: teardown: unreachable (%s)" % (host, outcome.get("msg") or "no answer"))
        elif outcome.get("ok") is False:
            lines.append("%s: teardown: %s" % (host, outcome.get("msg") or "failed"))
    return lines


def with_teardown(outcome: Dict[str, Any], teardown: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The outcome with each node's teardown; a failed one fails the run."""
    if teardown is None:
        return outcome
    result = dict(outcome, teardown=dict(teardown))
    failed = teardown_failures(teardown)
    if failed:
        result["failures"] = list(outcome.get("failures") or []) + failed
        judged = outcome.get("headline") or "FAIL" if outcome.get("verdict") == "FAIL" else "PASS"
        result.update(verdict="FAIL", headline=final_headline(judged, failed))
    return result


def final_headline(headline: str, teardown_failed: Sequence[str], failed_hosts: Sequence[str] = ()) -> str:
    """The run's final headline, its one writer (results.json, the VERDICT line): never PASS when the teardown
    failed (one line per node in ``teardown_failed``) or a host failed after the verdict (the rc is non-zero)."""
    passed = headline.startswith("PASS")
    if teardown_failed:
        if passed:
            return "FAIL: teardown failed: %s" % "; ".join(teardown_failed)
        return "%s; teardown failed on %d node(s)" % (headline or "FAIL", len(teardown_failed))
    if passed and failed_hosts:
        return "FAIL: the run failed after the verdict on %s (see above)" % ", ".join(sorted(failed_hosts))
    return headline


def interrupt_line(signal_name: str, run_id: Optional[str], inventories: Sequence[str],
                   lease_timeout: Optional[object]) -> str:
    """One line: the nodes stop their jobs within the lease timeout, and how to stop them now."""
    within = "train_lease_timeout, %ss" % lease_timeout if lease_timeout not in (None, "") else "train_lease_timeout"
    inventory = " ".join("-i %s" % shlex.quote(str(path)) for path in inventories) or "-i <inventory>"
    which = "-e training_run_id=%s" % shlex.quote(run_id) if run_id else "(every run of the collection)"
    return ("clusterval: %s: the controller stops here; the nodes stop the job%s themselves within the lease timeout "
            "(%s). To stop them now: ansible-playbook %s clusterval.training.teardown %s"
            % (signal_name, " of run %s" % run_id if run_id else "", within, inventory, which))


def document_of(plan: Mapping[str, Any], verdict: Optional[Mapping[str, Any]], stop_reason: Optional[str],
                teardown: Optional[Mapping[str, Any]], run_dir: str, stop: Optional[Mapping[str, Any]] = None,
                stages: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The results document to write: the verdict's, or a stop's, with the teardown, stamped now.
    ``stop`` (``stop_section``) says where a run stopped; ``stages`` is its timeline (``timeline``)."""
    if verdict and verdict.get("verdict"):
        outcome = dict(verdict)
        if stop and stop.get("interrupted"):
            outcome.update(verdict="FAIL", headline="FAIL: stopped in %s: %s" % (stop.get("stage"), stop.get("cause")),
                           failures=unique_lines([str(stop.get("cause"))] + list(outcome.get("failures") or [])))
    else:
        outcome = stopped_outcome(plan, stop_reason or "the run ended before its verdict (see the output)", stop)
    if stop:
        outcome["stop"] = dict(stop)
    if stages is not None:
        outcome["stages"] = stages
    outcome["run_dir"] = run_dir
    return results_document(with_teardown(outcome, teardown), now())


# -- what the run directory knows of the run (the watch's files, the markers of this module) ------------------

WATCH_DIR = "watch"           # _run_watch.WATCH_DIR: watch/<run_id>/ holds one run's files
LAUNCHED_FILE = "launched.json"   # written when every node's container was started (the results role's start)
REPORTED_FILE = "reported.json"   # written with the run's final reports: the guard has nothing left to do
INTERRUPT_FILE = "interrupted.json"  # the signal that stopped the controller (the callback writes it)


def number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_watch_dir(run_dir: str, run_id: str) -> str:
    return os.path.join(run_dir, WATCH_DIR, run_id)


def known_times(run_dir: str, plan: Mapping[str, Any]) -> Dict[str, Optional[float]]:
    """{planned, launched, watch_started, watch_ended, now}: what the run directory says of when (None: not known)."""
    directory = run_watch_dir(run_dir, str(plan.get("run_id") or "run"))
    memory = _atomic.read_json(os.path.join(directory, "run.json"))
    memory = memory if isinstance(memory, dict) else {}
    launched = _atomic.read_json(os.path.join(directory, LAUNCHED_FILE))
    return {"planned": epoch_of_run_id(plan.get("run_id")),
            "launched": number((launched or {}).get("time")) if isinstance(launched, dict) else None,
            "watch_started": number(memory.get("started_at")), "watch_ended": number(memory.get("last_poll_at")),
            "now": time.time()}


def started_hosts(run_dir: str, plan: Mapping[str, Any]) -> List[str]:
    """The nodes whose training started: their rank's start or a step is in the watch's state of the node."""
    directory = run_watch_dir(run_dir, str(plan.get("run_id") or "run"))
    memory = _atomic.read_json(os.path.join(directory, "run.json"))
    states = memory.get("states") if isinstance(memory, dict) and isinstance(memory.get("states"), dict) else {}
    found = []
    for host in plan.get("nodes") or {}:
        state = _atomic.read_json(os.path.join(directory, "%s.json" % host)) or states.get(host)
        if isinstance(state, dict) and (state.get("rank_started_at") is not None or state.get("last_step") is not None):
            found.append(str(host))
    return found


def interruption(run_dir: str, plan: Mapping[str, Any]) -> Optional[str]:
    """The signal the callback recorded when the controller was interrupted (SIGINT, SIGTERM), if any."""
    data = _atomic.read_json(os.path.join(run_watch_dir(run_dir, str(plan.get("run_id") or "run")), INTERRUPT_FILE))
    return str(data.get("signal")) if isinstance(data, dict) and data.get("signal") else None


def host_records(failed_tasks: Optional[Mapping[str, Any]], failures: Optional[Mapping[str, Any]],
                 reached: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """host -> {task, msg, reached}: each node's failed task, its own failure message and how far it got
    (the rescue's records)."""
    hosts = set(failed_tasks or {}) | set(failures or {}) | set(reached or {})
    return {str(h): {"task": (failed_tasks or {}).get(h) or "", "msg": (failures or {}).get(h) or "",
                     "reached": (reached or {}).get(h) or ""} for h in hosts}


def stop_and_stages(plan: Mapping[str, Any], run_dir: str, verdict: Optional[Mapping[str, Any]],
                    stop_reason: Optional[str], hosts: Mapping[str, Any], active: Optional[Sequence[str]],
                    teardown: Optional[Mapping[str, Any]], fabric: Optional[Mapping[str, Any]] = None,
                    interrupted: Optional[str] = None, stage: Optional[str] = None
                    ) -> Tuple[Optional[Dict[str, Any]], List[Dict[str, Any]]]:
    """The stop section (None for a run judged to its end) and the timeline, from the playbook's records, the
    verdict (None: not judged), the fabric gate's verdict and the run directory (the gate's record, when the
    playbook gave none)."""
    judged = bool(verdict and verdict.get("verdict"))
    interrupted = interrupted or interruption(run_dir, plan)
    gate = fabric or recorded_fabric(run_dir, plan)
    stop = None
    if not judged or interrupted:
        stop = stop_section(plan, hosts, active, stop_reason, started_hosts(run_dir, plan), interrupted, stage, gate)
    fabric_ran = gate_ran(gate)
    return stop, timeline(plan, stop, known_times(run_dir, plan), judged and not interrupted, teardown, fabric_ran,
                          failed_stage(verdict))


FABRIC_FILE = "fabric.json"   # the fabric gate's verdict, kept for a report written after an interrupt


def gate_ran(fabric: Optional[Mapping[str, Any]]) -> bool:
    """The fabric gate measured something (a gate that could not run says ``not_run``)."""
    return bool(fabric) and not (fabric or {}).get("not_run")


def record_fabric(run_dir: str, run_id: str, fabric: Mapping[str, Any]) -> None:
    """Keep the fabric gate's verdict in the run's watch directory: the guard's report of an interrupt shows it."""
    _atomic.write_json(os.path.join(run_watch_dir(run_dir, run_id), FABRIC_FILE), dict(fabric), makedirs=True)


def recorded_fabric(run_dir: str, plan: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    data = _atomic.read_json(os.path.join(run_watch_dir(run_dir, str(plan.get("run_id") or "run")), FABRIC_FILE))
    return data if isinstance(data, dict) and data else None


# -- a reused run directory -----------------------------------------------------------------------------------

PREVIOUS_DIR = "previous"
# What a run writes at the top of its run directory (its watch/<run_id>/ is its own already).
RUN_FILES = ("results.json", "junit.xml", "report.html", "plan.json", "logs")


def earlier_run_id(run_dir: str) -> Optional[str]:
    """The run id of the run whose files are at the top of ``run_dir``: its results.json's, else its plan.json's."""
    for name in ("results.json", "plan.json"):
        data = _atomic.read_json(os.path.join(run_dir, name))
        if isinstance(data, dict) and data.get("run_id"):
            return str(data["run_id"])
    return None


def keep_earlier_run(run_dir: str, run_id: str) -> Optional[str]:
    """A run directory given again (``training_run_dir``) keeps each run's files apart: the top holds the latest
    run's; an earlier run's results.json, junit.xml, report.html, plan.json and logs/ move to
    ``previous/<its run id>/``. Returns that directory (None when there was nothing to move)."""
    earlier = earlier_run_id(run_dir)
    present = [name for name in RUN_FILES if os.path.lexists(os.path.join(run_dir, name))]
    if earlier == run_id or not present:
        return None
    label = re.sub(r"[^A-Za-z0-9._-]", "_", earlier or "unknown-%d" % int(time.time()))
    target = os.path.join(run_dir, PREVIOUS_DIR, label)
    suffix = 1
    while os.path.lexists(target):
        suffix += 1
        target = os.path.join(run_dir, PREVIOUS_DIR, "%s.%d" % (label, suffix))
    os.makedirs(target)
    for name in present:
        os.replace(os.path.join(run_dir, name), os.path.join(target, name))
    return target
