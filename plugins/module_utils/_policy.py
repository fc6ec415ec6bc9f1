# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The verdict's policy, its one owner: what a run is judged by (straggler limit, warm-up, required thresholds,
baseline and tolerance), decided once when the run starts and written with it (under ``policy`` in the record
of the nodes' launch, ``watch/<run_id>/launched.json``: no file of its own on a run directory that may be
small), so that every path judges alike: training_assert at the end of the run, the guard of an interrupted run
(``_report_guard``), the reports.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Mapping, Optional

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _baseline, _verdict
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._results import LAUNCHED_FILE

POLICY_KEY = "policy"
DEFAULT_STRAGGLER_PCT = 10.0
DEFAULT_BASELINE_TOLERANCE = 5


@dataclass(frozen=True)
class Policy:
    straggler_pct: float = DEFAULT_STRAGGLER_PCT
    warmup_steps: Optional[int] = None       # None: the plan's warmup_steps, else its stack's
    require_thresholds: bool = False
    baseline: Optional[str] = None           # a finished run's results.json
    baseline_tolerance: Any = DEFAULT_BASELINE_TOLERANCE

    @classmethod
    def of(cls, values: Optional[Mapping[str, Any]]) -> "Policy":
        """The policy of a task's arguments or of the launch record; what is missing or null keeps its default."""
        values = values or {}
        given = {item.name: values[item.name] for item in fields(cls) if values.get(item.name) is not None}
        return cls(**given)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def with_baseline(self, plan: Dict[str, Any]) -> Dict[str, Any]:
        """The plan judged: its thresholds completed by the baseline (BaselineError when it cannot be read)."""
        if not self.baseline:
            return plan
        return _baseline.apply(plan, _baseline.load(self.baseline), self.baseline, self.baseline_tolerance)

    def verdict(self, plan: Dict[str, Any], nodes: Dict[str, Dict[str, Any]],
                analysis: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The verdict on the nodes' states by this policy, of a plan already ``with_baseline``."""
        return _verdict.verdict(plan, nodes, float(self.straggler_pct), self.warmup_steps,
                                bool(self.require_thresholds), analysis)

    def judge(self, plan: Dict[str, Any], nodes: Dict[str, Dict[str, Any]],
              analysis: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        return self.verdict(self.with_baseline(plan), nodes, analysis)


def checked(values: Mapping[str, Any]) -> Policy:
    """The policy of a task's ``policy`` dict, each value checked and converted as training_assert's option."""
    validation = ArgumentSpecValidator(POLICY_SPEC).validate(dict(values))
    if validation.error_messages:
        raise ConfigError("policy", "training_assert's options (%s)" % ", ".join(POLICY_SPEC),
                          "; ".join(validation.error_messages))
    return Policy.of(validation.validated_parameters)


def launch_record(policy: Policy, now: float) -> Dict[str, Any]:
    """The record of the nodes' launch (``launched.json``), with the policy the run is judged by."""
    return {"time": now, POLICY_KEY: policy.as_dict()}


def read(directory: str) -> Policy:
    """The policy the run was started with; the defaults for a run that recorded none (an earlier version's)."""
    record = _atomic.read_json(os.path.join(directory, LAUNCHED_FILE))
    written = record.get(POLICY_KEY) if isinstance(record, dict) else None
    return Policy.of(written if isinstance(written, dict) else None)


# The policy's options, in the argument specs of the actions that take it (training_assert, training_results).
POLICY_SPEC: Dict[str, Dict[str, Any]] = dict(
    straggler_pct=dict(type="float", default=DEFAULT_STRAGGLER_PCT),
    warmup_steps=dict(type="int"),
    require_thresholds=dict(type="bool", default=False),
    baseline=dict(type="path"),
    baseline_tolerance=dict(type="raw", default=DEFAULT_BASELINE_TOLERANCE),
)
