# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side report writer: results.json, junit.xml and report.html of a run, on every path.

With ``start``, writes no report: it keeps an earlier run's files apart in a reused run directory, marks the
nodes' launch and starts the run's guard (``_report_guard``), which writes the reports if the controller stops
before it does (Ctrl-C, SIGTERM, kill)."""
from __future__ import annotations

import os
import time

from ansible.utils.collection_loader import AnsibleCollectionConfig

from ansible_collections.clusterval.training.plugins.module_utils import _policy, _report_guard, _results, _room
from ansible_collections.clusterval.training.plugins.module_utils._console import verdict_lines
from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction, failed

ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    run_dir=dict(type="path", required=True),
    verdict=dict(type="dict"),
    stop_reason=dict(type="str"),
    teardown=dict(type="dict"),
    seconds=dict(type="float"),
    fabric=dict(type="dict"),
    scheduler=dict(type="dict"),
    failed_tasks=dict(type="dict"),
    failures=dict(type="dict"),
    reached=dict(type="dict"),
    start=dict(type="bool", default=False),
    launched=dict(type="bool", default=True),
    controller=dict(type="int"),
    policy=dict(type="dict"),  # checked against _policy.POLICY_SPEC (training_assert's options)
)


def sections(args):
    """The document's sections beside the verdict: the fabric gate's, Slurm's (its job, what sacct and srun said,
    the drain command whether it ran or not)."""
    found = {key: args[key] for key in ("fabric", "scheduler") if args[key]}
    return found or None


def run_stats(document, run_dir):
    """What AWX shows as the job's artifacts on every path: the verdict, the culprit (a node only when the
    evidence singles it out), the headline and, for a run that stopped before its verdict, the stage."""
    stop = document.get("stop") or {}
    culprit = (document.get("culprit") or {}).get("host")
    if culprit is None and len(stop.get("hosts") or []) == 1:
        culprit = stop["hosts"][0]
    return {"verdict": document["verdict"], "culprit": culprit, "headline": document["headline"],
            "stopped_in": stop.get("stage"), "run_dir": run_dir, "run_id": document.get("run_id")}


class ActionModule(CollectionAction):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "training_results")
        plan, run_dir = args["plan"], args["run_dir"]
        run_id = str(plan.get("run_id") or "run")
        if args["start"]:
            try:
                policy = _policy.checked(args["policy"] or {})
            except ConfigError as exc:
                return failed(result, "training_results", exc)
            return self.start(result, plan, run_dir, run_id, args["controller"] or os.getppid(), args["launched"],
                              policy, args["fabric"])
        stop, stages = _results.stop_and_stages(
            plan, run_dir, args["verdict"], args["stop_reason"], _results.host_records(args["failed_tasks"], args["failures"], args["reached"]),
            None, args["teardown"], fabric=args["fabric"])
        written = reported_run(plan, run_dir, args["verdict"], args["stop_reason"], args["teardown"],
                               args["seconds"], sections(args), stop, stages)
        document = written["document"]
        if args["teardown"] is not None:
            _room.release_all(run_dir)
        if args["teardown"] is not None and written["paths"].get("results.json"):
            # The run's final reports: its guard has nothing left to do (it also sees results.json's teardown).
            try:
                _report_guard.mark(run_dir, run_id, _results.REPORTED_FILE, {"time": time.time(), "by": "playbook"})
            except OSError:
                pass
        result.update(changed=bool(written["paths"]), paths=written["paths"], verdict=document["verdict"],
                      headline=document["headline"], controller_faults=document["controller_faults"],
                      simulated=bool(document.get("simulated")),
                      verdict_lines=verdict_lines(document) + [
                          "%s: %s" % (name, path) for name, path in sorted(written["paths"].items())])
        if args["teardown"] is not None:
            # Merged (aggregate) into training_assert's clusterval_training: every path publishes these four.
            result["ansible_stats"] = {"data": {"clusterval_training": run_stats(document, run_dir)},
                                       "per_host": False, "aggregate": True}
        if written["error"]:
            kept = ", ".join(sorted(written["paths"])) or "nothing"
            result.update(failed=True, msg="%s (kept: %s)" % (written["error"], kept))
        else:
            result["msg"] = "%s: %s" % (document["headline"], ", ".join(sorted(written["paths"].values())))
        return result

    def start(self, result, plan, run_dir, run_id, controller, launched, policy, fabric):
        """The nodes' containers started: an earlier run's files apart, the launch marked with the verdict's
        policy (and the fabric gate's verdict, for the report of an interrupt), the guard started."""
        moved = guard = None
        try:
            moved = _results.keep_earlier_run(run_dir, run_id)
            if fabric:
                _results.record_fabric(run_dir, run_id, fabric)
            # Room for the watch's memory and results.json, should the disk fill during the run.
            _room.reserve(run_dir)
            if launched:
                _report_guard.mark(run_dir, run_id, _results.LAUNCHED_FILE, _policy.launch_record(policy, time.time()))
            guard = _report_guard.spawn(plan, run_dir, controller, AnsibleCollectionConfig.collection_paths)
        except OSError as exc:
            # Never the run's failure: the reports are written at its end as always, only an interrupt goes unreported.
            result.update(changed=moved is not None, earlier_run=moved, guard=None,
                          msg="reports not guarded against an interrupt: %s" % exc)
            return result
        result.update(changed=moved is not None or guard is not None, earlier_run=moved, guard=guard,
                      msg="reports guarded%s" % (" (an earlier run's files moved to %s)" % moved if moved else ""))
        return result
