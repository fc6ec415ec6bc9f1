# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side verdict: checks every node against the plan, fails with one line per failed check."""
from __future__ import annotations

from typing import Any, Dict

from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._metrics import small_metrics
from ansible_collections.clusterval.training.plugins.module_utils._verdict import verdict

ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    nodes=dict(type="dict", required=True),
    run_dir=dict(type="path"),
    straggler_pct=dict(type="float", default=10.0),
    warmup_steps=dict(type="int"),
    fail_on_verdict=dict(type="bool", default=True),
    require_thresholds=dict(type="bool", default=False),
)


def bad_node_entries(nodes: Dict[str, Any]) -> list:
    return ["nodes.%s: expected a dict with steps, errors, exit_code, found %s" % (host, repr(state)[:80])
            for host, state in nodes.items() if not isinstance(state, dict)]


def run_info(plan: Dict[str, Any]) -> Dict[str, Any]:
    return {key: plan.get(key) for key in ("run_id", "config_name", "framework", "model", "gpu_arch", "mode",
                                           "final_step", "total_steps")}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        problems = bad_node_entries(args["nodes"])
        if problems:
            result.update(failed=True, msg="; ".join(problems))
            return result
        plan, nodes = args["plan"], args["nodes"]
        outcome = verdict(plan, nodes, args["straggler_pct"], args["warmup_steps"], args["require_thresholds"])
        info = run_info(plan)
        result.update(outcome)
        result.update(info)
        result["run_dir"] = args["run_dir"]
        result["changed"] = False
        result["ansible_stats"] = {"data": {"clusterval_training": small_metrics(plan, outcome, args["run_dir"])},
                                   "per_host": False, "aggregate": False}
        if outcome["verdict"] == "FAIL" and args["fail_on_verdict"]:
            result["failed"] = True
            result["msg"] = "\n".join([outcome["headline"]] * bool(outcome["headline"]) + outcome["failures"])
        else:
            result["msg"] = "verdict %s: %d checks, %d failed" % (
                outcome["verdict"], len(outcome["checks"]), len(outcome["failures"]))
        return result
