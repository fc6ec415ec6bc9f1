# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of clusterval.training.training_isolate: short runs of playbooks/train.yml on halves of the
nodes until the bad node is named (``_isolate``); writes isolation.json and prints each round."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Dict

from ansible import context

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _isolate
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction

# The collection's root (plugins/action/ is two levels below it): its playbooks/train.yml runs each subset.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARGUMENT_SPEC: Dict[str, Any] = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "mode": {"type": "str", "default": "multi_node", "choices": ["single_node", "multi_node"]},
    "config": {"type": "str", "required": True},
    "run_dir": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "min_nodes": {"type": "int", "default": 0},
    "slow_pct": {"type": "float", "default": _isolate.DEFAULT_SLOW_PCT},
    "max_rounds": {"type": "int", "default": 0},
    "iterations": {"type": "int", "default": 0},
    "run_timeout": {"type": "float", "default": 3600.0},
    "playbook": {"type": "path"},
    "run_vars": {"type": "dict", "default": {}},
    "forced_vars": {"type": "dict", "default": {}},
    "fail_on_finding": {"type": "bool", "default": True},
}


def ansible_playbook() -> str:
    """The ansible-playbook that runs this play (the worker's argv[0]), else the one on PATH."""
    first = sys.argv[0] if sys.argv else ""
    if os.path.basename(first) == "ansible-playbook" and os.path.isfile(first):
        return os.path.abspath(first)
    return shutil.which("ansible-playbook") or "ansible-playbook"


class ActionModule(CollectionAction):
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "training_isolate")
        cli = dict(context.CLIARGS)
        try:
            needed = _isolate.min_nodes(args["mode"], args["min_nodes"])
            _isolate.check_nodes(args["hosts"], needed)
            if not 0 < args["slow_pct"] < 100:
                raise _isolate.IsolateError("isolate_slow_pct: expected a percentage between 0 and 100, found %s"
                                            % args["slow_pct"])
        except _isolate.IsolateError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        playbook = args["playbook"] or os.path.join(COLLECTION_ROOT, "playbooks", "train.yml")
        program = ansible_playbook()
        env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")

        def argv_for(group):
            forced = dict(args["forced_vars"], training_hosts=":".join(group["hosts"]), training_run_dir=group["run_dir"],
                          training_run_id=group["run_id"])
            if args["iterations"]:
                forced["training_iterations"] = args["iterations"]
            return _isolate.subrun_argv(program, playbook, cli, args["run_vars"], forced)

        def show(entry):
            for group in entry["groups"]:
                self._display.display(_isolate.group_line(group))

        controller = os.getppid()

        def runner(wave):
            # A worker left behind by a killed ansible-playbook starts no more runs.
            if os.getppid() != controller:
                raise _isolate.IsolateError("the controller (ansible-playbook, pid %d) is gone" % controller)
            _isolate.run_wave(wave, argv_for, args["run_timeout"], env)

        try:
            document = _isolate.isolate(
                args["hosts"], needed, args["slow_pct"], args["max_rounds"] or _isolate.default_max_rounds(
                    len(args["hosts"])), args["run_dir"], args["run_id"], runner, on_round=show)
        except _isolate.IsolateError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        inventories = [str(source) for source in cli.get("inventory") or ()]
        document["conclusion"]["advice"] = _isolate.advice(document["conclusion"], inventories, args["config"],
                                                           args["hosts"])
        document["playbook"] = playbook
        _atomic.write_json(os.path.join(args["run_dir"], "isolation.json"), document, makedirs=True)
        lines = _isolate.report_lines(document)
        result.update(changed=True, isolation=document, lines=lines, conclusion=document["conclusion"],
                      msg=_isolate.headline(document["conclusion"]))
        if document["conclusion"]["failed"] and args["fail_on_finding"]:
            result["failed"] = True
            result["msg"] = "\n".join(lines)
        return result
