# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin clusterval.training.compare_report: comparison.json and comparison.html from what both
sides ran (their plan.json, their nodes' logs, their results.json), on the controller."""
from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _compare, _compare_run
from ansible_collections.clusterval.training.plugins.module_utils._config_path import config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.plugin_utils._action import (
    COLLECTION_ROOT, CollectionAction, failed, load_comparison)

ARGUMENT_SPEC = {
    "comparison": {"type": "path", "required": True},
    "compare_dir": {"type": "path", "required": True},
    "run_dirs": {"type": "dict", "required": True},
    "data_path": {"type": "str"},
    "fail_on_problems": {"type": "bool", "default": True},
}


class ActionModule(CollectionAction):

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        args = self._validated(ARGUMENT_SPEC, "compare_report")
        basedir = self._loader.get_basedir() if self._loader else None
        try:
            path, _found = config_file(args["comparison"], os.getcwd(), basedir, COLLECTION_ROOT)
            comparison = load_comparison(path)
        except ConfigError as exc:
            return failed(result, "compare_report", exc)
        missing = [side for side in _compare.SIDES if not args["run_dirs"].get(side)]
        if missing:
            raise AnsibleActionFail("compare_report: run_dirs needs %s" % ", ".join(missing))
        records = {side: _compare_run.side_record(comparison, side, str(args["run_dirs"][side]))
                   for side in _compare.SIDES}
        document = _compare_run.comparison_document(comparison, records, data_path=args["data_path"])
        directory = args["compare_dir"]
        os.makedirs(directory, exist_ok=True)
        json_path = os.path.join(directory, "comparison.json")
        html_path = os.path.join(directory, "comparison.html")
        _atomic.write_json(json_path, document)
        _atomic.write_text(html_path, _compare_run.comparison_html(document))
        problems = "; ".join(document["problems"])
        result.update(changed=True, verdict=document["verdict"], problems=document["problems"],
                      figures=document["figures"], loss_agreement=document["loss"]["agreement"],
                      json=json_path, html=html_path,
                      msg="comparison %s: %s%s (%s)" % (
                          comparison.name, document["verdict"], ": " + problems if problems else "", html_path))
        if document["problems"] and args["fail_on_problems"]:
            result["failed"] = True
        return result
