#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_container
short_description: Write a run's files on a node and start its training container, in one call
version_added: 0.3.0
description:
  - Makes the run's directories and writes its files (the launch script, the framework's config, the supervisor's
    files), then starts the training container through the Docker Engine API on the node's unix socket.
  - A container of the same name created from the same spec (its digest is kept as the label
    C(clusterval.container_digest)) is left running, or started again when it stopped; any other is removed and
    replaced, as M(community.docker.docker_container) does with strict comparisons.
  - One module call per node, with the standard library only, because at hundreds of nodes every task costs seconds
    of controller time; the node needs no Docker SDK.
  - The action plugin builds O(spec) from the plan on the controller; this module runs on the node.
options:
  plan:
    description:
      - The run's plan (from M(clusterval.training.training_plan)); defaults to the fact C(training_plan). The action
        plugin builds O(spec) from the node's part of it, and adds the plan's directories and files of the node to
        O(directories) and O(files).
    type: dict
  spec_overrides:
    description: Keys merged over the plan's container spec (C(env) key by key), for instance C(capabilities), C(groups).
    type: dict
    default: {}
  command:
    description: The container's command (argv); empty keeps the plan's (the launch script).
    type: list
    elements: str
    default: []
  extra_volumes:
    description: Volumes (C(host:container)) beside the plan's, such as the run's shared status directory.
    type: list
    elements: str
    default: []
  hf_token_file:
    description: The HF token file on the node, mounted read-only; defaults to the plan's C(hf_token_file); empty mounts none.
    type: str
  hf_token_present:
    description: Whether the HF token file exists on the node (a bind mount of a missing file fails the start).
    type: bool
    default: true
  plan_files:
    description: Write the plan's directories and files of the node (the launch script, the framework's config) too.
    type: bool
    default: true
  spec:
    description:
      - The container spec, built by the action plugin (the plan's, with the overrides); not given by hand. Its keys
        are C(name), C(image), C(command), C(env), C(labels), C(devices), C(device_requests), C(volumes), C(mounts),
        C(groups), C(capabilities), C(security_opts), C(ulimits), C(shm_size), C(network_mode), C(ipc_mode),
        C(privileged).
    type: dict
  stop_timeout:
    description: Seconds Docker waits for the container to stop before killing it (also when it is replaced).
    type: int
    default: 10
  timeout:
    description: Seconds to wait for each answer of the Docker daemon.
    type: float
    default: 60
  directories:
    description: Directories to create first (mode C(0755)), parents included.
    type: list
    elements: path
    default: []
  files:
    description: Files to write first; each has C(path), C(content) and C(mode) (octal string, default C(0644)).
    type: list
    elements: dict
    default: []
  pull:
    description:
      - Pull the image first (M(community.docker.docker_image) with C(source=pull), on the node's daemon), in the
        same task; the action plugin does it before this module's call. Not in check mode.
    type: bool
    default: false
  pull_retries:
    description: Attempts to pull again after a failed pull.
    type: int
    default: 3
  pull_delay:
    description: Seconds between pull attempts.
    type: float
    default: 10
  pull_throttle:
    description:
      - How many nodes pull at the same time (Ansible's C(throttle) for the pull alone; the containers' starts are
        not throttled).
    type: int
    default: 16
  settings_from:
    description:
      - A role whose variables give the options, C(<role>_<option>) (the container role passes C(container)), read by
        the action from the host's variables; an option given in the task wins. A variable left at a literal default
        costs no template per node, where a task's argument is compiled again in every node's worker.
    type: str
  job:
    description:
      - What the container runs, as one dict from the role that built it (the C(train) role's shipment,
        C(train_shipment.container)); its keys C(command), C(extra_volumes), C(directories), C(files) and
        C(stop_timeout) stand for the options of those names. Read by the action plugin (with O(settings_from), the
        variable C(<role>_job)), one template per node where five options would be five.
    type: dict
    default: {}
  owner:
    description: User owning the directories and files; empty keeps the connecting user.
    type: str
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.docker
attributes:
  check_mode:
    support: full
seealso:
  - module: clusterval.training.training_files
  - module: community.docker.docker_container
"""

EXAMPLES = r"""
# Through the action plugin, which builds the spec from the plan (as the container role does):
- name: The training container, with the run's files
  clusterval.training.training_container:
    plan: "{{ training_plan }}"
    spec_overrides: {capabilities: [], groups: []}
"""

RETURN = r"""
action:
  description: C(unchanged) (the same container running), C(started) (the same one, stopped before), C(created)
    or C(replaced) (another container of that name removed first).
  returned: success
  type: str
  sample: created
container_id:
  description: The container's id.
  returned: success, except in check mode for a new container
  type: str
changed_paths:
  description: The directories and files that were created or changed (or would be, in check mode).
  returned: success
  type: list
  elements: str
container:
  description: The container spec that was started (returned by the action plugin).
  returned: success
  type: dict
launch:
  description: In check mode, the plan's launch on the node (what the container would run), also printed.
  returned: check mode
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _container
from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION, DockerError, Engine
from ansible_collections.clusterval.training.plugins.module_utils._files import ensure_all


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **ENDPOINT_OPTION,
            spec=dict(type="dict"),
            plan=dict(type="dict"),
            spec_overrides=dict(type="dict", default={}),
            command=dict(type="list", elements="str", default=[]),
            extra_volumes=dict(type="list", elements="str", default=[]),
            hf_token_file=dict(type="str"),
            hf_token_present=dict(type="bool", default=True),
            plan_files=dict(type="bool", default=True),
            stop_timeout=dict(type="int", default=10),
            timeout=dict(type="float", default=60.0),
            directories=dict(type="list", elements="path", default=[]),
            files=dict(type="list", elements="dict", default=[]),
            owner=dict(type="str"),
            pull=dict(type="bool", default=False),
            pull_retries=dict(type="int", default=3),
            pull_delay=dict(type="float", default=10.0),
            pull_throttle=dict(type="int", default=16),
            settings_from=dict(type="str"),
            job=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    spec = params["spec"]
    if not isinstance(spec, dict):
        module.fail_json(msg="spec: the action plugin builds it from the plan; run the module as a task, with plan")
    for key in ("name", "image"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            module.fail_json(msg="spec.%s: expected a non-empty string, found %r" % (key, spec.get(key)))
    for index, item in enumerate(params["files"]):
        if not isinstance(item.get("path"), str) or not isinstance(item.get("content"), str):
            module.fail_json(msg="files[%d]: expected path and content strings, found %r" % (index, sorted(item)))
    try:
        changed_paths = ensure_all(params["directories"], params["files"], params["owner"], module.check_mode)
        body = _container.create_body(spec, params["stop_timeout"])
        engine = Engine.at(params["docker_host"], params["timeout"])
        started = engine.ensure_started(spec["name"], body, check_mode=module.check_mode)
    except (OSError, ValueError, DockerError) as exc:
        module.fail_json(msg="%s: %s" % (spec["name"], exc))
    module.exit_json(changed=bool(changed_paths) or started["changed"], action=started["action"],
                     container_id=started["id"], changed_paths=changed_paths)


if __name__ == "__main__":
    main()
