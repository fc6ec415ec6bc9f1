# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin clusterval.training.training_arch: whether the plan needs the nodes' GPU arch, on the controller
(playbooks/tasks/plan.yml asks the nodes only then)."""
from __future__ import annotations

from ansible_collections.clusterval.training.plugins.module_utils import _arch
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.plugin_utils._action import PlanningAction

ARGUMENT_SPEC = {
    "config": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str"},
    "model": {"type": "str"},
    "gpu_arch": {"type": "str"},
    "mode": {"type": "str", "choices": ["single_node", "multi_node"]},
    "overrides": {"type": "raw", "default": {}},
    "overrides_extra": {"type": "raw", "default": {}},
}


class ActionModule(PlanningAction):

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self._validated(ARGUMENT_SPEC, "training_arch")
        hosts = self._hosts(args, task_vars)
        try:
            config_path, dummy = self._config_path(args["config"])
            decided = _arch.decision(load_config_file(config_path), self._overrides(args), len(hosts),
                                     args["model"], args["gpu_arch"], args["mode"])
        except ConfigError as exc:
            # the plan task that follows names the problem, as it does without detection
            decided = {"detect": _arch.is_auto(args["gpu_arch"]), "archs": [], "path": exc.path,
                       "reason": "the config cannot be read (%s); the plan says why" % exc.message}
        result.update(changed=False, **decided)
        verb = "detect" if decided["detect"] else "no need to detect"
        result["msg"] = "%s the nodes' GPU arch: %s" % (verb, decided["reason"])
        return result
