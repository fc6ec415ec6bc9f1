# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Steady-state means of the result_dict metrics, in constant memory: a leaf, shipped with the log parser into
the training containers (the verdict, ``_metrics``, stays on the controller)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._stacks import default_warmup, stack_of


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class SteadyMeans:
    """Running steady-state means of the result_dict metrics, in constant memory.

    Steps are fed in log order; the first ``warmup`` distinct step numbers are skipped.
    """

    def __init__(self, framework: Optional[str], warmup_steps: Optional[int] = None) -> None:
        self.framework = framework
        self.warmup = warmup_steps
        self.seen: List[int] = []
        self.sums: Dict[str, List[float]] = {}

    def add(self, step: Dict[str, Any]) -> None:
        if self.framework is None:
            return
        warmup = default_warmup(self.framework) if self.warmup is None else self.warmup
        if len(self.seen) < warmup:
            if step["step"] not in self.seen:
                self.seen.append(step["step"])
            return
        if step["step"] in self.seen:
            return
        stack = stack_of(self.framework)
        for metric in stack.summary_metrics if stack else ():
            if is_finite_number(step.get(metric)):
                total = self.sums.setdefault(metric, [0.0, 0])
                total[0] += step[metric]
                total[1] += 1

    def means(self, script_summary: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Means keyed like ``result_dict``; the training script's own summary fills gaps."""
        summary = {metric: total[0] / total[1] for metric, total in self.sums.items()}
        for metric, value in (script_summary or {}).items():
            summary.setdefault(metric, value)
        return summary


def summarize(steps: Sequence[Dict[str, Any]], framework: Optional[str], warmup_steps: Optional[int] = None,
              script_summary: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    """Steady means keyed like ``result_dict`` of a list of steps."""
    means = SteadyMeans(framework, warmup_steps)
    for step in sorted(steps, key=lambda s: s["step"]):
        means.add(step)
    return means.means(script_summary)
