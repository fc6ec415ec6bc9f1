# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The results document's verdict: checks (``_metrics``), culprit (``_run_fold.analyse``, the watch's one decision), what was judged, headline.

A PASS is earned: a metric whose threshold is not set, is info only, or is not enforced is named in
``unjudged`` and in the headline (``PASS (throughput not judged: no thresholds for ...)``), and with
``require_thresholds`` an unset threshold is a failed check.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._run_fold import analyse, failure_headline
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE
from ansible_collections.clusterval.training.plugins.module_utils._metrics import evaluate, failure_line, make_check
from ansible_collections.clusterval.training.plugins.module_utils._report import SCHEMA_VERSION

NOT_SET = "no threshold set"
INFO_ONLY = "info only"
NOT_ENFORCED = "not enforced (enforce_thresholds: false)"


def unjudged_reason(threshold: Mapping[str, Any]) -> Optional[str]:
    if threshold.get("kind") == "info":
        return INFO_ONLY
    if not threshold.get("set", True) or threshold.get("value") is None:
        return threshold.get("unset_reason") or NOT_SET
    if threshold.get("enforce") is False:
        return NOT_ENFORCED
    return None


def judged_and_unjudged(plan: Mapping[str, Any]) -> Dict[str, Any]:
    judged: List[str] = []
    unjudged: List[Dict[str, str]] = []
    for threshold in plan.get("thresholds") or []:
        metric = str(threshold.get("metric"))
        reason = unjudged_reason(threshold)
        if reason is None:
            judged.append(metric)
        else:
            # The config's key of the threshold, for the reports' "how to judge it" (docs/results.md).
            unjudged.append(dict({"metric": metric, "reason": reason},
                                 **({"path": threshold["path"]} if threshold.get("path") else {})))
    return {"judged": sorted(set(judged)), "unjudged": unjudged}


def soften_unenforced(checks: List[Dict[str, Any]], unjudged: List[Dict[str, str]]) -> None:
    """A threshold that is not enforced is reported, never failed."""
    unenforced = {u["metric"] for u in unjudged if u["reason"] == NOT_ENFORCED}
    for check in checks:
        if check["check"] == "threshold" and check["metric"] in unenforced and check["status"] == "fail":
            check["status"], check["detail"] = "info", check["detail"] + " (not enforced)"


def required_threshold_checks(unjudged: List[Dict[str, str]]) -> List[Dict[str, Any]]:
    return [make_check("cluster", "threshold", "fail", u["metric"], "a threshold", None,
                       "%s: %s, and training_require_thresholds is true (set one in the config, "
                       "a threshold file, or -e training_baseline=<results.json>)" % (u["metric"], u["reason"]))
            for u in unjudged if u["reason"] not in (INFO_ONLY, NOT_ENFORCED)]


