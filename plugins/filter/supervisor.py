# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters clusterval.training.supervisor (one node's supervisor files, container command and status mount),
supervisors (every node's at once) and status_dir."""
from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils import _run_ship
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view

MODULE_UTILS_DIR = os.path.dirname(os.path.abspath(_run_ship.__file__))


def supervisor(plan, host, settings):
    try:
        return _run_ship.node_shipment(plan, node_view(plan, host), settings, MODULE_UTILS_DIR)
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise AnsibleFilterError("supervisor: %s: %s" % (host, exc)) from None


def supervisors(plan, hosts, settings):
    try:
        return _run_ship.cluster_shipments(plan, {host: node_view(plan, host) for host in hosts}, settings,
                                           MODULE_UTILS_DIR)
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise AnsibleFilterError("supervisors: %s" % exc) from None


def status_dir(plan):
    try:
        return _run_ship.status_dir(plan["data_cache_dir"], plan["run_id"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("status_dir: the plan has no %s" % exc) from None


class FilterModule:
    def filters(self):
        return {"supervisor": supervisor, "supervisors": supervisors, "status_dir": status_dir}
