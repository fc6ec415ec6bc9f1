# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Isolation of a failed or slow run: short training jobs on halves of the nodes, then halves of the bad half.

A lock-step job (every rank waits for the slowest at each step's collective) makes the whole cluster as slow as
its slowest node, so the verdict of one run cannot name it. Re-running the same config for a few steps on
subsets of the nodes can: a subset without the bad node runs at the healthy rate, one with it does not.

The decision is pure and replayable from the measurements alone (``judge``, ``decide``, ``next_groups``,
``conclude``); ``run_subrun`` runs one subset through ``playbooks/train.yml`` (the same machinery as any run:
preflight, containers, watch, verdict, teardown on every path).

Rules:

- A group is *healthy* when its run passed, or its throughput is within ``slow_pct`` of the best group's and
  not below the config's expected value (the sub-run's own threshold check); *slow* when it is more than
  ``slow_pct`` below the best group measured so far; *below expected* when it is alike with the best but the
  sub-run's threshold check failed; *failed* when its run failed for another reason (its headline is the
  evidence; a culprit its verdict names is taken as it is). Judgements are recomputed from every
  measurement after each round, so a later, faster group can turn an earlier one slow.
- Every member of a healthy group is *cleared*. A bad group with exactly one member not cleared names that
  member; with none, the cause lies between its members (or is intermittent); with more, those are split in
  halves for the next round.
- A job that spans nodes needs ``min_nodes`` of them (2 for a multi-node config: one node alone runs no
  inter-node collective, so a bad NIC or link would pass). A half smaller than that is completed with cleared
  nodes; before any node is cleared it cannot be tested.
- No group healthy and no group can be formed: the subsets are slow or fail alike, a shared cause (the
  config, the software, what every node shares) or a bad node in every half; no node is named.
- Every group healthy: no subset reproduces the fault; it needs the whole set (the fabric between the halves
  at full size) or it is intermittent.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import time
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ClustervalError
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE

SCHEMA_VERSION = 1
DEFAULT_SLOW_PCT = 10.0
HEALTHY, SLOW, BELOW, FAILED, NOT_RUNNABLE = "healthy", "slow", "below_expected", "failed", "not_runnable"
BAD = (SLOW, BELOW, FAILED)
# Checks of a sub-run that are not a failure of its own: the throughput ones (its figure is judged here, against
# the other subsets), and the loss trend, which a run of a few steps cannot show (a NaN is the finite check).
RATE_CHECKS = ("threshold", "straggler", "convergence")


class IsolateError(ClustervalError):
    """Bad input to the isolation, with the variable it came from."""


# ------------------------------------------------------------------ sizes
def min_nodes(mode: str, requested: Optional[int] = None) -> int:
    """Nodes one job needs: a multi-node config is not tested on one node alone (no inter-node collective)."""
    if requested:
        if requested < 1:
            raise IsolateError("isolate_min_nodes: expected a number >= 1, found %r" % requested)
        return int(requested)
    return 2 if mode == "multi_node" else 1


def default_max_rounds(count: int) -> int:
    """About log2(N) rounds, and two more for completing halves and confirming."""
    return int(math.ceil(math.log(max(count, 2), 2))) + 2


def check_nodes(nodes: Sequence[str], needed: int) -> None:
    if len(set(nodes)) != len(nodes):
        raise IsolateError("training_hosts: expected distinct hosts, found %s" % ", ".join(nodes))
    if len(nodes) < max(2, needed + 1):
        raise IsolateError(
            "training_hosts: isolation runs the config on subsets of the nodes, of at least %d node(s) each (a job "
            "of this config needs %d), so it needs at least %d hosts, found %d (%s)"
            % (needed, needed, max(2, needed + 1), len(nodes), ", ".join(nodes) or "none"))


# ------------------------------------------------------------------ one sub-run's figures
def rate_metric(document: Mapping[str, Any]) -> Optional[str]:
    cluster = ((document.get("summary") or {}).get("cluster") or {})
    return next((m for m in THROUGHPUT_PREFERENCE if isinstance((cluster.get(m) or {}).get("min"), (int, float))),
                None)


