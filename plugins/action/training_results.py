# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side report writer: results.json, junit.xml and report.html of a run, on every path."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._controller import reported_run

ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    run_dir=dict(type="path", required=True),
    verdict=dict(type="dict"),
    stop_reason=dict(type="str"),
    teardown=dict(type="dict"),
    seconds=dict(type="float"),
    fabric=dict(type="dict"),
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        written = reported_run(args["plan"], args["run_dir"], args["verdict"], args["stop_reason"], args["teardown"],
                               args["seconds"], {"fabric": args["fabric"]} if args["fabric"] else None)
        document = written["document"]
        result.update(changed=bool(written["paths"]), paths=written["paths"], verdict=document["verdict"],
                      headline=document["headline"], controller_faults=document["controller_faults"],
                      simulated=bool(document.get("simulated")))
        if written["error"]:
            kept = ", ".join(sorted(written["paths"])) or "nothing"
            result.update(failed=True, msg="%s (kept: %s)" % (written["error"], kept))
        else:
            result["msg"] = "%s: %s" % (document["headline"], ", ".join(sorted(written["paths"].values())))
        return result