def cell_difference_checks(plan: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """With ``require_thresholds``, a threshold cell named for another run than this one judges nothing."""
    found = (plan.get("threshold_file") or {}).get("differences") or []
    cell = (plan.get("threshold_file") or {}).get("cell")
    return [make_check("cluster", "threshold cell", "fail", str(d["setting"]), d["cell"], d["run"],
                       "%s: the cell %s says %s, this run has %s, and training_require_thresholds is true"
                       % (d["setting"], cell, d["cell"], d["run"])) for d in found]


def pass_headline(unjudged: List[Dict[str, str]]) -> str:
    throughput = [u["metric"] for u in unjudged if u["metric"] in THROUGHPUT_PREFERENCE and u["reason"] == NOT_SET]
    plain = [u["metric"] for u in unjudged if u["metric"] not in throughput and u["reason"] in (INFO_ONLY, NOT_SET,
                                                                                                NOT_ENFORCED)]
    because: Dict[str, List[str]] = {}
    for u in unjudged:
        if u["metric"] not in throughput and u["metric"] not in plain:
            because.setdefault(u["reason"], []).append(u["metric"])
    notes = []
    if throughput:
        notes.append("throughput not judged: no thresholds for %s" % ", ".join(throughput))
    notes += ["not judged (%s): %s" % (reason, ", ".join(metrics)) for reason, metrics in because.items()]
    if plain:
        notes.append("not judged: %s" % ", ".join(plain))
    return "PASS" + (" (%s)" % "; ".join(notes) if notes else "")


def verdict(plan: Dict[str, Any], nodes: Dict[str, Dict[str, Any]], straggler_pct: float = 10.0,
            warmup_steps: Optional[int] = None, require_thresholds: bool = False,
            analysis: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Everything ``training_assert`` returns of the results document (docs/results.md). ``analysis``: the run
    watch's one decision (``_run_watch.conclude``); without it (a log judged on its own) the same function
    decides from ``nodes``."""
    outcome = evaluate(plan, nodes, straggler_pct, warmup_steps)
    scope = judged_and_unjudged(plan)
    soften_unenforced(outcome["checks"], scope["unjudged"])
    if require_thresholds:
        outcome["checks"].extend(required_threshold_checks(scope["unjudged"]) + cell_difference_checks(plan))
    analysis = analysis if analysis is not None else analyse(nodes)
    failures = [failure_line(c) for c in outcome["checks"] if c["status"] == "fail"]
    culprit = analysis["culprit"]
    run_cause = analysis.get("run_cause")
    if run_cause and not failures:
        failures = ["run: %s: %s" % (run_cause.get("class"), run_cause.get("text"))]
    if culprit:
        failures.sort(key=lambda line: not line.startswith("%s: " % culprit["host"]))
    outcome.update(scope, failures=failures, verdict="FAIL" if failures else "PASS",
                   schema_version=SCHEMA_VERSION, culprit=culprit if failures else None,
                   run_cause=run_cause if failures else None,
                   consequences=analysis["consequences"] if failures else [],
                   independent_failures=analysis["independent"] if failures else [],
                   require_thresholds=require_thresholds, effective_model=plan.get("effective_model"),
                   baseline=plan.get("baseline"), sweep=plan.get("sweep"), threshold_file=plan.get("threshold_file"),
                   scaling_baseline=plan.get("scaling_baseline"))
    outcome["headline"] = headline(outcome, analysis)
    return outcome


def headline(outcome: Mapping[str, Any], analysis: Mapping[str, Any]) -> Optional[str]:
    """The culprit's line on a node failure; PASS with what was not judged; else the failed checks'."""
    if outcome["verdict"] == "PASS":
        return pass_headline(outcome["unjudged"])
    return failure_headline(analysis) or checks_headline(outcome["checks"])


def checks_headline(checks: List[Mapping[str, Any]]) -> Optional[str]:
    """The first failed check, with the nodes where it failed. The same check failed on every node singles out
    none of them: ``FAIL: threshold tokens_per_sec_per_gpu failed on all 4 nodes alike (node1: ...); no node
    stands out``; on some nodes, they are named by their own figures."""
    failed = [c for c in checks if c.get("status") == "fail"]
    if not failed:
        return None
    first = failed[0]
    alike = [c for c in failed if (c.get("check"), c.get("metric")) == (first.get("check"), first.get("metric"))]
    subjects = {c.get("node") for c in checks}
    nodes = [str(c.get("node")) for c in alike]
    what = " ".join(str(part) for part in (first.get("check"), first.get("metric")) if part)
    if len(subjects) > 1 and set(nodes) == subjects:
        text = "FAIL: %s failed on all %d nodes alike (%s); no node stands out" % (what, len(nodes), failure_line(first))
    elif len(nodes) > 1:
        text = "FAIL: %s failed on %s (%s)" % (what, compact_hosts(nodes, 60), failure_line(first))
    else:
        text = "FAIL: %s" % failure_line(first)
    others = len(failed) - len(alike)
    return text + (" (%d other failed check%s)" % (others, "" if others == 1 else "s") if others else "")


def undetermined_reason(outcome: Mapping[str, Any]) -> Optional[str]:
    """Why a FAIL names no node that isolation could find: every node stopped alike, or every node is slow."""
    if outcome.get("verdict") != "FAIL" or outcome.get("culprit"):
        return None
    cause = outcome.get("run_cause") or {}
    if cause.get("class") in ("hang", "silence", "failure"):
        return "%s: %s" % (cause.get("class"), cause.get("text"))
    failed = [c for c in outcome.get("checks") or [] if c.get("status") == "fail"]
    slow = [c for c in failed if c.get("check") == "threshold" and c.get("metric") in THROUGHPUT_PREFERENCE]
    if failed and len(slow) == len(failed) and len({c.get("node") for c in slow}) > 1:
        return "every node is below the %s threshold: the cluster is slow as a whole" % slow[0]["metric"]
    return None
