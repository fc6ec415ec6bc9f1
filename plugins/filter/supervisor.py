# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.supervisor: one node's supervisor files, container command and status mount."""
from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils import _launch, _watch
from ansible_collections.clusterval.training.plugins.module_utils._plan import MEGATRON, node_view

MODULE_UTILS_DIR = os.path.dirname(os.path.abspath(_launch.__file__))


def supervisor(plan, host, settings):
    try:
        node = node_view(plan, host)
        extra = dict(_watch.megatron_sizes(node)) if plan.get("framework") == MEGATRON else {}
        if plan.get("warmup_steps") is not None:
            extra["warmup_steps"] = plan["warmup_steps"]
        config = _launch.supervisor_config(node, plan, dict(settings, parse_extra=extra))
        files = _launch.supervisor_files(MODULE_UTILS_DIR, node["run_dir"], config)
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise AnsibleFilterError("supervisor: %s: %s" % (host, exc)) from None
    status = config["status_dir"]
    directories = sorted({os.path.dirname(f["path"]) for f in files})
    return {"files": files, "directories": directories, "command": _launch.supervised_command(node["run_dir"]), "status_dir": status,
            "volume": "%s:%s" % (status, status), "config": config}


def status_dir(plan):
    try:
        return _launch.status_dir(plan["data_cache_dir"], plan["run_id"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("status_dir: the plan has no %s" % exc) from None


class FilterModule:
    def filters(self):
        return {"supervisor": supervisor, "status_dir": status_dir}
