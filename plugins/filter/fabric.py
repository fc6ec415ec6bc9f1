# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters of the fabric gate: clusterval.training.fabric_rounds, fabric_verdict, fabric_container, fabric_not_run."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils import _fabric
from ansible_collections.clusterval.training.plugins.module_utils._launch_docker import container_spec
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError


def fabric_rounds(hosts, addresses, pairs=False):
    if not isinstance(addresses, dict):
        raise AnsibleFilterError("fabric_rounds: addresses: expected a dict host -> address, found %s"
                                 % type(addresses).__name__)
    return _fabric.plan_rounds(list(hosts), addresses, bool(pairs))


def fabric_verdict(measured, hosts, benchmarks, expect=None):
    if not isinstance(measured, list):
        raise AnsibleFilterError("fabric_verdict: expected the list of the nodes' round results, found %s"
                                 % type(measured).__name__)
    return _fabric.judge(list(hosts), [m for m in measured if isinstance(m, dict)], list(benchmarks), expect or {})


def fabric_container(plan, host, overrides=None, image=""):
    if not isinstance(plan, dict):
        raise AnsibleFilterError("fabric_container: expected the plan (clusterval.training.training_plan), found %s"
                                 % type(plan).__name__)
    try:
        spec = container_spec(plan, host, overrides or {}, token_file="")
    except (ConfigError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("fabric_container: %s" % getattr(exc, "message", exc))
    if image:
        spec["image"] = str(image)
    return spec


def fabric_not_run(checks, hosts, benchmarks):
    if not isinstance(checks, dict):
        raise AnsibleFilterError("fabric_not_run: expected a dict node -> its look at the tools, found %s"
                                 % type(checks).__name__)
    reason = _fabric.not_run_reason({h: c for h, c in checks.items() if isinstance(c, dict)})
    return _fabric.not_run_verdict(list(hosts), list(benchmarks), reason) if reason else {}


class FilterModule:
    def filters(self):
        return {"fabric_rounds": fabric_rounds, "fabric_verdict": fabric_verdict, "fabric_container": fabric_container,
                "fabric_not_run": fabric_not_run}
