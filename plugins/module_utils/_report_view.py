# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the console, the JUnit file and the HTML page show of a results document, computed once: the
headline, the culprit first, failed checks grouped by check and metric with their node lists, the
checks that pass on every node as one group each, and each node's throughput against the median.

Documents written before ``schema_version`` 1 (no ``headline``, ``culprit``, ``consequences``,
``judged``, ``unjudged``, ``baseline``, ``effective_model``) render too: what is missing is derived
from ``checks`` or left out. Everything here is presentation; judging is ``_metrics``' job.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import statistics
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts, natural_key
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import THROUGHPUT_PREFERENCE
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number

FAIL, PASS = "fail", "pass"
NOT_JUDGED = ("no_threshold", "info")
# The order failed checks are shown in: what stopped the node first, then what it did not reach.
CHECK_ORDER = ("errors", "exit_code", "progress", "completion", "finite", "convergence", "threshold", "straggler")
HEADLINE_CHARS = 240
# Checks that say how a node ended: on a node stopped by another's failure, they are that failure's doing.
STOPPED_CHECKS = ("errors", "exit_code", "progress", "completion")
# Checks whose values are worth a range in a summary (the measured metric against its bound).
VALUE_CHECKS = ("threshold", "straggler")


# -- the view ------------------------------------------------------------------------------------------

class CheckGroup(NamedTuple):
    """Checks of one (check, metric, status), one per node (or job), in natural host order."""
    check: str
    metric: Optional[str]
    status: str
    checks: Tuple[Dict[str, Any], ...]
    nodes: List[str]   # the nodes of ``checks``, each once
    of: int            # how many nodes the check judged

    @property
    def label(self) -> str:
        return label_of(self.check, self.metric)


def label_of(check: Any, metric: Any) -> str:
    """``threshold tokens_per_sec_per_gpu``, ``errors crash``, ``exit_code``: a check and its metric."""
    return "%s %s" % (check, metric) if metric not in (None, "", check) else str(check)


def check_label(check: Mapping[str, Any]) -> str:
    return label_of(check.get("check"), check.get("metric"))


class View(NamedTuple):
    verdict: str
    headline: str
    simulated: bool
    culprit: Optional[Dict[str, Any]]
    consequences: List[str]
    culprit_checks: List[Dict[str, Any]]      # the culprit's failed checks, its cause first
    # every other failed check: of nodes that failed on their own, and what the stopped nodes measured
    failed: List[CheckGroup]
    consequential: List[CheckGroup]           # how the nodes stopped by the culprit ended
    passed: List[CheckGroup]                  # (check, metric) that pass on every node, one group each
    not_judged: List[CheckGroup]              # no threshold set, info only
    unjudged: List[Dict[str, Any]]            # metrics not judged, with the reason
    subjects: List[str]                       # every node (and job) judged, natural order
    # real-framework runs on simulated nodes: {"real": [...], "simulated": [...]}; None otherwise
    realism: Optional[Dict[str, List[str]]] = None
    # (check, metric) whose bound no value can miss (a straggler limit of 100 % or more): said, never drawn
    cannot_fail: Tuple[CheckGroup, ...] = ()
    cause: str = ""                           # what the consequences are consequences of: a host, "the interrupt"
    judged: Optional[Mapping[str, int]] = None  # check name -> how many nodes it judged


def unique(items: Iterable[str]) -> List[str]:
    return list(dict.fromkeys(items))


def check_rank(check: Mapping[str, Any]) -> Tuple[int, str]:
    name = str(check.get("check"))
    return (CHECK_ORDER.index(name) if name in CHECK_ORDER else len(CHECK_ORDER), str(check.get("metric") or ""))


def group_checks(checks: Sequence[Dict[str, Any]], of: Mapping[str, int]) -> List[CheckGroup]:
    """Checks grouped by (check, metric, status), in CHECK_ORDER; ``of``: how many nodes each check judged."""
    groups: Dict[Tuple[str, Any, str], List[Dict[str, Any]]] = {}
    for check in checks:
        groups.setdefault((str(check.get("check")), check.get("metric"), str(check.get("status"))), []).append(check)
    ordered = sorted(groups.items(), key=lambda item: check_rank(item[1][0]))
    result = []
    for (check, metric, status), members in ordered:
        members.sort(key=lambda c: natural_key(str(c.get("node"))))
        nodes = unique(str(c.get("node")) for c in members)
        result.append(CheckGroup(check, metric, status, tuple(members), nodes, of.get(check, len(nodes))))
    return result