def measure(document: Optional[Mapping[str, Any]], rc: Optional[int], tail: Sequence[str],
            timed_out: bool = False, plan_failed: bool = False) -> Dict[str, Any]:
    """What one sub-run showed: its throughput (the slowest node's steady mean: in lock-step, the job's pace),
    step time, expected value, verdict, culprit; or why it did not measure anything."""
    if document is None:
        why = "timed out" if timed_out else "stopped before its verdict (exit %s)" % rc
        last = " ".join(line.strip() for line in tail[-2:])
        if plan_failed:
            return {"outcome": NOT_RUNNABLE, "verdict": None, "detail": "cannot run on this subset: %s" % last}
        return {"outcome": FAILED, "verdict": None, "detail": "%s%s" % (why, ": %s" % last if last else "")}
    cluster = (document.get("summary") or {}).get("cluster") or {}
    metric = rate_metric(document)
    rate = cluster[metric]["min"] if metric else None
    step = (cluster.get("step_time_seconds") or cluster.get("seconds") or {}).get("max")
    failed_checks = [c for c in document.get("checks") or [] if c.get("status") == "fail"]
    threshold = [c for c in failed_checks if c.get("check") == "threshold" and c.get("metric") == metric]
    expected = next((c.get("expected") for c in document.get("checks") or []
                     if c.get("check") == "threshold" and c.get("metric") == metric
                     and isinstance(c.get("expected"), (int, float))), None)
    own = [c for c in failed_checks if c.get("check") not in RATE_CHECKS]
    culprit = (document.get("culprit") or {}).get("host")
    headline = document.get("headline") or "; ".join(document.get("failures") or [])[:300] or None
    result = {"outcome": "measured", "verdict": document.get("verdict"), "metric": metric, "rate": rate,
              "step_seconds": step, "expected": expected, "below_expected": bool(threshold),
              "culprit": culprit, "headline": headline, "simulated": bool(document.get("simulated"))}
    if document.get("verdict") == "FAIL" and (own or culprit or (rate is None and not threshold)
                                              or document.get("controller_faults")):
        result.update(outcome=FAILED, detail=headline or "FAIL")
    elif timed_out:
        result.update(outcome=FAILED, detail="timed out")
    return result


# ------------------------------------------------------------------ judging every group measured so far
def fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return "%.4g" % value if abs(value) < 1000 else "%.0f" % value


def label(hosts: Sequence[str]) -> str:
    return compact_hosts(hosts)


def judge(groups: List[Dict[str, Any]], slow_pct: float) -> Optional[Dict[str, Any]]:
    """Sets every group's ``judgement`` and ``why`` from all measurements; returns the best group (or None)."""
    rated = [g for g in groups if g.get("outcome") == "measured" and isinstance(g.get("rate"), (int, float))]
    best = max(rated, key=lambda g: g["rate"]) if rated else None
    for group in groups:
        outcome, metric = group.get("outcome"), group.get("metric") or "throughput"
        if outcome in (FAILED, NOT_RUNNABLE):
            group["judgement"], group["why"] = outcome, group.get("detail") or outcome
            continue
        rate = group.get("rate")
        if rate is None:
            ok = group.get("verdict") == "PASS"
            group["judgement"] = HEALTHY if ok else FAILED
            group["why"] = "passed (no throughput figure)" if ok else (group.get("headline") or "FAIL")
            continue
        floor = best["rate"] * (1 - slow_pct / 100.0)
        if best is not group and rate < floor:
            group["judgement"] = SLOW
            group["why"] = "%s %s, %.0f%% below %s (%s)" % (
                fmt(rate), metric, 100.0 * (1 - rate / best["rate"]), label(best["hosts"]), fmt(best["rate"]))
        elif group.get("below_expected"):
            group["judgement"] = BELOW
            group["why"] = "%s %s, below the expected %s" % (fmt(rate), metric, fmt(group.get("expected")))
        else:
            group["judgement"] = HEALTHY
            group["why"] = "%s %s%s" % (fmt(rate), metric, " (the best)" if best is group else
                                        ", within %g%% of the best" % slow_pct)
    return best


