# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Steady-state aggregates, threshold checks, convergence, completion, stragglers, verdict."""
from __future__ import annotations

import math
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import (
    HIGHER,
    THROUGHPUT_PREFERENCE,
    direction_of,
)
from ansible_collections.clusterval.training.plugins.module_utils._stacks import default_warmup
from ansible_collections.clusterval.training.plugins.module_utils._steady import is_finite_number

THRESHOLD_KINDS = ("min", "max", "within", "min_ratio", "info")
SERIES_METRICS = ("loss",) + THROUGHPUT_PREFERENCE


def steady_steps(steps: Sequence[Dict[str, Any]], warmup_steps: int) -> List[Dict[str, Any]]:
    """Steps after the first ``warmup_steps`` distinct step numbers (ordered by step)."""
    ordered = sorted(steps, key=lambda s: s["step"])
    numbers = sorted({s["step"] for s in ordered})
    if len(numbers) <= warmup_steps:
        return []
    first = numbers[warmup_steps]
    return [s for s in ordered if s["step"] >= first]


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(0, math.ceil(pct / 100.0 * len(ordered)) - 1)
    return ordered[rank]


def aggregate(steps: Sequence[Dict[str, Any]], metric: str) -> Optional[Dict[str, Any]]:
    points = [(s["step"], s[metric]) for s in steps if is_finite_number(s.get(metric))]
    if not points:
        return None
    values = [v for dummy, v in points]
    return {
        "mean": statistics.fmean(values), "median": statistics.median(values), "min": min(values),
        "max": max(values), "p5": percentile(values, 5), "count": len(values),
        "first_step": points[0][0], "last_step": points[-1][0],
    }


def loss_slope(points: Sequence[Tuple[float, float]]) -> float:
    n = len(points)
    mean_x = sum(p[0] for p in points) / n
    mean_y = sum(p[1] for p in points) / n
    var = sum((p[0] - mean_x) ** 2 for p in points)
    if var == 0:
        return 0.0
    return sum((p[0] - mean_x) * (p[1] - mean_y) for p in points) / var


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return "%.4g" % value if abs(value) < 0.01 and value != 0 else "%.1f" % value if abs(value) >= 100 else "%.3f" % value
    return str(value)


def make_check(node: str, check: str, status: str, metric: Optional[str] = None, expected: Any = None,
               actual: Any = None, detail: str = "") -> Dict[str, Any]:
    return {"node": node, "check": check, "metric": metric, "expected": expected, "actual": actual,
            "status": status, "detail": detail}


def failure_line(check: Dict[str, Any]) -> str:
    return "%s: %s" % (check["node"], check["detail"])


def judge_threshold(node: str, threshold: Dict[str, Any], steady: Sequence[Dict[str, Any]],
                    summary: Dict[str, float]) -> Dict[str, Any]:
    metric = threshold.get("metric", "?")
    kind = threshold.get("kind") or ("min" if direction_of(metric) == HIGHER else "max")
    value = threshold.get("value")
    if kind not in THRESHOLD_KINDS:
        return make_check(node, "threshold", "fail", metric, value, None,
                          "%s: unknown threshold kind %r (expected one of %s)" % (metric, kind, ", ".join(THRESHOLD_KINDS)))
    stats = aggregate(steady, metric)
    if stats is not None:
        actual, where = stats["mean"], "steady mean over steps %s-%s" % (stats["first_step"], stats["last_step"])
    elif is_finite_number(summary.get(metric)):
        actual, where = summary[metric], "training script summary"
    elif kind == "info" or not threshold.get("set", True) or value is None:
        return make_check(node, "threshold", "info" if kind == "info" else "no_threshold", metric, value, None,
                          "%s not measured (%s)" % (metric, threshold.get("unset_reason") or kind))
    else:
        return make_check(node, "threshold", "fail", metric, value, None,
                          "%s missing: no value after warm-up (%s)" % (metric, kind))
    if kind == "info":
        return make_check(node, "threshold", "info", metric, value, actual, "%s %s (info, %s)" % (metric, fmt(actual), where))
    if not threshold.get("set", True) or value is None:
        return make_check(node, "threshold", "no_threshold", metric, None, actual,
                          "%s %s: no threshold set (%s)" % (metric, fmt(actual), where))
    return compare(node, metric, kind, float(value), actual, where, threshold, steady)