def judged_counts(checks: Sequence[Mapping[str, Any]]) -> Dict[str, int]:
    """check name -> how many nodes it judged. Checks that exist only where they fail (error lines, exit
    status) judged every node."""
    subjects: Dict[str, set] = {}
    failing_only: Dict[str, bool] = {}
    for check in checks:
        name = str(check.get("check"))
        subjects.setdefault(name, set()).add(str(check.get("node")))
        failing_only[name] = failing_only.get(name, True) and check.get("status") == FAIL
    everyone = len({str(c.get("node")) for c in checks})
    return {name: everyone if failing_only[name] else len(nodes) for name, nodes in subjects.items()}


def is_consequential(check: Mapping[str, Any]) -> bool:
    """Whether a consequence node's failed check follows from its being stopped: how it ended, or a
    value it never produced. Its throughput or convergence, measured while it ran, stand on their own."""
    return check.get("check") in STOPPED_CHECKS or check.get("actual") is None


def culprit_of(document: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    culprit = document.get("culprit")
    return culprit if isinstance(culprit, dict) and culprit.get("host") is not None else None


def cause_first(checks: Sequence[Dict[str, Any]], culprit: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The culprit's failed checks: the error line that is its cause first, then by CHECK_ORDER."""
    def rank(check: Dict[str, Any]) -> Tuple[int, Tuple[int, str]]:
        is_error = check.get("check") == "errors"
        if is_error and culprit.get("text") and check.get("actual") == culprit.get("text"):
            return 0, check_rank(check)
        return (1 if is_error and check.get("metric") == culprit.get("class") else 2), check_rank(check)
    return sorted(checks, key=rank)


def interrupted_by(document: Mapping[str, Any]) -> Optional[str]:
    """The signal (or words) of an interrupted run: every node's stop is its consequence."""
    stop = document.get("stop")
    return str(stop["interrupted"]) if isinstance(stop, Mapping) and stop.get("interrupted") else None


def consequences_of(document: Mapping[str, Any], checks: Sequence[Mapping[str, Any]],
                    culprit_host: Optional[str]) -> List[str]:
    """The nodes stopped by the culprit; in an interrupted run, every node that stopped (the interrupt's doing)."""
    named = [str(h) for h in document.get("consequences") or [] if str(h) != culprit_host]
    if interrupted_by(document) and not culprit_host:
        named += [str(c.get("node")) for c in checks if c.get("status") == FAIL and c.get("check") in STOPPED_CHECKS]
    return unique(named)


def run_cause_name(document: Mapping[str, Any]) -> str:
    """``the run's hang``: what stopped every node when no node stands out."""
    run_cause = document.get("run_cause")
    return "the run's %s" % run_cause["class"] if isinstance(run_cause, Mapping) and run_cause.get("class") \
        else "the run's cause"


def cannot_fail(check: Mapping[str, Any]) -> bool:
    """A straggler limit of 100 % or more puts the floor at or below zero: no throughput can fall under it."""
    return (check.get("check") == "straggler" and check.get("status") == PASS
            and is_finite_number(check.get("expected")) and check["expected"] <= 0)


def cannot_fail_sentence(group: CheckGroup, document: Mapping[str, Any]) -> str:
    """``straggler tokens_per_sec_per_gpu cannot fail: its limit 1000% of the median puts the floor below zero``."""
    pct = document.get("straggler_pct")
    limit = "its limit %s%% below the median" % short_number(pct) if is_finite_number(pct) else "its limit"
    return "%s cannot fail: %s puts the floor at or below zero, under any throughput (set results_straggler_pct " \
           "below 100 to judge it)" % (group.label, limit)


def view(document: Mapping[str, Any]) -> View:
    checks: List[Dict[str, Any]] = [c for c in document.get("checks") or [] if isinstance(c, dict)]
    culprit = culprit_of(document)
    culprit_host = str(culprit["host"]) if culprit else None
    consequences = consequences_of(document, checks, culprit_host)
    consequence_set = set(consequences)
    of = judged_counts(checks)
    failed = [c for c in checks if c.get("status") == FAIL]
    failing_keys = {(str(c.get("check")), c.get("metric")) for c in failed}
    stopped = [c for c in failed if str(c.get("node")) in consequence_set and is_consequential(c)]
    stopped_ids = {id(c) for c in stopped}
    interrupt = interrupted_by(document)
    return View(
        verdict=str(document.get("verdict") or "FAIL"),
        headline=headline(document),
        simulated=bool(document.get("simulated")),
        culprit=culprit,
        consequences=sorted(consequences, key=natural_key),
        culprit_checks=cause_first([c for c in failed if str(c.get("node")) == culprit_host], culprit or {}),
        failed=group_checks([c for c in failed if id(c) not in stopped_ids and str(c.get("node")) != culprit_host], of),
        consequential=group_checks(stopped, of),
        passed=group_checks([c for c in checks if c.get("status") == PASS and not cannot_fail(c)
                             and (str(c.get("check")), c.get("metric")) not in failing_keys], of),
        not_judged=group_checks([c for c in checks if c.get("status") in NOT_JUDGED], of),
        unjudged=unjudged_of(document, checks),
        subjects=sorted(unique(str(c.get("node")) for c in checks), key=natural_key),
        realism=realism_of(document),
        cannot_fail=tuple(group_checks([c for c in checks if cannot_fail(c)
                                        and (str(c.get("check")), c.get("metric")) not in failing_keys], of)),
        cause=culprit_host or ("the interrupt (%s)" % interrupt if interrupt else run_cause_name(document)),
        judged=of,
    )


class FailedCheck(NamedTuple):
    """One failed (check, metric) over every node that failed it: the culprit, the others on their own, the
    nodes stopped as a consequence. ``nodes`` is all of them, so that its count is the check's."""
    label: str
    nodes: List[str]
    of: int
    culprit: Optional[str]
    own: List[str]
    consequences: List[str]


def failed_by_check(shown: View) -> List[FailedCheck]:
    """Every failed (check, metric) once, the culprit's first (its cause first), then by CHECK_ORDER."""
    rows: Dict[str, Dict[str, Any]] = {}
    for check in shown.culprit_checks:
        rows.setdefault(check_label(check), {"check": str(check.get("check")), "culprit": str(check.get("node")),
                                             "own": [], "consequences": []})
    others = sorted([(g, "own") for g in shown.failed] + [(g, "consequences") for g in shown.consequential],
                    key=lambda item: check_rank(item[0].checks[0]))
    for group, part in others:
        rows.setdefault(group.label, {"check": group.check, "culprit": None, "own": [], "consequences": []})[part] += \
            group.nodes
    result = []
    for label, row in rows.items():
        nodes = sorted(unique(([row["culprit"]] if row["culprit"] else []) + row["own"] + row["consequences"]),
                       key=natural_key)
        of = max(len(nodes), (shown.judged or {}).get(row["check"], 0))
        result.append(FailedCheck(label, nodes, of, row["culprit"], row["own"], row["consequences"]))
    return result


def failed_check_text(row: FailedCheck, cause: str, width: int = 100) -> str:
    """``node[1-2] (2 of 2): node2 culprit; node1 stopped as a consequence of node2``."""
    parts = []
    if row.culprit:
        parts.append("%s culprit" % row.culprit)
    if row.own:
        parts.append("%s on %s own" % (compact_hosts(row.own, width), "its" if len(row.own) == 1 else "their"))
    if row.consequences:
        parts.append("%s stopped as a consequence of %s" % (compact_hosts(row.consequences, width), cause))
    text = "%s (%d of %d)" % (compact_hosts(row.nodes, width), len(row.nodes), row.of)
    return text + (": " + "; ".join(parts) if row.culprit or row.consequences else "")


def headline(document: Mapping[str, Any]) -> str:
    """The document's own headline; for older documents, one made from the verdict and the failed checks."""
    if document.get("headline"):
        return str(document["headline"])
    verdict = str(document.get("verdict") or "FAIL")
    failed = [c for c in document.get("checks") or [] if isinstance(c, dict) and c.get("status") == FAIL]
    if verdict == "PASS" or not failed:
        return verdict
    first = failed[0]
    text = "%s: %s: %s" % (verdict, first.get("node"), first.get("detail"))
    text = text if len(text) <= HEADLINE_CHARS else text[:HEADLINE_CHARS - 3] + "..."
    nodes = unique(str(c.get("node")) for c in failed)
    if len(failed) > 1:
        text += " (%d failed checks on %s)" % (len(failed), compact_hosts(nodes, 60))
    return text


def unjudged_of(document: Mapping[str, Any], checks: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The document's ``unjudged``; for older documents, the metrics whose thresholds were not set."""
    listed = document.get("unjudged")
    if isinstance(listed, list):
        return [u if isinstance(u, dict) else {"metric": str(u), "reason": ""} for u in listed]
    metrics = unique(str(c.get("metric")) for c in checks if c.get("status") == "no_threshold")
    return [{"metric": metric, "reason": "no threshold set"} for metric in metrics]


# The unjudged reasons that a threshold would cure (not "info only" or "not enforced", which are the config's choice).
WANTS_A_THRESHOLD = ("no threshold set", "no cell of ")
KEEP_BASELINE = "clusterval.training.keep_baseline"


def baseline_path(document: Mapping[str, Any]) -> str:
    """Where ``keep_baseline`` keeps a run of this config: ``baselines/<config>.json`` beside the run directories."""
    run_dir = str(document.get("run_dir") or "runs/<run id>").rstrip("/")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(document.get("config_name") or "run"))
    return os.path.join(os.path.dirname(run_dir) or ".", "baselines", "%s.json" % name)


def nested(path: str, value: Any) -> Any:
    """``model_params.multi_node["llama3.1-70b"].mi300x.result_dict.tokens`` as nested objects ending in value."""
    keys = [quoted or plain for quoted, plain in re.findall(r'\["((?:[^"\\]|\\.)*)"\]|([^.\[\]]+)', path)]
    for key in reversed(keys):
        value = {key: value}
    return value


def expectations(document: Mapping[str, Any], shown: View) -> List[str]:
    """A PASS whose metrics lack a threshold: how to judge them, with the exact names: the config's key (or the
    threshold file's cell), an override for one run, this run kept as the baseline of the next; else []."""
    wanting = sorted((u for u in shown.unjudged if str(u.get("reason") or "").startswith(WANTS_A_THRESHOLD)),
                     key=lambda u: THROUGHPUT_PREFERENCE.index(u.get("metric"))
                     if u.get("metric") in THROUGHPUT_PREFERENCE else len(THROUGHPUT_PREFERENCE))
    summary = document.get("summary") if isinstance(document.get("summary"), Mapping) else {}
    if not wanting or shown.verdict != "PASS" or not summary.get("cluster"):
        return []
    metrics = unique(str(u.get("metric")) for u in wanting)
    lines = ["To judge %s, set what %s must reach, in any of these ways:" % (
        ", ".join(metrics), "it" if len(metrics) == 1 else "each")]
    cell = document.get("threshold_file") if isinstance(document.get("threshold_file"), Mapping) else None
    paths = [str(u["path"]) for u in wanting if u.get("path")]
    if cell and cell.get("path"):
        named = cell.get("cell") or (re.findall(r"no cell named (\S+)", str(cell.get("note") or "")) or ["<the sweep's>"])[0]
        lines.append('the threshold file %s: in its cell %s, "%s": {"kind": "min", "value": <number>}'
                     % (cell["path"], named, metrics[0]))
    elif paths:
        lines.append("the config %s: %s" % (document.get("config_path") or "", ", ".join(paths)))
        lines.append("for one run: -e %s" % shlex.quote(json.dumps({"training_overrides_extra": nested(
            paths[0], "<number>")})))
    keep = shlex.quote(baseline_path(document))
    lines.append("this run as the baseline: ansible-playbook %s -e training_run_dir=%s -e training_baseline=%s"
                 % (KEEP_BASELINE, shlex.quote(str(document.get("run_dir"))), keep))
    lines.append("then, on the next run: -e training_baseline=%s (its steady means, less training_baseline_tolerance "
                 "(5 %%), are the thresholds)" % keep)
    return lines


def hosts_of(document: Mapping[str, Any], shown: View) -> List[str]:
    """The run's nodes (summary and series), natural order; the checks' subjects for documents without."""
    hosts = set((document.get("summary") or {}).get("nodes") or {}) | set(document.get("series") or {})
    return sorted((str(h) for h in hosts), key=natural_key) if hosts else list(shown.subjects)


def node_states(shown: View) -> Dict[str, str]:
    """host -> culprit | fail (on its own) | consequence | pass, for every subject of a check."""
    states = {subject: PASS for subject in shown.subjects}
    states.update((node, "consequence") for node in shown.consequences)
    for group in shown.consequential:
        states.update((node, "consequence") for node in group.nodes)
    for group in shown.failed:
        states.update((node, FAIL) for node in group.nodes)
    if shown.culprit:
        states[str(shown.culprit["host"])] = "culprit"
    return states


def value_range(group: CheckGroup) -> str:
    """``8616..8702 (expected 8000)`` for threshold and straggler groups; empty for other checks."""
    if group.check not in VALUE_CHECKS:
        return ""
    actual = [c["actual"] for c in group.checks if is_finite_number(c.get("actual"))]
    expected = unique(short_number(c["expected"]) for c in group.checks if is_finite_number(c.get("expected")))
    if not actual:
        return ""
    low, high = short_number(min(actual)), short_number(max(actual))
    text = low if low == high else "%s..%s" % (low, high)
    return text + (" (expected %s)" % expected[0] if len(expected) == 1 else "")


def short_number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return "%d" % value
    return "%.4g" % value if abs(value) < 1000 else "%.0f" % value


# -- throughput per node, for the grid and the curves ---------------------------------------------------

def throughput_metric(document: Mapping[str, Any]) -> Optional[str]:
    """The per-GPU throughput metric of the run (the first of THROUGHPUT_PREFERENCE it has)."""
    series = document.get("series") or {}
    nodes = (document.get("summary") or {}).get("nodes") or {}
    for metric in THROUGHPUT_PREFERENCE:
        if any(metric in (s or {}) for s in series.values()) or any(
                metric in ((n or {}).get("steady") or {}) for n in nodes.values()):
            return metric
    return None


def node_throughput(document: Mapping[str, Any], metric: str) -> Dict[str, float]:
    """Each node's steady mean of ``metric`` (summary, else the mean of its series)."""
    values: Dict[str, float] = {}
    nodes = (document.get("summary") or {}).get("nodes") or {}
    for host, summary in nodes.items():
        steady = ((summary or {}).get("steady") or {}).get(metric)
        mean = steady.get("mean") if isinstance(steady, dict) else ((summary or {}).get("metrics") or {}).get(metric)
        if is_finite_number(mean):
            values[str(host)] = float(mean)
    for host, series in (document.get("series") or {}).items():
        if str(host) in values:
            continue
        points = [p[1] for p in (series or {}).get(metric) or [] if is_finite_number(p[1])]
        if points:
            values[str(host)] = statistics.fmean(points)
    return values


def relative_to_median(values: Mapping[str, float]) -> Tuple[Optional[float], Dict[str, float]]:
    """The median and each value's fraction above (+) or below (-) it."""
    if not values:
        return None, {}
    median = statistics.median(values.values())
    if not median:
        return median, {host: 0.0 for host in values}
    return median, {host: value / median - 1.0 for host, value in values.items()}


def realism_of(document: Mapping[str, Any]) -> Optional[Dict[str, List[str]]]:
    realism = document.get("realism")
    if not isinstance(realism, Mapping):
        return None
    return {part: [str(item) for item in realism.get(part) or []] for part in ("real", "simulated")}


def realism_sentence(realism: Mapping[str, List[str]]) -> str:
    """One sentence for every report: what was real, what was simulated."""
    return "REAL: %s. SIMULATED: %s." % ("; ".join(realism["real"]), "; ".join(realism["simulated"]))
