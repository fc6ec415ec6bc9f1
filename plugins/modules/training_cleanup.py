#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_cleanup
short_description: Remove a node's training containers, found by their labels, and what their runs left there
version_added: 0.1.0
description:
  - Kills and removes every container on the node that carries the collection's C(clusterval.run_id) label, or
    only those of O(run_id). Other containers are left alone. Needs no plan and no config.
  - For every run whose container it removed, and for O(run_id), removes the run's lease file
    (C(<run dir>/lease)), its lock (C(<run root>/clusterval.lock), only while that run holds it) and its
    preflight marker (C(<data cache dir>/.clusterval-preflight-<run id>)); the run dir and data cache dir come
    from the containers' labels (C(clusterval.run_dir), C(clusterval.data_cache_dir)) or from O(run_dir) and
    O(data_cache_dir).
  - Every labelled container on the node is removed (the node's Docker daemon only runs this cluster's), but the
    run index lives in a home directory that another cluster whose nodes have the same names may share. The runs
    found only there are cleared when this cluster recorded them (O(address) and O(controller), written
    there by M(clusterval.training.training_probe) when it takes the lock); the others
    are left alone and named in RV(left_alone).
  - Fails, after removing what it could, when the Docker daemon cannot be reached or refuses a removal.
options:
  run_id:
    description: Only this run's containers; empty removes the containers of every run.
    type: str
    default: ""
  run_dir:
    description: O(run_id)'s directory on the node, for its lease and lock when no container names it.
    type: str
    default: ""
  data_cache_dir:
    description: O(run_id)'s data cache directory, for its preflight marker when no container names it.
    type: str
    default: ""
  timeout:
    description: Seconds each call to the Docker daemon may take.
    type: float
    default: 30
  node:
    description:
      - The node's name in RV(msg) and in the node's run index (C(~/.cache/clusterval/runs/<run id>@<node>.json),
        keyed by node because home directories are often shared); default the host name.
    type: str
    default: ""
  address:
    description:
      - The node's address as the inventory gives it (C(ansible_host)), half of this cluster's identity.
      - Without O(run_id), a run found only in the run index is cleared when its entry gives this address and
        O(controller); with O(run_id), unless its entry gives another address. Empty leaves every run found only
        in the run index alone when O(run_id) is empty.
    type: str
    default: ""
  controller:
    description: Who tears down, C(user@host) of the controller, the other half of this cluster's identity.
    type: str
    default: ""
  taken_over_by:
    description:
      - The run taking the node over (C(training_takeover=true)), as C(by) (its run id) and C(controller). Each run
        removed is told so first in its status directory on the shared cache, which stays for that run's watch to
        read, so that it reports the takeover instead of blaming a node for its vanished containers.
    type: dict
    version_added: 0.3.0
  log_path:
    description:
      - The run's training log on the node, read after the containers are gone and returned to the action plugin,
        which writes it to O(log_copy) on the controller, so that the log is collected in the same call as the teardown.
      - Empty, or a O(log_copy) that exists already, collects nothing.
    type: str
    default: ""
    version_added: 0.3.0
  log_copy:
    description: Where the action plugin writes the collected log on the controller (parents made).
    type: path
    version_added: 0.3.0
  plan:
    description:
      - The run's plan (from M(clusterval.training.training_plan)); for a node of the plan and a O(run_id), the action
        plugin takes O(run_dir), O(data_cache_dir) and O(log_path) from it.
      - Unset, the fact C(training_plan) when there is one (read by the action, never copied into each node's task
        arguments); V({}) for none.
    type: dict
    version_added: 0.3.0
  settings_from:
    description:
      - A role whose variables give O(docker_host), O(plan), O(run_id), O(controller) and O(log_copy),
        C(<role>_<option>) (the teardown role passes C(teardown)), read by the action from the host's variables; an
        option given in the task wins. O(node) is then the host's name and O(address) its C(ansible_host). A variable
        left at a literal default costs no template per node, where a task's argument is compiled again in every
        node's worker.
    type: str
    version_added: 0.3.0
  collect_log:
    description: With O(plan), whether to bring the node's training log back to O(log_copy).
    type: bool
    default: true
    version_added: 0.3.0
  log_max_bytes:
    description: The most of the log collected; a longer log keeps its last O(log_max_bytes) bytes, and says so.
    type: int
    default: 268435456
    version_added: 0.3.0
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.docker
attributes:
  check_mode:
    support: full
    details: Reports what would be removed.