def compare(node: str, metric: str, kind: str, value: float, actual: float, where: str,
            threshold: Dict[str, Any], steady: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    if kind == "min":
        ok, sign = actual >= value, "<"
        text = "%s %s %s %s (min, %s)" % (metric, fmt(actual), sign if not ok else ">=", fmt(value), where)
    elif kind == "max":
        ok = actual <= value
        text = "%s %s %s %s (max, %s)" % (metric, fmt(actual), ">" if not ok else "<=", fmt(value), where)
    elif kind == "within":
        pct = float(threshold.get("pct", 5.0))
        ok = abs(actual - value) <= abs(value) * pct / 100.0
        text = "%s %s %s %s +/- %s%% (within, %s)" % (
            metric, fmt(actual), "outside" if not ok else "within", fmt(value), fmt(pct), where)
    else:
        other = threshold.get("of")
        other_stats = aggregate(steady, other) if other else None
        if not other_stats or other_stats["mean"] == 0:
            return make_check(node, "threshold", "fail", metric, value, actual,
                              "%s: min_ratio needs metric %r, not found" % (metric, other))
        ratio = actual / other_stats["mean"]
        ok = ratio >= value
        text = "%s/%s ratio %s %s %s (min_ratio, %s)" % (
            metric, other, fmt(ratio), "<" if not ok else ">=", fmt(value), where)
        actual = ratio
    return make_check(node, "threshold", "pass" if ok else "fail", metric, value, actual, text)


# Step-time metrics in ms per unit of the framework's own step time.
STEP_TIME_MS = {"seconds": 1000.0, "elapsed_time_per_iteration": 1.0}
TOKENS_PER_GPU = ("tokens_per_sec_per_gpu", "tokens_per_gpu")


def interpolated_percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between the closest ranks, as numpy's default (the suite's figures)."""
    ordered = sorted(values)
    rank = pct / 100.0 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def step_time_metrics(steady: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    for key, to_ms in STEP_TIME_MS.items():
        values = [s[key] * to_ms for s in steady if is_finite_number(s.get(key))]
        if values:
            mean = statistics.fmean(values)
            return {"step_time_seconds": mean / 1000.0, "step_time_mean_ms": mean,
                    "step_time_p50_ms": interpolated_percentile(values, 50),
                    "step_time_p95_ms": interpolated_percentile(values, 95)}
    return {}


def loss_metrics(steps: Sequence[Dict[str, Any]]) -> Dict[str, float]:
    points = [(s["step"], s["loss"]) for s in sorted(steps, key=lambda s: s["step"]) if is_finite_number(s.get("loss"))]
    if not points:
        return {}
    first, last = points[0][1], points[-1][1]
    metrics = {"final_loss": last, "loss_decreased": 1.0 if len(points) > 1 and last < first else 0.0}
    if len(points) > 1:
        metrics["loss_slope"] = loss_slope(points)
    return metrics


def throughput_metrics(steady: Sequence[Dict[str, Any]], job_gpus: Optional[int],
                       scaling: Optional[Mapping[str, Any]], nnodes: int) -> Dict[str, float]:
    """The job's tokens/s as this node measured it (per-GPU tokens x the job's GPUs), and the scaling
    efficiency against ``scaling`` (a run's total on ``num_nodes`` nodes)."""
    metric = next((m for m in TOKENS_PER_GPU if aggregate(steady, m)), None)
    if metric is None or not job_gpus:
        return {}
    total = aggregate(steady, metric)["mean"] * job_gpus
    result = {"tokens_per_sec_total": total}
    if scaling and scaling.get("tokens_per_sec_total") and scaling.get("num_nodes"):
        ideal = nnodes / float(scaling["num_nodes"]) * float(scaling["tokens_per_sec_total"])
        result["scaling_efficiency_pct"] = 100.0 * total / ideal
    return result


def run_metrics(steps: Sequence[Dict[str, Any]], steady: Sequence[Dict[str, Any]], plan: Mapping[str, Any],
                node: str) -> Dict[str, float]:
    """Whole-run metrics of one node: step time mean/p50/p95 after warm-up, final loss, whether the loss
    decreased, the job's tokens/s and its scaling efficiency (docs/results.md)."""
    job_name = ((plan.get("nodes") or {}).get(node) or {}).get("job")
    job = next((j for j in plan.get("jobs") or [] if j.get("name") == job_name), {})
    nnodes = int(job.get("nnodes") or 1)
    gpus = plan.get("gpus_per_node")
    metrics = step_time_metrics(steady)
    metrics.update(loss_metrics(steps))
    metrics.update(throughput_metrics(steady, int(gpus) * nnodes if gpus else None, plan.get("scaling_baseline"),
                                      nnodes))
    return metrics


def judge_convergence(node: str, steps: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    losses = [(s["step"], s["loss"]) for s in sorted(steps, key=lambda s: s["step"]) if "loss" in s]
    bad = [p for p in losses if not is_finite_number(p[1])]
    if bad:
        return make_check(node, "convergence", "fail", "loss", "finite", bad[0][1],
                          "loss %s at step %s" % (bad[0][1], bad[0][0]))
    if len(losses) < 2:
        return make_check(node, "convergence", "fail", "loss", "decreasing", None,
                          "loss: %d value(s), at least 2 needed to judge convergence" % len(losses))
    slope = loss_slope(losses)
    ok = slope < 0 or losses[-1][1] < losses[0][1]
    detail = "loss %s -> %s over steps %s-%s (slope %.3g/step)" % (
        fmt(losses[0][1]), fmt(losses[-1][1]), losses[0][0], losses[-1][0], slope)
    return make_check(node, "convergence", "pass" if ok else "fail", "loss", "decreasing", slope,
                      detail + ("" if ok else ": not decreasing"))


def judge_finite(node: str, steps: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    for step in steps:
        bad = [k for k in step.get("nonfinite", []) if k != "loss"]
        if bad:
            return make_check(node, "finite", "fail", bad[0], "finite", step.get(bad[0]),
                              "%s is %s at step %s" % (bad[0], step.get(bad[0]), step["step"]))
    return None


def judge_completion(node: str, last_step: Optional[int], final_step: Optional[int]) -> Dict[str, Any]:
    if final_step is None:
        return make_check(node, "completion", "fail", "step", None, last_step, "final step unknown: cannot judge completion")
    if last_step is not None and last_step >= final_step:
        return make_check(node, "completion", "pass", "step", final_step, last_step,
                          "reached step %s of %s" % (last_step, final_step))
    return make_check(node, "completion", "fail", "step", final_step, last_step,
                      "stopped at step %s of %s" % ("none" if last_step is None else last_step, final_step))


def judge_stragglers(means: Dict[str, float], metric: str, pct: float) -> List[Dict[str, Any]]:
    if len(means) < 2:
        return []
    median = statistics.median(means.values())
    floor = median * (1.0 - pct / 100.0)
    checks = []
    for node, mean in sorted(means.items()):
        ok = mean >= floor
        detail = "%s %s is %.1f%% %s the cluster median %s (straggler limit %g%%)" % (
            metric, fmt(mean), abs(100.0 * (mean - median) / median) if median else 0.0,
            "below" if mean < median else "above", fmt(median), pct)
        checks.append(make_check(node, "straggler", "pass" if ok else "fail", metric, floor, mean, detail))
    return checks


def primary_throughput(steps: Sequence[Dict[str, Any]]) -> Optional[str]:
    for metric in THROUGHPUT_PREFERENCE:
        if any(is_finite_number(s.get(metric)) for s in steps):
            return metric
    return None


MAX_ERROR_CHECKS_PER_NODE = 5
SERIES_POINT_BUDGET = 20000
MAX_POINTS_PER_CURVE = 300


def downsample(points: List[List[float]], limit: int) -> List[List[float]]:
    if len(points) <= limit:
        return points
    stride = len(points) / float(limit - 1)
    picked = [points[int(i * stride)] for i in range(limit - 1)]
    return picked + [points[-1]]


def node_series(steps: Sequence[Dict[str, Any]], steady: Sequence[Dict[str, Any]],
                limit: int) -> Dict[str, List[List[float]]]:
    """Loss over every step; throughput and step time (``seconds``) after warm-up only (step 1 can be absurdly
    fast, step 0 compiles); ``elapsed``: seconds since the first step began, summed over every step, for the
    report's wall-clock axis."""
    series: Dict[str, List[List[float]]] = {}
    for metric in SERIES_METRICS + ("seconds",):
        source = steps if metric == "loss" else steady
        points = [[s["step"], s[metric]] for s in source if isinstance(s.get(metric), (int, float))]
        if points:
            series[metric] = downsample(points, limit)
    elapsed = 0.0
    clock = []
    for step in steps:
        seconds = step.get("seconds")
        if not is_finite_number(seconds) or seconds < 0:
            break
        elapsed += seconds
        clock.append([step["step"], round(elapsed, 3)])
    if clock:
        series["elapsed"] = downsample(clock, limit)
    return series


def error_checks(node: str, state: Dict[str, Any], plan_node: Dict[str, Any]) -> List[Dict[str, Any]]:
    errors = list(state.get("errors") or [])
    path = state.get("log_path") or plan_node.get("log_path") or "the training log"
    checks = [make_check(node, "errors", "fail", e.get("class"), "no error lines", e.get("text"),
                         "%s at line %s of %s: %s" % (e.get("class"), e.get("line", e.get("lineno")), path,
                                                      (e.get("text") or "")[:300]))
              for e in errors[:MAX_ERROR_CHECKS_PER_NODE]]
    total = max(len(errors), int(state.get("errors_total") or 0))
    if total > MAX_ERROR_CHECKS_PER_NODE:
        checks.append(make_check(node, "errors", "fail", None, "no error lines", total,
                                 "%d more error lines in %s" % (total - MAX_ERROR_CHECKS_PER_NODE, path)))
    return checks


def exit_checks(node: str, state: Dict[str, Any]) -> List[Dict[str, Any]]:
    checks = []
    exit_code = state.get("exit_code")
    if exit_code is not None and exit_code != 0:
        checks.append(make_check(node, "exit_code", "fail", "exit_code", 0, exit_code,
                                 "training exited with status %s" % exit_code))
    reason = state.get("reason")
    if reason in ("hang", "deadline", "aborted", "unreachable", "lease", "stopped"):
        detail = state.get("msg") or "training watch stopped: %s" % reason
        checks.append(make_check(node, "progress", "fail", None, "completed", reason, detail))
    return checks


def step_checks(node: str, state: Dict[str, Any], plan: Dict[str, Any], warmup: int) -> List[Dict[str, Any]]:
    steps = list(state.get("steps") or [])
    last_step = state.get("last_step")
    if last_step is None and steps:
        last_step = max(s["step"] for s in steps)
    checks = [judge_completion(node, last_step, plan.get("final_step")), judge_convergence(node, steps)]
    finite = judge_finite(node, steps)
    if finite:
        checks.append(finite)
    steady = steady_steps(steps, warmup)
    summary = dict(run_metrics(steps, steady, plan, node), **(state.get("summary") or {}))
    checks.extend(judge_threshold(node, t, steady, summary) for t in plan.get("thresholds") or [])
    return checks


def silent_node_checks(node: str, state: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A Megatron node that is not the job's last prints no iteration lines."""
    if state.get("exit_code") == 0:
        return [make_check(node, "completion", "pass", "exit_code", 0, 0, "exited 0 (this node prints no step lines)")]
    if state.get("exit_code") is None:
        return [make_check(node, "completion", "fail", "exit_code", 0, None,
                           "this node prints no step lines and its training never reported an exit status")]
    return []  # a non-zero exit is failed by exit_checks


def evaluate(plan: Dict[str, Any], nodes: Dict[str, Dict[str, Any]], straggler_pct: float = 10.0,
             warmup_steps: Optional[int] = None) -> Dict[str, Any]:
    """All checks for all nodes, the verdict, per-node summaries and downsampled series."""
    framework = plan.get("framework")
    warmup = warmup_steps if warmup_steps is not None else plan.get("warmup_steps")
    warmup = default_warmup(framework) if warmup is None else int(warmup)
    plan_nodes = plan.get("nodes") or {}
    checks: List[Dict[str, Any]] = []
    throughput_means: Dict[str, float] = {}
    summaries: Dict[str, Any] = {}
    series: Dict[str, Any] = {}
    limit = max(10, min(MAX_POINTS_PER_CURVE, SERIES_POINT_BUDGET // max(1, 5 * len(nodes))))
    if not nodes:
        checks.append(make_check("cluster", "nodes", "fail", None, "at least one node", 0, "no node results to judge"))
    for node in sorted(nodes):
        state = nodes[node] or {}
        plan_node = plan_nodes.get(node) or {}
        prints_steps = plan_node.get("prints_steps", True)
        steps = list(state.get("steps") or [])
        checks.extend(error_checks(node, state, plan_node))
        checks.extend(exit_checks(node, state))
        checks.extend(step_checks(node, state, plan, warmup) if prints_steps else silent_node_checks(node, state))
        steady = steady_steps(steps, warmup)
        metric = primary_throughput(steady)
        if prints_steps and metric:
            throughput_means[node] = aggregate(steady, metric)["mean"]
        summaries[node] = {
            "last_step": state.get("last_step", max((s["step"] for s in steps), default=None)),
            "steps": len(steps), "prints_steps": prints_steps, "exit_code": state.get("exit_code"),
            "errors": max(len(state.get("errors") or []), int(state.get("errors_total") or 0)),
            "simulated": bool(state.get("simulated")),
            "steady": {m: aggregate(steady, m) for m in SERIES_METRICS + ("elapsed_time_per_iteration", "seconds", "mem_usage")
                       if aggregate(steady, m) is not None},
            "run": run_metrics(steps, steady, plan, node) if prints_steps else {},
        }
        series[node] = node_series(sorted(steps, key=lambda s: s["step"]), steady, limit)
    metric = next((m for m in THROUGHPUT_PREFERENCE
                   if all(primary_throughput(steady_steps(nodes[n].get("steps") or [], warmup)) == m
                          for n in throughput_means)), None)
    if metric:
        checks.extend(judge_stragglers(throughput_means, metric, straggler_pct))
    failures = [failure_line(c) for c in checks if c["status"] == "fail"]
    return {
        "checks": checks, "verdict": "FAIL" if failures else "PASS", "failures": failures,
        "summary": {"nodes": summaries, "cluster": cluster_summary(summaries)},
        "series": series, "warmup_steps": warmup, "straggler_pct": straggler_pct,
        "simulated": bool(plan.get("simulated")) or any(s["simulated"] for s in summaries.values()),
        # the real-framework image on simulated nodes: what was real and what was simulated
        **({"realism": plan["realism"]} if plan.get("realism") else {}),
    }


def cluster_summary(summaries: Dict[str, Any]) -> Dict[str, Any]:
    """Across nodes: their steady means, and their whole-run metrics."""
    values: Dict[str, List[float]] = {}
    for summary in summaries.values():
        for metric, stats in summary["steady"].items():
            values.setdefault(metric, []).append(stats["mean"])
        for metric, value in (summary.get("run") or {}).items():
            values.setdefault(metric, []).append(value)
    return {metric: {"mean": statistics.fmean(means), "median": statistics.median(means), "min": min(means),
                     "max": max(means), "nodes": len(means)} for metric, means in sorted(values.items())}


def small_metrics(plan: Dict[str, Any], outcome: Dict[str, Any], run_dir: Optional[str]) -> Dict[str, Any]:
    """What ansible-runner / AWX receive through run-level set_stats: small and flat."""
    nodes = {}
    for node, summary in outcome["summary"]["nodes"].items():
        nodes[node] = {"last_step": summary["last_step"], "errors": summary["errors"],
                       "exit_code": summary["exit_code"],
                       "steady_mean": {m: a["mean"] for m, a in summary["steady"].items()}}
    return {
        "verdict": outcome["verdict"], "run_dir": run_dir, "run_id": plan.get("run_id"),
        "config_name": plan.get("config_name"), "framework": plan.get("framework"),
        "simulated": outcome["simulated"], "failures": outcome["failures"][:50],
        "cluster": outcome["summary"]["cluster"], "nodes": nodes,
    }
