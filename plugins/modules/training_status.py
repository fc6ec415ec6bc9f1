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
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils._run_node import poll


def main():
    module = AnsibleModule(
        argument_spec=dict(
            status_dir=dict(type="path", required=True),
            hosts=dict(type="list", elements="str", required=True),
            offsets=dict(type="dict", default={}),
            lease=dict(type="dict"),
            max_bytes=dict(type="int", default=1048576),
        ),
        supports_check_mode=False,
    )
    try:
        result = poll(module.params)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="status directory %s: %s" % (module.params["status_dir"], exc))
    module.exit_json(changed=bool(result["lease_renewed"]), **result)


if __name__ == "__main__":
    main()
