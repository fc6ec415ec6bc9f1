#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_status
short_description: Renew a run's lease and read every node's status stream from the shared directory, in one call
version_added: 0.2.0
description:
  - The node-side supervisors (started with the training containers) append what they find in their training log
    to C(<status_dir>/nodes/<host>.jsonl) on the shared C(data_cache_dir). This module reads the lines appended
    after O(offsets) for every host of O(hosts) and returns them parsed; only complete lines are returned.
  - With O(lease), it first rewrites C(<status_dir>/lease) with that content. Every supervisor counts a change
    of that file as a renewal of its lease, and stops its job when none came for its lease timeout.
  - Used by M(clusterval.training.training_watch) through one node per poll, whatever the number of nodes.
options:
  status_dir:
    description: The run's status directory on the shared filesystem.
    type: path
    required: true
  hosts:
    description: The hosts whose streams to read.
    type: list
    elements: str
    required: true
  offsets:
    description: Byte offset per host where the previous read stopped.
    type: dict
    default: {}
  lease:
    description: New content of the lease file; omitted, the lease is not touched.
    type: dict
  max_bytes:
    description: At most this many bytes are read per host and call.
    type: int
    default: 1048576
  slurm_job:
    description:
      - The run's Slurm job (C(training_launcher=slurm)); the task's host is then the login host. Each call also
        asks C(scontrol show job) for the job's state and C(sinfo --list-reasons) for the nodes Slurm marked
        down or drained, returned as RV(scheduler).
    type: str
extends_documentation_fragment:
  - clusterval.training.attributes
attributes:
  check_mode:
    support: none
    details: Renewing a lease is a change.
  idempotent:
    support: none
    details: Every call reads from new offsets and renews the lease.
"""

EXAMPLES = r"""
- name: Read every node's status and renew the lease
  clusterval.training.training_status:
    status_dir: /shared/cache/.clusterval-status/20261125T101500Z-1a2b3c-llama
    hosts: [node1, node2]
    offsets: {node1: 0, node2: 0}
    lease: {renewal: 1, go: true}
  run_once: true
"""

RETURN = r"""
nodes:
  description: Per host, C(records) (the new stream records), C(offset) (where the next read starts), C(size)
    (the stream's size, null when it does not exist yet).
  returned: success
  type: dict
  sample: {"node1": {"records": [{"t": "step", "step": 3, "loss": 9.1}], "offset": 812, "size": 812}}
lease_renewed:
  description: Whether the lease was rewritten.
  returned: success
  type: bool
  sample: true
scheduler:
  description: With O(slurm_job), the job's state (C(job)) and Slurm's reasons for down or drained nodes
    (C(reasons)); C(error) when Slurm could not be asked.
  returned: with slurm_job
  type: dict
  sample: {"job": {"state": "RUNNING", "reason": "None", "nodes": ["node1", "node2"]}, "reasons": []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _launch_slurm
from ansible_collections.clusterval.training.plugins.module_utils._run_node import poll


def scheduler(module, job_id):
    """The job's state and the down or drained nodes' reasons, as Slurm says them on the login host."""
    rc, out, err = module.run_command(["scontrol", "show", "job", "-o", job_id])
    if rc != 0:
        return {"error": "scontrol show job %s: %s" % (job_id, (err or out).strip()[:300])}
    rc, reasons, err = module.run_command(_launch_slurm.node_reasons_argv())
    rows = _launch_slurm.parse_table(reasons, _launch_slurm.SINFO_REASON_FIELDS) if rc == 0 else []
    return {"job": _launch_slurm.job_view(_launch_slurm.parse_scontrol(out)), "reasons": rows}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            status_dir=dict(type="path", required=True),
            hosts=dict(type="list", elements="str", required=True),
            offsets=dict(type="dict", default={}),
            lease=dict(type="dict"),
            max_bytes=dict(type="int", default=1048576),
            slurm_job=dict(type="str"),
        ),
        supports_check_mode=False,
    )
    try:
        result = poll(module.params)
        if module.params["slurm_job"]:
            result["scheduler"] = scheduler(module, module.params["slurm_job"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg="status directory %s: %s" % (module.params["status_dir"], exc))
    module.exit_json(changed=bool(result["lease_renewed"]), **result)


if __name__ == "__main__":
    main()
