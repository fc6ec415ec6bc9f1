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
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils._report import results_document

RUN_KEYS = ("run_id", "config_name", "framework", "model", "gpu_arch", "mode", "final_step", "total_steps",
            "warmup_steps", "effective_model")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stopped_outcome(plan: Mapping[str, Any], reason: str) -> Dict[str, Any]:
    """The outcome of a run that never reached its verdict."""
    outcome: Dict[str, Any] = {key: plan.get(key) for key in RUN_KEYS}
    outcome.update(verdict="FAIL", headline="FAIL: stopped before the verdict: %s" % reason.strip(),
                   failures=[reason.strip()], checks=[], culprit=None, consequences=[], judged=[], unjudged=[],
                   summary={"nodes": {}, "cluster": {}}, series={}, simulated=bool(plan.get("simulated")))
    return outcome


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
        if result.get("verdict") != "FAIL":
            result.update(verdict="FAIL", headline="FAIL: teardown failed: %s" % "; ".join(failed))
        else:
            result["headline"] = "%s; teardown failed on %d node(s)" % (outcome.get("headline") or "FAIL", len(failed))
    return result


def document_of(plan: Mapping[str, Any], verdict: Optional[Mapping[str, Any]], stop_reason: Optional[str],
                teardown: Optional[Mapping[str, Any]], run_dir: str) -> Dict[str, Any]:
    """The results document to write: the verdict's, or a stop's, with the teardown, stamped now."""
    if verdict and verdict.get("verdict"):
        outcome = dict(verdict)
    else:
        outcome = stopped_outcome(plan, stop_reason or "the run ended before its verdict (see the output)")
    outcome["run_dir"] = run_dir
    return results_document(with_teardown(outcome, teardown), now())
