# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters of the fabric gate: clusterval.training.fabric_rounds and clusterval.training.fabric_verdict."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils import _fabric


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


class FilterModule:
    def filters(self):
        return {"fabric_rounds": fabric_rounds, "fabric_verdict": fabric_verdict}
