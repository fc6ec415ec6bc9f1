# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Thresholds from a known-good run: its results.json's steady means, within a tolerance.

Every results.json is a valid baseline (``summary.cluster.<metric>.mean``, the mean of the nodes'
steady means). A metric whose threshold the config leaves unset, and the run's throughput metrics,
get ``min`` = mean x (1 - tolerance) when higher is better, ``max`` = mean x (1 + tolerance) when
lower is better. Thresholds the config sets stay as they are. Its total tokens/s and node count are
what scaling efficiency is measured against when the config has no scaling baseline (a single-node run
as the baseline of a multi-node one).
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Union

from ansible_collections.clusterval.training.plugins.module_utils._errors import ClustervalError
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import (
    HIGHER, THROUGHPUT_PREFERENCE, direction_of)

DEFAULT_TOLERANCE_PCT = 5.0


class BaselineError(ClustervalError, ValueError):
    """A baseline that cannot be used; the message names the file and what is wrong."""


def load(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as exc:
        raise BaselineError("training_baseline: cannot read %s (%s)" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise BaselineError("training_baseline: %s is not JSON (%s)" % (path, exc))
    cluster = ((document.get("summary") or {}).get("cluster") if isinstance(document, dict) else None)
    if not isinstance(cluster, dict) or not cluster:
        raise BaselineError("training_baseline: %s: expected a results.json with summary.cluster (the steady means "
                            "of a finished run), found none" % path)
    return document


def tolerance_of(metric: str, tolerance: Union[None, float, Mapping[str, Any]]) -> float:
    """The tolerance in percent for ``metric``: one number for all, or per metric with ``default``."""
    if isinstance(tolerance, Mapping):
        value = tolerance.get(metric, tolerance.get("default", DEFAULT_TOLERANCE_PCT))
    else:
        value = DEFAULT_TOLERANCE_PCT if tolerance is None else tolerance
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BaselineError("training_baseline_tolerance.%s: expected a percentage, found %r" % (metric, value))
    if not 0 <= number < 100:
        raise BaselineError("training_baseline_tolerance.%s: expected 0 <= percent < 100, found %r" % (metric, value))
    return number


def baseline_threshold(metric: str, mean: float, pct: float) -> Dict[str, Any]:
    higher = direction_of(metric) == HIGHER
    value = mean * (1 - pct / 100.0) if higher else mean * (1 + pct / 100.0)
    return {"metric": metric, "kind": "min" if higher else "max", "value": value, "set": True,
            "direction": "higher" if higher else "lower", "source": "baseline", "baseline_mean": mean,
            "tolerance_pct": pct}


def apply(plan: Dict[str, Any], document: Mapping[str, Any], path: str,
          tolerance: Union[None, float, Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A copy of ``plan`` whose unset thresholds (and throughput metrics) come from the baseline."""
    cluster = document["summary"]["cluster"]
    scaling = plan.get("scaling_baseline") or scaling_of(document, path)
    thresholds = with_scaling(plan.get("thresholds") or [], scaling)
    kept: List[Dict[str, Any]] = []
    wanted: List[str] = []
    for threshold in thresholds:
        metric = str(threshold.get("metric"))
        if threshold.get("set", True) and threshold.get("value") is not None or threshold.get("kind") == "info":
            kept.append(threshold)
        elif metric not in wanted:
            wanted.append(metric)
    wanted += [m for m in THROUGHPUT_PREFERENCE if m in cluster and m not in wanted
               and not any(t.get("metric") == m for t in kept)]
    derived = [baseline_threshold(m, float(cluster[m]["mean"]), tolerance_of(m, tolerance))
               for m in wanted if finite_mean(cluster.get(m)) is not None]
    derived_metrics = {t["metric"] for t in derived}
    missing = [t for t in thresholds if t.get("metric") in wanted and t.get("metric") not in derived_metrics]
    result = dict(plan, scaling_baseline=scaling)
    result["thresholds"] = kept + derived + missing
    result["baseline"] = {"path": path, "run_id": document.get("run_id"),
                          "tolerance_pct": tolerance if isinstance(tolerance, Mapping) else
                          (DEFAULT_TOLERANCE_PCT if tolerance is None else float(tolerance)),
                          "metrics": sorted(derived_metrics)}
    return result


def finite_mean(aggregate: Optional[Mapping[str, Any]]) -> Optional[float]:
    mean = (aggregate or {}).get("mean") if isinstance(aggregate, Mapping) else None
    return float(mean) if isinstance(mean, (int, float)) and math.isfinite(mean) and mean > 0 else None


def scaling_of(document: Mapping[str, Any], path: str) -> Optional[Dict[str, Any]]:
    """The baseline run's total tokens/s and node count: what scaling efficiency is measured against."""
    total = finite_mean(document["summary"]["cluster"].get("tokens_per_sec_total"))
    nodes = len(document["summary"].get("nodes") or {})
    if total is None or not nodes:
        return None
    return {"tokens_per_sec_total": total, "num_nodes": float(nodes), "source": path}


def with_scaling(thresholds: List[Dict[str, Any]], scaling: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """A scaling-efficiency threshold left unjudged for want of a scaling baseline is judged once there is one."""
    if not scaling:
        return thresholds
    return [{key: value for key, value in dict(t, set=True).items() if key != "unset_reason"}
            if t.get("metric") == "scaling_efficiency_pct" and t.get("unset_reason") and t.get("value") is not None
            else t for t in thresholds]