# ------------------------------------------------------------------ what the groups say about each node
def decide(nodes: Sequence[str], groups: Sequence[Mapping[str, Any]], needed: int = 0) -> Dict[str, Any]:
    """Cleared nodes, named nodes with their evidence, the sets still to split, and bad groups that name no one.
    With ``needed``, groups all alike and no expected rate are split further while halves need no completion."""
    order = {host: index for index, host in enumerate(nodes)}
    judged = [g for g in groups if g.get("judgement") not in (None, NOT_RUNNABLE)]
    healthy = [g for g in judged if g["judgement"] == HEALTHY]
    cleared = sorted({h for g in healthy for h in g["hosts"]}, key=order.get)
    named: Dict[str, Dict[str, Any]] = {}
    between: List[Dict[str, Any]] = []
    open_sets: List[Tuple[str, ...]] = []
    for group in (g for g in judged if g["judgement"] in BAD):
        suspects = [h for h in group["hosts"] if h not in cleared]
        culprit = group.get("culprit")
        if group["judgement"] == FAILED and culprit in suspects:
            suspects = [culprit]
        if len(suspects) == 1:
            named.setdefault(suspects[0], {"host": suspects[0], "groups": []})["groups"].append(group)
        elif not suspects:
            between.append(group)
        else:
            open_sets.append(tuple(suspects))
    open_sets = minimal_sets([s for s in open_sets if not set(s) & set(named)])
    bad = [g for g in judged if g["judgement"] in BAD]
    alike = bool(judged) and not bad and all(g.get("expected") is None for g in judged)
    if not bad and judged:
        rest = tuple(h for h in nodes if h not in cleared)
        if rest:
            open_sets = [rest]  # a hypothesis: the run under isolation was bad; not evidence against a node
        elif alike and needed:
            # Alike, with no expected rate: every group may be slow alike (a bad node in each). Smaller groups
            # (no completion needed) may still differ.
            open_sets = [tuple(g["hosts"]) for g in healthy if len(g["hosts"]) >= 2 * needed]
    elif not judged:
        open_sets = [tuple(nodes)]
    return {"cleared": cleared, "named": [evidence(entry, cleared, healthy) for entry in named.values()],
            "open": [list(s) for s in open_sets], "between": between, "bad": bad, "healthy": healthy,
            "judged": judged, "alike": alike}


def minimal_sets(sets: Sequence[Tuple[str, ...]]) -> List[Tuple[str, ...]]:
    unique = sorted(set(sets), key=lambda s: (len(s), s))
    return [s for s in unique if not any(set(other) < set(s) for other in unique)]


