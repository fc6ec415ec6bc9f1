# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The report files of a run: results.json (docs/results.md), junit.xml and report.html.

The three are rendered from the results document, the outcome of ``training_assert`` plus the run's
identity, and lead with the same thing: the headline and the culprit (``_report_view``).
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import socket
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number
from ansible_collections.clusterval.training.plugins.module_utils._report_html import html_report
from ansible_collections.clusterval.training.plugins.module_utils._report_view import (
    FAIL, NOT_JUDGED, View, headline, realism_sentence, view)

__all__ = ["DOCUMENT_KEYS", "SCHEMA_VERSION", "html_report", "junit_xml", "results_document", "results_json",
           "strict_json", "write_reports"]

# The results.json layout this code writes (docs/results.md). Raise it when a key changes meaning or goes.
SCHEMA_VERSION = 1
# The keys of results.json, in the order docs/results.md describes them.
DOCUMENT_KEYS = ("schema_version", "verdict", "headline", "culprit", "consequences", "failures", "checks", "judged",
                 "unjudged", "baseline", "effective_model", "summary", "series", "simulated", "run_id", "config_name",
                 "framework", "model", "gpu_arch", "mode", "final_step", "total_steps", "warmup_steps",
                 "straggler_pct", "run_dir", "generated_at", "teardown")
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
    return document


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

def junit_order(document: Mapping[str, Any], shown: View) -> List[Dict[str, Any]]:
    """Every check once: the culprit's first, then the other failures, the consequences, then the rest."""
    lead = list(shown.culprit_checks)
    for group in shown.failed + shown.consequential:
        lead.extend(group.checks)
    seen = {id(c) for c in lead}
    return lead + [c for c in document.get("checks") or [] if isinstance(c, dict) and id(c) not in seen]


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
    """One suite, one testcase per check (the culprit's first), valid against the Jenkins xUnit plugin's
    junit-10.xsd; a simulated run says so in the suite name and a property. ``seconds``: how long the
    training ran (the suite's time), when the caller knows it."""
    shown = shown or view(document)
    checks = junit_order(document, shown)
    name = "clusterval.training %s%s" % (document.get("config_name") or document.get("run_id") or "run",
                                         " [SIMULATED]" if shown.simulated else "")
    counts = {"tests": len(checks), "failures": sum(1 for c in checks if c.get("status") == FAIL), "errors": 0,
              "time": "%.3f" % (seconds if is_finite_number(seconds) and seconds >= 0 else run_seconds(document))}
    suites = element(None, "testsuites", name=name, **counts)
    suite = element(suites, "testsuite", name=name, skipped=sum(1 for c in checks if c.get("status") in NOT_JUDGED),
                    timestamp=junit_timestamp(document), hostname=hostname or socket.gethostname(), id=0,
                    package="clusterval.training", **counts)
    properties = element(suite, "properties")
    for key, value in junit_properties(document, shown):
        element(properties, "property", name=key, value=value)
    culprit_case = shown.culprit_checks[0] if shown.culprit_checks else None
    for check in checks:
        junit_case(suite, check, shown.headline if check is culprit_case else None)
    return ET.tostring(suites, encoding="unicode") + "\n"


def junit_case(suite: ET.Element, check: Mapping[str, Any], headline_text: Optional[str]) -> None:
    """A passing check is its name only (the suite stays small at 500 nodes); a failure carries its detail,
    the culprit's the headline first."""
    case_name = ("%s %s" % (check.get("check"), check.get("metric") or "")).strip()
    case = element(suite, "testcase", classname=check.get("node"), name=case_name, time="0")
    detail = str(check.get("detail") or "")
    if check.get("status") == FAIL:
        text = "%s%s: %s" % (headline_text + "\n" if headline_text else "", check.get("node"), detail)
        element(case, "failure", text, message=detail, type=check.get("check"))
    elif check.get("status") in NOT_JUDGED:
        element(case, "skipped", message=detail)


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

def write_reports(run_dir: str, document: Dict[str, Any], seconds: Optional[float] = None) -> Dict[str, str]:
    """Write results.json, junit.xml and report.html into ``run_dir`` (created if needed); returns their
    paths. ``seconds``: how long the training ran, for JUnit."""
    os.makedirs(run_dir, exist_ok=True)
    shown = view(document)
    files = {"results.json": results_json(document), "junit.xml": junit_xml(document, shown=shown, seconds=seconds),
             "report.html": html_report(document, shown)}
    paths = {}
    for name, content in files.items():
        path = os.path.join(run_dir, name)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(temporary, path)
        paths[name] = path
    return paths
