# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side verdict: checks every node against the plan, fails with one line per failed check.

The nodes' states and the run's one decision of the culprit are read from the watch's own files
(``_run_watch.conclude``), unless ``nodes`` is given (a log judged without a watch)."""
from __future__ import annotations

from typing import Any, Dict, Optional


from ansible_collections.clusterval.training.plugins.module_utils import _baseline, _isolate, _run_watch, _verdict
from ansible_collections.clusterval.training.plugins.module_utils._metrics import small_metrics
from ansible_collections.clusterval.training.plugins.module_utils._policy import Policy
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction

# The policy's options (straggler_pct, ..., baseline_tolerance) are _policy.POLICY_SPEC's (a unit test).
ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    nodes=dict(type="dict"),
    run_dir=dict(type="path"),
    straggler_pct=dict(type="float", default=10.0),
    warmup_steps=dict(type="int"),
    fail_on_verdict=dict(type="bool", default=True),
    require_thresholds=dict(type="bool", default=False),
    baseline=dict(type="path"),
    baseline_tolerance=dict(type="raw", default=5),
    fabric=dict(type="dict"),
)


def bad_node_entries(nodes: Dict[str, Any]) -> list:
    return ["nodes.%s: expected a dict with steps, errors, exit_code, found %s" % (host, repr(state)[:80])
            for host, state in nodes.items() if not isinstance(state, dict)]


def next_step(outcome: Dict[str, Any], plan: Dict[str, Any], task_vars: Dict[str, Any]) -> Optional[str]:
    """When the verdict names no node (a lock-step hang) or the whole cluster is slow: the exact command that
    re-runs the config for a few steps on halves of the nodes (playbooks/isolate.yml)."""
    reason = _verdict.undetermined_reason(outcome)
    if reason is None:
        return None
    sources = task_vars.get("ansible_inventory_sources") or [task_vars.get("inventory_file") or "<inventory>"]
    return _isolate.isolation_advice(reason, [str(source) for source in sources],
                                     str(plan.get("config_path") or "<config>"), ":".join(plan.get("nodes") or {}),
                                     run_selection(plan))


def run_selection(plan: Dict[str, Any]) -> Dict[str, str]:
    """What picks the same job from the config again: its model and GPU arch keys."""
    return {"training_%s" % key: str(plan[key]) for key in ("model", "gpu_arch") if plan.get(key)}


def run_info(plan: Dict[str, Any]) -> Dict[str, Any]:
    return {key: plan.get(key) for key in ("run_id", "config_name", "config_path", "framework", "model", "gpu_arch",
                                           "mode", "final_step", "total_steps")}


class ActionModule(CollectionAction):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "training_assert")
        plan, nodes, analysis = args["plan"], args["nodes"], None
        if nodes is None:
            if not args["run_dir"]:
                result.update(failed=True, msg="training_assert: give nodes, or run_dir with the watch's files")
                return result
            concluded = _run_watch.conclusion(args["run_dir"], str(plan.get("run_id") or "run"), list(plan["nodes"]))
            nodes, analysis = concluded.pop("states"), concluded
        problems = bad_node_entries(nodes)
        if problems:
            result.update(failed=True, msg="; ".join(problems))
            return result
        policy = Policy.of(args)
        try:
            plan = policy.with_baseline(plan)
        except _baseline.BaselineError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        outcome = policy.verdict(plan, nodes, analysis)
        advice = next_step(outcome, plan, task_vars or {})
        if advice:
            outcome["advice"] = advice
        info = run_info(plan)
        result.update(outcome)
        result.update(info)
        result["run_dir"] = args["run_dir"]
        if args["fabric"]:
            # The fabric gate's verdict beside the training's, for the verdict block (a fabric not measured).
            result["fabric"] = args["fabric"]
        result["changed"] = False
        result["ansible_stats"] = {"data": {"clusterval_training": small_metrics(plan, outcome, args["run_dir"])},
                                   "per_host": False, "aggregate": False}
        if outcome["verdict"] == "FAIL" and args["fail_on_verdict"]:
            result["failed"] = True
            result["msg"] = "\n".join([outcome["headline"]] * bool(outcome["headline"]) + outcome["failures"]
                                      + ["next step: %s" % outcome["advice"]] * bool(outcome.get("advice")))
        else:
            result["msg"] = "verdict %s: %d checks, %d failed" % (
                outcome["verdict"], len(outcome["checks"]), len(outcome["failures"]))
        return result