"""

EXAMPLES = r"""
- name: Remove every training container of the collection on the node
  clusterval.training.training_cleanup:

- name: Remove one run's containers, lease, lock and marker
  clusterval.training.training_cleanup:
    run_id: 20261125T020000Z-1a2b3c-mi300x_distributed_llama3_1_70b
"""

RETURN = r"""
removed:
  description: What was removed (or would be, in check mode), one readable item each.
  returned: always
  type: list
  elements: str
  sample: ["container rocm-jax-llama3.1-70b (run 20261125T020000Z-1a2b3c-x, running)", "lock /home/a/LOGS/clusterval/clusterval.lock"]
containers:
  description: The names of the containers removed.
  returned: always
  type: list
  elements: str
  sample: [rocm-jax-llama3.1-70b]
runs:
  description: The run ids whose containers or files were looked at.
  returned: always
  type: list
  elements: str
  sample: [20261125T020000Z-1a2b3c-x]
left_alone:
  description: The runs of the run index recorded by another cluster (another address or controller), left alone.
  returned: always
  type: list
  elements: str
  sample: ["run 20261125T020000Z-1a2b3c-x (node1 at 10.218.0.11 from alice@login-b)"]
msg:
  description:
    - One line for the node, C(nothing to remove) when nothing was there; a log that could not be collected is
      named after a semicolon. An unreachable node reads C(<node> teardown FAILED - unreachable, its containers may
      still run).
  returned: always
  type: str
  sample: "node1 teardown: nothing to remove (any run)"
ok:
  description: Whether the teardown finished on the node (reached, its containers removed).
  returned: always
  type: bool
unreachable:
  description: Whether the node could not be reached (its containers may still run).
  returned: always
  type: bool
log_error:
  description: Why the training log was not collected (empty when it was, or when none was asked for).
  returned: always
  type: str
log_bytes:
  description: The size of the collected copy of the training log.
  returned: when O(log_path) was collected
  type: int
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _cleanup, _runlock
from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **ENDPOINT_OPTION,
            run_id=dict(type="str", default=""),
            run_dir=dict(type="str", default=""),
            data_cache_dir=dict(type="str", default=""),
            timeout=dict(type="float", default=30.0),
            node=dict(type="str", default=""),
            address=dict(type="str", default=""),
            controller=dict(type="str", default=""),
            taken_over_by=dict(type="dict"),
            plan=dict(type="dict"),
            settings_from=dict(type="str"),
            collect_log=dict(type="bool", default=True),
            log_path=dict(type="str", default=""),
            log_copy=dict(type="path"),
            log_max_bytes=dict(type="int", default=256 * 1024 * 1024),
        ),
        supports_check_mode=True,
    )
    params = module.params
    node = params["node"] or socket.gethostname()
    outcome = _cleanup.cleanup(params["docker_host"], params["run_id"], params["run_dir"], params["data_cache_dir"],
                               dry_run=module.check_mode, timeout=params["timeout"], node=node,
                               cluster=_runlock.cluster_identity(params["address"], params["controller"]),
                               taken_over_by=params["taken_over_by"])
    msg = _cleanup.summary(node, outcome, params["run_id"])
    result = dict(changed=bool(outcome["removed"]), removed=outcome["removed"], containers=outcome["containers"],
                  runs=outcome["runs"], left_alone=outcome["left_alone"], msg=msg)
    if params["log_path"]:
        result["log"] = _cleanup.read_log(params["log_path"], params["log_max_bytes"])
    if outcome["error"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
