# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The metrics the collection knows: one owner for each metric's direction, unit and meaning.

Names are the keys of the seed configs' ``result_dict`` and of the validation suite's threshold files
(whose ``training.`` prefix ``canonical_name`` drops). Everything that judges, plans or shows a metric
asks here instead of keeping a table of its own.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional

HIGHER = "higher"
LOWER = "lower"
SUITE_PREFIX = "training."


class MetricDef(NamedTuple):
    name: str
    direction: str
    unit: str
    description: str


def _define(*rows: MetricDef) -> Dict[str, MetricDef]:
    return {row.name: row for row in rows}


METRICS: Dict[str, MetricDef] = _define(
    # per GPU, steady state (after warm-up)
    MetricDef("tflops_per_sec_per_gpu", HIGHER, "TFLOP/s/GPU", "MaxText TFLOP/s/device"),
    MetricDef("tokens_per_sec_per_gpu", HIGHER, "tokens/s/GPU", "MaxText Tokens/s/device"),
    MetricDef("throughput_per_gpu", HIGHER, "TFLOP/s/GPU", "Megatron-LM throughput per GPU (TorchTitan's tflops)"),
    MetricDef("tokens_per_gpu", HIGHER, "tokens/s/GPU", "Megatron-LM tokens per GPU per second (TorchTitan's tps)"),
    MetricDef("elapsed_time_per_iteration", LOWER, "ms", "Megatron-LM elapsed time per iteration"),
    MetricDef("seconds", LOWER, "s", "seconds per step (MaxText; NxDT's bar, from s/it or it/s)"),
    MetricDef("mem_usage", LOWER, "fraction", "GPU memory in use (ROCm Megatron-LM mem usages)"),
    MetricDef("mem_used_gb", LOWER, "GB", "GPU memory in use (Primus hip mem usage)"),
    MetricDef("throughput", HIGHER, "seq/s", "Neuronx Distributed Training throughput of its progress line"),
    MetricDef("tokens_per_sec", HIGHER, "tokens/s/GPU", "TorchTitan tps (tokens per second per device; the suite's "
              "result_dict key)"),
    MetricDef("mfu_pct", HIGHER, "%", "TorchTitan model FLOPs utilization"),
    MetricDef("mem_gib", LOWER, "GiB", "TorchTitan peak reserved GPU memory"),
    # per job
    MetricDef("tokens_per_sec_total", HIGHER, "tokens/s", "tokens per second of the whole job"),
    MetricDef("scaling_efficiency_pct", HIGHER, "%", "per-GPU throughput against a single-node run or a baseline"),
    MetricDef("step_time_seconds", LOWER, "s", "mean step time"),
    MetricDef("step_time_mean_ms", LOWER, "ms", "mean step time"),
    MetricDef("step_time_p50_ms", LOWER, "ms", "median step time"),
    MetricDef("step_time_p95_ms", LOWER, "ms", "95th percentile step time"),
    # convergence
    MetricDef("final_loss", LOWER, "", "loss at the last step"),
    MetricDef("loss_decreased", HIGHER, "bool", "1 when the loss decreased over the run, else 0"),
    MetricDef("loss_slope", LOWER, "/step", "least-squares slope of the loss over the run's steps (the suite's "
              "loss_curve check)"),
    MetricDef("eval_loss", LOWER, "", "last evaluation loss"),
    MetricDef("steps_to_target", LOWER, "steps", "steps until the loss reached its target"),
    MetricDef("time_to_target_seconds", LOWER, "s", "seconds until the loss reached its target"),
)

# Per-GPU throughput metrics, the most telling first (tokens beat TFLOP/s: they need no FLOP model).
THROUGHPUT_PREFERENCE = ("tokens_per_sec_per_gpu", "tokens_per_gpu", "tokens_per_sec", "throughput_per_gpu",
                         "tflops_per_sec_per_gpu")


def canonical_name(name: str) -> str:
    """The metric's name without the validation suite's ``training.`` prefix."""
    return name[len(SUITE_PREFIX):] if name.startswith(SUITE_PREFIX) else name


def metric_def(name: str) -> Optional[MetricDef]:
    return METRICS.get(canonical_name(name))


# Words that make an unknown metric lower-is-better (times, memory, losses); any other is higher-is-better.
LOWER_WORDS = ("time", "latency", "seconds", "mem", "loss")


def direction_of(name: str) -> str:
    known = metric_def(name)
    if known:
        return known.direction
    return LOWER if any(word in canonical_name(name) for word in LOWER_WORDS) else HIGHER


def is_throughput(name: str) -> bool:
    return canonical_name(name) in THROUGHPUT_PREFERENCE
