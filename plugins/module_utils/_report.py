# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The report files of a run: results.json (docs/results.md), junit.xml and report.html.

The three are rendered from the results document, the outcome of ``training_assert`` plus the run's
identity, and lead with the same thing: the headline and the culprit (``_report_view``).
"""
from __future__ import annotations

import datetime
import errno
import json
import math
import os
import re
import socket
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _room
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts, natural_key
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number
from ansible_collections.clusterval.training.plugins.module_utils._report_html import html_report
from ansible_collections.clusterval.training.plugins.module_utils._report_view import (
    CheckGroup, View, cannot_fail_sentence, check_label, expectations, headline, realism_sentence, view)

__all__ = ["DOCUMENT_KEYS", "SCHEMA_VERSION", "ReportsNotWritten", "html_report", "junit_xml", "results_document",
           "results_json", "strict_json", "write_reports"]

# The results.json layout this code writes (docs/results.md). Raise it when a key changes meaning or goes.
SCHEMA_VERSION = 1
# The keys of results.json, in the order docs/results.md describes them.
DOCUMENT_KEYS = ("schema_version", "verdict", "headline", "culprit", "run_cause", "consequences", "failures", "checks", "judged",
                 "unjudged", "baseline", "effective_model", "summary", "series", "simulated", "run_id", "config_name",
                 "framework", "model", "gpu_arch", "mode", "final_step", "total_steps", "warmup_steps",
                 "straggler_pct", "run_dir", "generated_at", "teardown", "controller_faults")
# Keys of an Ansible task result that are not the outcome.
RESULT_KEYS = ("changed", "failed", "msg", "ansible_stats", "invocation", "skipped", "warnings", "deprecations",
               "exception")


def results_document(outcome: Mapping[str, Any], generated_at: str) -> Dict[str, Any]:
    """training_assert's outcome without Ansible's own result keys: every key of DOCUMENT_KEYS (null
    when the outcome lacks it) and any other key it has, as it is; a headline derived from the checks
    when the outcome has none (training_assert before schema version 1)."""
    document = {key: outcome.get(key) for key in DOCUMENT_KEYS}
    document.update((key, value) for key, value in outcome.items()
                    if key not in RESULT_KEYS and not str(key).startswith(("_ansible", "ansible_")))
    document.update(schema_version=outcome.get("schema_version") or SCHEMA_VERSION, headline=headline(outcome),
                    generated_at=generated_at)
    if isinstance(document.get("checks"), list):
        document["checks"] = culprit_first(document["checks"], view(document))
    return document


def culprit_first(checks: List[Any], shown: View) -> List[Any]:
    """The checks as every table shows them: the culprit's failed checks first (its cause first), then the rest in
    their order; a failed check that follows from the culprit (or the interrupt, or the run's cause) says so
    (``consequence_of``)."""
    stopped = {id(check) for group in shown.consequential for check in group.checks}
    first = [id(check) for check in shown.culprit_checks]
    rest = [dict(check, consequence_of=shown.cause) if id(check) in stopped else check
            for check in checks if id(check) not in first]
    return list(shown.culprit_checks) + rest


def strict_json(value: Any) -> Any:
    """NaN/Inf become the strings "nan"/"inf"/"-inf" so the file is valid JSON everywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def results_json(document: Dict[str, Any]) -> str:
    """Strict JSON, sorted keys, one line per top-level key and per item of a top-level list or object
    (a check, a node's series): readable, diffable, and encoded by json's C encoder (fast at 500 nodes)."""
    versioned = dict(document, schema_version=document.get("schema_version") or SCHEMA_VERSION)
    lines = []
    for key in sorted(versioned, key=str):
        value = versioned[key]
        if isinstance(value, dict) and value:
            pairs = sorted(value.items(), key=lambda kv: str(kv[0]))
            items = ["    %s: %s" % (compact_json(str(k)), compact_json(v)) for k, v in pairs]
            text = "{\n%s\n  }" % ",\n".join(items)
        elif isinstance(value, (list, tuple)) and value:
            text = "[\n%s\n  ]" % ",\n".join("    " + compact_json(v) for v in value)
        else:
            text = compact_json(value)
        lines.append("  %s: %s" % (compact_json(str(key)), text))
    return "{\n%s\n}\n" % ",\n".join(lines)


def compact_json(value: Any) -> str:
    """One line of strict JSON; NaN and infinities (rare) as strings."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False, separators=(", ", ": "))
    except ValueError:
        return json.dumps(strict_json(value), sort_keys=True, allow_nan=False, separators=(", ", ": "))


# -- JUnit ---------------------------------------------------------------------------------------------

# How a node ended that is not the training's doing: the harness lost it, or the run was stopped.
INFRASTRUCTURE_ENDINGS = ("unreachable", "lease", "aborted", "stopped")
# The most lines of per-node detail one testcase carries (the rest is counted).
CASE_LINES = 40


class Case(NamedTuple):
    """One JUnit testcase: ``outcome`` is failure, error, skipped or None (passed)."""
    classname: str
    name: str
    outcome: Optional[str]
    message: str = ""
    text: str = ""
    kind: str = ""


def classname_of(area: str) -> str:
    """A case's class: the same from run to run (never the nodes, which the message names), so that a CI's
    history of a case lines up across runs."""
    return "clusterval.training.%s" % area


def is_infrastructure(check: Mapping[str, Any]) -> bool:
    """An unreachable node, a lost lease, a run stopped from outside: an ``<error>``, not a failed check."""
    if check.get("check") == "progress" and check.get("actual") in INFRASTRUCTURE_ENDINGS:
        return True
    return check.get("check") == "errors" and check.get("metric") == "unreachable"


def detail_lines(checks: Sequence[Mapping[str, Any]], limit: int = CASE_LINES) -> str:
    lines = ["%s: %s" % (c.get("node"), c.get("detail") or check_label(c)) for c in checks[:limit]]
    if len(checks) > limit:
        lines.append("... and %d more" % (len(checks) - limit))
    return "\n".join(lines)


def stop_case(document: Mapping[str, Any], shown: View) -> Optional[Case]:
    """A run that stopped before its verdict (or says where it stopped): one ``<error>``."""
    stop = document.get("stop") if isinstance(document.get("stop"), dict) else {}
    checks = [c for c in document.get("checks") or [] if isinstance(c, dict)]
    if not stop and (checks or shown.verdict != "FAIL"):
        return None
    stage = stop.get("stage")
    lines = [str(line) for line in document.get("failures") or []]
    for key, label in (("hosts", "nodes"), ("nodes", "nodes"), ("never_started", "never started")):
        hosts = stop.get(key)
        if isinstance(hosts, list) and hosts:
            lines.append("%s: %s" % (label, compact_hosts([str(h) for h in hosts], 400)))
    for key in ("cause", "reason"):
        if stop.get(key):
            lines.insert(0, str(stop[key]))
    name = "stopped in %s" % stage if stage else "stopped before the verdict"
    return Case(classname_of("run"), name, "error", shown.headline, "\n".join(unique_lines(lines)), "stop")


def unique_lines(lines: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(lines))


def run_cause_case(document: Mapping[str, Any], shown: View) -> Optional[Case]:
    """No node stands out (the run's own cause, ``run_cause``): one ``<error>`` for the run."""
    run_cause = document.get("run_cause")
    if not isinstance(run_cause, dict):
        return None
    return Case(classname_of("run"), "run %s" % run_cause.get("class"), "error", str(run_cause.get("text")), shown.headline,
                str(run_cause.get("class")))


def culprit_case(shown: View) -> Optional[Case]:
    if not shown.culprit_checks:
        return None
    host = str(shown.culprit["host"]) if shown.culprit else str(shown.culprit_checks[0].get("node"))
    first = shown.culprit_checks[0]
    outcome = "error" if all(is_infrastructure(c) for c in shown.culprit_checks) else "failure"
    return Case(classname_of("culprit"), "culprit: %s" % check_label(first), outcome, shown.headline,
                "%s\n%s" % (shown.headline, detail_lines(shown.culprit_checks)), str(first.get("check")))


def consequences_case(shown: View) -> Optional[Case]:
    """Every node stopped by the culprit, in one case: how they ended, grouped, with host ranges."""
    hosts = unique_lines(shown.consequences + [n for g in shown.consequential for n in g.nodes])
    if not hosts:
        return None
    ranges = compact_hosts(sorted(hosts, key=natural_key), 400)
    lines = ["%s: %s" % (group.label, compact_hosts(group.nodes, 400)) for group in shown.consequential]
    message = "%d node(s) stopped as a consequence of %s: %s" % (len(hosts), shown.cause, ranges)
    return Case(classname_of("culprit"), "consequences of the culprit", "failure", message,
                "\n".join([message] + lines), "consequence")


def group_cases(groups: Sequence[CheckGroup]) -> List[Case]:
    """Failed checks of nodes that failed on their own: one case per check and metric, infrastructure
    endings (unreachable, ...) apart as ``<error>``."""
    cases = []
    for group in groups:
        for infrastructure in (True, False):
            checks = [c for c in group.checks if is_infrastructure(c) == infrastructure]
            if not checks:
                continue
            nodes = unique_lines([str(c.get("node")) for c in checks])
            ranges = compact_hosts(nodes, 400)
            message = "%s failed on %d of %d node(s): %s" % (group.label, len(nodes), max(group.of, len(nodes)),
                                                             ranges)
            if len(checks) == 1:
                message = str(checks[0].get("detail") or message)
            name = "%s (infrastructure)" % group.label if infrastructure else group.label
            cases.append(Case(classname_of("checks"), name, "error" if infrastructure else "failure", message,
                              detail_lines(checks), group.check))
    return cases


def teardown_case(document: Mapping[str, Any]) -> Optional[Case]:
    teardown = document.get("teardown") if isinstance(document.get("teardown"), dict) else {}
    failed = {str(host): outcome or {} for host, outcome in teardown.items()
              if (outcome or {}).get("unreachable") or (outcome or {}).get("ok") is False}
    if not failed:
        return None
    hosts = sorted(failed, key=natural_key)
    lines = ["%s: %s" % (host, "unreachable (%s)" % (failed[host].get("msg") or "no answer")
                         if failed[host].get("unreachable") else failed[host].get("msg") or "failed")
             for host in hosts]
    message = "teardown failed on %d node(s): %s" % (len(hosts), compact_hosts(hosts, 400))
    return Case(classname_of("run"), "teardown", "error", message, "\n".join(lines[:CASE_LINES]), "teardown")


def passed_cases(groups: Sequence[CheckGroup], outcome: Optional[str], how: Sequence[str] = ()) -> List[Case]:
    """``how``: how to judge the metrics without a threshold (``expectations``), said in their skipped cases."""
    return [Case(classname_of("checks"), group.label, outcome,
                 "%s on %d node(s)%s" % (group.status.replace("_", " "), len(group.nodes),
                                         "; " + "; ".join(how) if how and group.status == "no_threshold" else "")
                 if outcome else "")
            for group in groups]


def cannot_fail_cases(document: Mapping[str, Any], shown: View) -> List[Case]:
    """A check whose bound no value can miss is skipped, with why: it judged nothing."""
    return [Case(classname_of("checks"), group.label, "skipped", cannot_fail_sentence(group, document))
            for group in shown.cannot_fail]


def fabric_case(document: Mapping[str, Any]) -> Optional[Case]:
    """A fabric gate that could not run: skipped, with why (the fabric was not measured)."""
    fabric = document.get("fabric")
    if not isinstance(fabric, Mapping) or not fabric.get("not_run"):
        return None
    return Case("run", "fabric gate", "skipped", str(fabric["not_run"]))


def junit_cases(document: Mapping[str, Any], shown: View) -> List[Case]:
    """A handful of cases at any node count: the stop, the culprit, its consequences in one, the other
    failures by check, teardown, then one per check that passed or was not judged; at least one failing
    case whenever the verdict is FAIL."""
    cases = [case for case in (stop_case(document, shown), run_cause_case(document, shown), culprit_case(shown),
                               consequences_case(shown)) if case is not None]
    cases += group_cases(shown.failed)
    fabric = fabric_case(document)
    if fabric is not None:
        cases.append(fabric)
    teardown = teardown_case(document)
    if teardown is not None:
        cases.append(teardown)
    if shown.verdict == "FAIL" and not any(case.outcome in ("failure", "error") for case in cases):
        lines = [str(line) for line in document.get("failures") or []] or [shown.headline]
        cases.insert(0, Case(classname_of("run"), "verdict", "failure", shown.headline, "\n".join(lines[:CASE_LINES]), "verdict"))
    return (cases + passed_cases(shown.passed, None) + cannot_fail_cases(document, shown)
            + passed_cases(shown.not_judged, "skipped", expectations(document, shown)))


XML_INVALID = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any) -> str:
    """Text XML 1.0 can hold: control characters (ANSI colours in log lines, NUL) become U+FFFD."""
    return XML_INVALID.sub("\ufffd", str(value))


def element(parent: Optional[ET.Element], tag: str, text: Optional[str] = None, **attributes: Any) -> ET.Element:
    clean = {key: xml_text(value) for key, value in attributes.items()}
    node = ET.Element(tag, clean) if parent is None else ET.SubElement(parent, tag, clean)
    if text is not None:
        node.text = xml_text(text)
    return node


def junit_xml(document: Dict[str, Any], hostname: Optional[str] = None, shown: Optional[View] = None,
              seconds: Optional[float] = None) -> str:
    """One suite of a handful of cases (junit_cases), valid against the Jenkins xUnit plugin's junit-10.xsd:
    ``<error>`` for what stopped the run from outside (unreachable nodes, teardown, a stop before the
    verdict), ``<failure>`` for failed checks. A simulated run says so in the suite name and a property.
    ``seconds``: how long the training ran (the suite's time), when the caller knows it."""
    shown = shown or view(document)
    cases = junit_cases(document, shown)
    name = "clusterval.training %s%s" % (document.get("config_name") or document.get("run_id") or "run",
                                         " [SIMULATED]" if shown.simulated else "")
    counts = {"tests": len(cases), "failures": sum(1 for c in cases if c.outcome == "failure"),
              "errors": sum(1 for c in cases if c.outcome == "error"),
              "time": "%.3f" % (seconds if is_finite_number(seconds) and seconds >= 0 else run_seconds(document))}
    suites = element(None, "testsuites", name=name, **counts)
    suite = element(suites, "testsuite", name=name, skipped=sum(1 for c in cases if c.outcome == "skipped"),
                    timestamp=junit_timestamp(document), hostname=hostname or socket.gethostname(), id=0,
                    package="clusterval.training", **counts)
    properties = element(suite, "properties")
    for key, value in junit_properties(document, shown):
        element(properties, "property", name=key, value=value)
    for case in cases:
        junit_case(suite, case)
    return ET.tostring(suites, encoding="unicode") + "\n"


def junit_case(suite: ET.Element, case: Case) -> None:
    """A passing case is its name only; a failure or an error carries its message and the nodes' details."""
    node = element(suite, "testcase", classname=case.classname, name=case.name, time="0")
    if case.outcome in ("failure", "error"):
        element(node, case.outcome, case.text or case.message, message=case.message, type=case.kind or case.outcome)
    elif case.outcome == "skipped":
        element(node, "skipped", message=case.message)


def junit_properties(document: Mapping[str, Any], shown: View) -> List[Tuple[str, str]]:
    pairs = [("verdict", shown.verdict), ("headline", shown.headline), ("simulated", str(shown.simulated).lower()),
             ("schema_version", str(document.get("schema_version") or SCHEMA_VERSION))]
    if shown.realism:
        pairs.append(("realism", realism_sentence(shown.realism)))
    for key in ("run_id", "config_name", "framework", "model", "gpu_arch", "mode", "run_dir"):
        if document.get(key) not in (None, ""):
            pairs.append((key, str(document[key])))
    model = document.get("effective_model")
    if isinstance(model, dict) and model.get("name"):
        pairs.append(("effective_model", str(model["name"])))
    if shown.culprit:
        pairs.append(("culprit", str(shown.culprit["host"])))
        pairs.append(("consequences", compact_hosts(shown.consequences)))
    run_cause = document.get("run_cause")
    if isinstance(run_cause, dict):
        pairs.append(("run_cause", "%s: %s" % (run_cause.get("class"), run_cause.get("text"))))
    pairs.append(("nodes", str(len(shown.subjects))))
    return pairs


def run_seconds(document: Mapping[str, Any]) -> float:
    """From the earliest node start to the latest node end, when the summary has them; else 0."""
    nodes = ((document.get("summary") or {}).get("nodes") or {}).values()
    starts = [n["started_at"] for n in nodes if is_finite_number((n or {}).get("started_at"))]
    ends = [n["finished_at"] for n in nodes if is_finite_number((n or {}).get("finished_at"))]
    return max(0.0, max(ends) - min(starts)) if starts and ends else 0.0


def junit_timestamp(document: Mapping[str, Any]) -> str:
    """ISO 8601 without a zone (as Ant and Surefire write it), in UTC."""
    generated = str(document.get("generated_at") or "")
    try:
        moment = datetime.datetime.strptime(generated, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        moment = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


# -- files ---------------------------------------------------------------------------------------------

class ReportsNotWritten(OSError):
    """Some report files could not be written; ``written`` maps the names of those that were to their paths."""

    def __init__(self, cause: OSError, written: Dict[str, str]):
        super().__init__(cause.errno, cause.strerror, cause.filename)
        self.written = written


# results.json first: it is small and it is what tools read; then JUnit, then the HTML page.
REPORT_ORDER = ("results.json", "junit.xml", "report.html")


def write_reports(run_dir: str, document: Dict[str, Any], seconds: Optional[float] = None) -> Dict[str, str]:
    """Write results.json, junit.xml and report.html into ``run_dir`` (created if needed), in that order;
    returns their paths. ``seconds``: how long the training ran, for JUnit.

    Each file is written on its own: one that cannot be written does not stop the next, and its older version
    is removed (it would contradict the others). When results.json
    cannot be written (a full disk), the run's own older report.html and junit.xml are removed to make room for
    it (they would contradict it), then its own older results.json. Raises ``ReportsNotWritten`` (an OSError:
    the first failure, with ``written``) when any file could not be written."""
    shown = view(document)
    paths: Dict[str, str] = {}
    first_error: Optional[OSError] = None
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as exc:
        raise ReportsNotWritten(exc, paths) from exc
    for name in REPORT_ORDER:
        path = os.path.join(run_dir, name)
        try:
            content = results_json(document) if name == "results.json" else (
                junit_xml(document, shown=shown, seconds=seconds) if name == "junit.xml" else
                html_report(document, shown, collected_logs(run_dir)))
            write_with_room(path, content, run_dir) if name == "results.json" else _atomic.write_text(path, content)
        except OSError as exc:
            first_error = first_error or exc
            remove_stale(path)
            continue
        paths[name] = path
    if first_error is not None:
        raise ReportsNotWritten(first_error, paths) from first_error
    return paths


def collected_logs(run_dir: str) -> Set[str]:
    """The nodes whose training log lies in the run directory (``logs/<host>/training.log``, what the page links)."""
    try:
        hosts = os.listdir(os.path.join(run_dir, "logs"))
    except OSError:
        return set()
    return {host for host in hosts if os.path.isfile(os.path.join(run_dir, "logs", host, "training.log"))}


def remove_stale(path: str) -> None:
    """An earlier version of a report that could not be written again would contradict the ones that were."""
    try:
        os.unlink(path)
    except OSError:
        pass


def write_with_room(path: str, content: str, run_dir: str) -> None:
    """Write ``path`` atomically; when there is no room for it, release the room kept for it (``_room``), then
    remove the run's older reports (the other files first, then its own older version), trying again after each."""
    stale = [os.path.join(run_dir, name) for name in reversed(REPORT_ORDER)]
    while True:
        try:
            _atomic.write_text(path, content)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            if _room.release(run_dir, "results"):
                continue
            present = [p for p in stale if os.path.lexists(p)]
            if not present:
                raise
            os.unlink(present[0])
            stale.remove(present[0])
