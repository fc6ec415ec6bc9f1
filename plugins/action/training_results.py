# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller-side report writer: results.json, junit.xml and report.html of a run, on every path."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._report import write_reports
from ansible_collections.clusterval.training.plugins.module_utils._results import document_of

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
        document = document_of(args["plan"], args["verdict"], args["stop_reason"], args["teardown"], args["run_dir"])
        if args["fabric"]:
            document["fabric"] = args["fabric"]
        try:
            paths = write_reports(args["run_dir"], document, args["seconds"])
        except OSError as exc:
            result.update(failed=True, msg="cannot write the reports into %s: %s" % (args["run_dir"], exc))
            return result
        result.update(changed=True, paths=paths, verdict=document["verdict"], headline=document["headline"],
                      simulated=bool(document.get("simulated")),
                      msg="%s: %s" % (document["headline"], ", ".join(sorted(paths.values()))))
        return result