def evidence(entry: Mapping[str, Any], cleared: Sequence[str], healthy: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    host, groups = entry["host"], entry["groups"]
    bad = "; ".join("%s %s: %s" % (label(g["hosts"]), g["judgement"].replace("_", " "), g["why"]) for g in groups)
    partners = sorted({h for g in groups for h in g["hosts"] if h != host})
    cleared_by = [g for g in healthy if set(g["hosts"]) & set(partners)]
    alibi = ("; the others in those groups (%s) ran healthy without it (%s)" % (
        label(partners), "; ".join("%s: %s" % (label(g["hosts"]), g["why"]) for g in cleared_by))
        if partners and cleared_by else "")
    direct = [g for g in groups if g.get("culprit") == host]
    if direct:
        alibi += "; the verdict of %s names it" % label(direct[0]["hosts"])
    return {"host": host, "groups": [g["name"] for g in groups],
            "evidence": "%s is bad in every group it joined: %s%s" % (host, bad, alibi)}


# ------------------------------------------------------------------ the next round
def next_groups(nodes: Sequence[str], decision: Mapping[str, Any], tested: Sequence[FrozenSet[str]],
                needed: int) -> Tuple[List[Dict[str, Any]], List[List[str]]]:
    """The groups of the next round (halves of each open set, completed with cleared nodes up to ``needed``)
    and the open sets that cannot be split any further."""
    order = {host: index for index, host in enumerate(nodes)}
    cleared = list(decision["cleared"])
    used: List[str] = []
    groups: List[Dict[str, Any]] = []
    stuck: List[List[str]] = []
    seen = set(tested)
    for suspects in decision["open"]:
        halves = [suspects[:(len(suspects) + 1) // 2], suspects[(len(suspects) + 1) // 2:]]
        formed = 0
        for half in (h for h in halves if h):
            pad = padding(cleared, used, needed - len(half))
            if pad is None:
                continue
            hosts = sorted(half + pad, key=order.get)
            if frozenset(hosts) in seen:
                continue
            seen.add(frozenset(hosts))
            used.extend(pad)
            groups.append({"hosts": hosts, "tested": list(half), "pad": pad})
            formed += 1
        if not formed:
            stuck.append(list(suspects))
    return groups, stuck


def padding(cleared: Sequence[str], used: Sequence[str], count: int) -> Optional[List[str]]:
    """``count`` cleared nodes, those not yet used in this round first (so that the groups can run at once)."""
    if count <= 0:
        return []
    if len(cleared) < count:
        return None
    return ([h for h in cleared if h not in used] + [h for h in cleared if h in used])[:count]


def waves(groups: Sequence[Mapping[str, Any]]) -> List[List[Mapping[str, Any]]]:
    """Groups that share no node run at the same time; the others wait for the next wave."""
    packed: List[List[Mapping[str, Any]]] = []
    for group in groups:
        for wave in packed:
            if not any(set(group["hosts"]) & set(other["hosts"]) for other in wave):
                wave.append(group)
                break
        else:
            packed.append([group])
    return packed


# ------------------------------------------------------------------ the answer
def conclude(nodes: Sequence[str], decision: Mapping[str, Any], stuck: Sequence[Sequence[str]],
             groups: Sequence[Mapping[str, Any]], rounds_left: bool) -> Dict[str, Any]:
    named = decision["named"]
    bad, healthy, judged = decision["bad"], decision["healthy"], decision["judged"]
    unrunnable = [g for g in groups if g.get("judgement") == NOT_RUNNABLE]
    if named:
        text = "; ".join(n["evidence"] for n in named)
        kind = "named"
    elif not judged and unrunnable:
        kind = "undetermined"
        text = "no subset could run this config (%s): %s" % (
            label(unrunnable[0]["hosts"]), unrunnable[0].get("why"))
    elif bad and not healthy:
        kind = "shared"
        text = ("every subset tested is bad alike (%s): no node stands out; the cause is shared (the config, the "
                "software, what every node shares) or a bad node sits in every half"
                % "; ".join("%s %s" % (label(g["hosts"]), g["why"]) for g in bad))
    elif decision["between"]:
        group = decision["between"][0]
        kind = "between"
        said = (label(group["hosts"]), group["judgement"].replace("_", " "), group["why"])
        text = ("%s is %s (%s) while each of its nodes ran healthy in another group: the cause lies between them "
                "(a link) or comes and goes" % said)
    elif decision["open"] and (stuck or not rounds_left) and not decision.get("alike"):
        kind = "undetermined"
        text = "not narrowed below %s: %s" % (
            "; ".join(label(s) for s in decision["open"]),
            "no more rounds (isolate_max_rounds)" if not rounds_left else
            "a half is smaller than a job needs and no node is known healthy to complete it")
    else:
        kind = "healthy"
        text = ("every subset ran healthy (%s)%s: no subset of the nodes reproduces the fault; it needs all %d "
                "nodes together (the fabric between the halves at full size) or comes and goes"
                % ("; ".join("%s %s" % (label(g["hosts"]), g["why"]) for g in healthy),
                   ", alike, with no expected rate to compare (no threshold, no baseline)"
                   if decision.get("alike") else "", len(nodes)))
    return {"kind": kind, "failed": kind != "healthy", "named": [n["host"] for n in named],
            "evidence": named, "text": text}


def headline(conclusion: Mapping[str, Any]) -> str:
    if conclusion["kind"] == "named":
        return "ISOLATION: %s named: %s" % (label(conclusion["named"]), conclusion["text"])
    return "ISOLATION: no node named (%s): %s" % (conclusion["kind"], conclusion["text"])


# ------------------------------------------------------------------ console lines
def group_line(group: Mapping[str, Any]) -> str:
    pad = " (with %s, healthy)" % label(group["pad"]) if group.get("pad") else ""
    step = group.get("step_seconds")
    return "isolate round %d %s%s: %s%s - %s [%ss]" % (
        group["round"], label(group["tested"]), pad, (group.get("judgement") or "?").upper().replace("_", " "),
        "" if step is None else " (step %s s)" % fmt(step), group.get("why") or "", fmt(group.get("seconds")))


def report_lines(document: Mapping[str, Any]) -> List[str]:
    lines = []
    for entry in document["rounds"]:
        lines.extend(group_line(g) for g in entry["groups"])
    lines.append(headline(document["conclusion"]))
    if document["conclusion"].get("advice"):
        lines.append("next step: %s" % document["conclusion"]["advice"])
    lines.append("isolation: %d round(s), %d run(s), %ss: %s" % (
        len(document["rounds"]), sum(len(r["groups"]) for r in document["rounds"]), fmt(document["seconds"]),
        os.path.join(document["run_dir"], "isolation.json")))
    return lines


# ------------------------------------------------------------------ the recommendation a verdict gives
def isolation_advice(reason: str, inventories: Sequence[str], config: str, hosts_pattern: str,
                     extra_vars: Optional[Mapping[str, str]] = None) -> str:
    """What a verdict says when it cannot name the culprit (a lock-step hang, a cluster slow as a whole): re-run
    the same config for a few steps on halves of the run's hosts - the exact command, every value quoted."""
    argv = ["ansible-playbook"]
    for inventory in inventories:
        argv += ["-i", inventory]
    argv += ["clusterval.training.isolate", "-e", "training_config=%s" % config,
             "-e", "training_hosts=%s" % hosts_pattern]
    for key, value in sorted((extra_vars or {}).items()):
        argv += ["-e", "%s=%s" % (key, value)]
    return ("%s. To find the node, re-run the same config for a few steps on halves of the nodes, then halves "
            "of the bad half (about log2(N) rounds): %s" % (reason.rstrip(". "), " ".join(shlex.quote(a)
                                                                                          for a in argv)))


def fabric_command(inventories: Sequence[str], config: str, hosts: Sequence[str]) -> str:
    """The fabric gate with pairs on the isolated hosts: where no subset of the nodes is bad on its own."""
    argv = ["ansible-playbook"]
    for inventory in inventories:
        argv += ["-i", inventory]
    argv += ["clusterval.training.fabric", "-e", "training_config=%s" % config, "-e",
             "training_hosts=%s" % ":".join(hosts), "-e", "fabric_pairs=always"]
    return " ".join(shlex.quote(a) for a in argv)


def advice(conclusion: Mapping[str, Any], inventories: Sequence[str], config: str, hosts: Sequence[str]) -> str:
    if conclusion["kind"] == "named":
        return ""
    return ("check each node and measure the fabric in pairs of nodes (rccl-tests, minutes, no training): %s"
            % fabric_command(inventories, config, hosts))


# ------------------------------------------------------------------ running one subset through train.yml
def subrun_argv(ansible_playbook: str, playbook: str, cli: Mapping[str, Any], defaults: Mapping[str, Any],
                forced: Mapping[str, Any]) -> List[str]:
    """The sub-run's command: the isolation's own inventories and options, ``defaults`` (that the user's -e may
    change), the user's -e as given, then ``forced`` (the subset, its run directory and id)."""
    argv = [ansible_playbook]
    for source in cli.get("inventory") or ():
        argv += ["-i", str(source)]
    for option, flag in (("forks", "--forks"), ("private_key_file", "--private-key"), ("remote_user", "--user"),
                         ("become_user", "--become-user"), ("become_method", "--become-method")):
        if cli.get(option):
            argv += [flag, str(cli[option])]
    if cli.get("become"):
        argv.append("--become")
    for path in cli.get("vault_password_files") or ():
        argv += ["--vault-password-file", str(path)]
    for vault_id in cli.get("vault_ids") or ():
        argv += ["--vault-id", str(vault_id)]
    argv.append(playbook)
    if defaults:
        argv += ["-e", json.dumps(dict(defaults), sort_keys=True)]
    for extra in cli.get("extra_vars") or ():
        argv += ["-e", str(extra)]
    argv += ["-e", json.dumps(dict(forced), sort_keys=True)]
    return argv


def read_results(run_dir: str) -> Optional[Dict[str, Any]]:
    try:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


FATAL = re.compile(r"^(fatal|failed): \[")
TASK = re.compile(r"^TASK \[(.*)\]")


def log_facts(text: str) -> Tuple[List[str], bool]:
    """The log's last meaningful lines and whether the run failed at planning (before any node was touched)."""
    lines = [line for line in text.splitlines() if line.strip()]
    task, plan_failed = None, False
    for line in lines:
        heading = TASK.match(line)
        if heading:
            task = heading.group(1)
        elif FATAL.match(line) and task is not None:
            plan_failed = task.endswith("Plan the run")
            break
    fatal = [line for line in lines if FATAL.match(line) or '"msg":' in line]
    return (fatal or lines)[-3:], plan_failed


def stop(proc: Any, grace: float = 60.0) -> None:
    """Interrupt a sub-run as Ctrl-C would (its rescue and teardown run), then kill it after ``grace``."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except (OSError, subprocess.TimeoutExpired):
            continue


def run_wave(wave: Sequence[Dict[str, Any]], argv_for: Callable[[Mapping[str, Any]], List[str]],
             timeout: float, env: Optional[Mapping[str, str]] = None, clock: Callable[[], float] = time.monotonic,
             popen: Callable[..., Any] = subprocess.Popen) -> None:
    """Run the wave's groups at once, each to its end or ``timeout``; fills each group's figures in place.
    Whatever happens here (an exception, an interrupt), no sub-run is left running."""
    started = clock()
    running = []
    try:
        for group in wave:
            os.makedirs(group["run_dir"], exist_ok=True)
            log = open(os.path.join(group["run_dir"], "ansible-playbook.log"), "w", encoding="utf-8")
            with log:
                proc = popen(argv_for(group), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=dict(env if env is not None else os.environ))
            running.append((group, proc))
        for group, proc in running:
            timed_out = False
            try:
                proc.wait(timeout=max(1.0, timeout - (clock() - started)))
            except subprocess.TimeoutExpired:
                timed_out = True
                stop(proc)
            group["seconds"] = round(clock() - started, 1)
            fill(group, proc.returncode, timed_out)
    finally:
        for dummy, proc in running:
            if proc.poll() is None:
                stop(proc)


def fill(group: Dict[str, Any], rc: Optional[int], timed_out: bool) -> None:
    try:
        with open(os.path.join(group["run_dir"], "ansible-playbook.log"), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        text = ""
    tail, plan_failed = log_facts(text)
    group["rc"] = rc
    group.update(measure(read_results(group["run_dir"]), rc, tail, timed_out, plan_failed))


# ------------------------------------------------------------------ the whole isolation
def isolate(nodes: Sequence[str], needed: int, slow_pct: float, max_rounds: int, run_dir: str, run_id: str,
            runner: Callable[[List[Dict[str, Any]]], None], clock: Callable[[], float] = time.monotonic,
            on_round: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
    """Rounds until a node is named or nothing is left to split; each round's groups run through ``runner``
    (one wave at a time). Returns the isolation document (isolation.json)."""
    check_nodes(nodes, needed)
    started = clock()
    groups: List[Dict[str, Any]] = []
    rounds: List[Dict[str, Any]] = []
    decision = decide(nodes, groups)
    stuck: List[List[str]] = []
    while len(rounds) < max_rounds:
        planned, stuck = next_groups(nodes, decision, [frozenset(g["hosts"]) for g in groups], needed)
        if not planned:
            break
        number = len(rounds) + 1
        round_started = clock()
        for index, group in enumerate(planned, 1):
            group.update(round=number, name="r%dg%d" % (number, index), run_id="%s-r%dg%d" % (run_id, number, index),
                         run_dir=os.path.join(run_dir, "rounds", "r%dg%d" % (number, index)))
        for wave in waves(planned):
            runner(list(wave))
        groups.extend(planned)
        judge(groups, slow_pct)
        decision = decide(nodes, groups, needed)
        entry = {"round": number, "seconds": round(clock() - round_started, 1), "groups": planned}
        rounds.append(entry)
        if on_round:
            on_round(entry)
    best = judge(groups, slow_pct)
    conclusion = conclude(nodes, decision, stuck, groups, len(rounds) < max_rounds)
    return {"schema_version": SCHEMA_VERSION, "nodes": list(nodes), "min_nodes": needed, "slow_pct": slow_pct,
            "max_rounds": max_rounds, "metric": (best or {}).get("metric"),
            "best": {"hosts": best["hosts"], "rate": best["rate"]} if best else None,
            "expected": next((g.get("expected") for g in groups if g.get("expected") is not None), None),
            "rounds": rounds, "conclusion": conclusion, "cleared": decision["cleared"],
            "simulated": any(g.get("simulated") for g in groups),
            "seconds": round(clock() - started, 1), "run_dir": run_dir, "run_id": run_id}
