# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.node_view: a training plan (full or compact form) -> one node's whole part."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view as plan_node_view


def node_view(plan, host):
    try:
        return plan_node_view(plan, host)
    except ConfigError as exc:
        raise AnsibleFilterError("node_view: %s" % exc.message) from None


class FilterModule:
    def filters(self):
        return {"node_view": node_view}
