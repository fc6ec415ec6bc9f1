#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_files
short_description: Make a run's directories and small files on a node in one call
version_added: 0.1.0
description:
  - Creates every directory of O(directories) (mode C(0755)) and writes every file of O(files)
    (atomically, only when its content differs), owned by O(owner).
  - One task per node instead of one task per path, because at hundreds of nodes every task costs
    seconds of controller time.
  - The files are the plan's C(launch.sh) and MaxText YAML, small texts, not data.
options:
  directories:
    description: Directories to create, parents included.
    type: list
    elements: path
    default: []
  files:
    description: Files to write; each has C(path), C(content) and C(mode) (octal string, default C(0644)).
    type: list
    elements: dict
    default: []
  owner:
    description: User owning what is made; empty keeps the connecting user.
    type: str
extends_documentation_fragment:
  - clusterval.training.attributes
attributes:
  check_mode:
    support: full
"""

EXAMPLES = r"""
- name: Directories and files of the run
  clusterval.training.training_files:
    directories: "{{ node.directories }}"
    files: "{{ node.files }}"
    owner: "{{ training_plan.remote_user }}"
  vars:
    node: "{{ training_plan | clusterval.training.node_view(inventory_hostname) }}"
"""

RETURN = r"""
changed_paths:
  description: The directories and files that were created or changed (or would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/home/alice/LOGS/clusterval/20261121T101500Z-x/launch.sh]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils._files import ensure_all


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="path", default=[]),
            files=dict(type="list", elements="dict", default=[]),
            owner=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    for index, spec in enumerate(module.params["files"]):
        if not isinstance(spec.get("path"), str) or not isinstance(spec.get("content"), str):
            module.fail_json(msg="files[%d]: expected path and content strings, found %r" % (index, sorted(spec)))
    try:
        changed = ensure_all(module.params["directories"], module.params["files"], module.params["owner"],
                             module.check_mode)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="training_files: %s" % exc)
    module.exit_json(changed=bool(changed), changed_paths=changed)


if __name__ == "__main__":
    main()
