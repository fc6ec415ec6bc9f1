#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_gpus
short_description: Say which GPUs a node has (vendor, model, arch), for the plan to pick the config's arch
version_added: 0.2.0
description:
  - Asks the node's GPU tools (C(amd-smi), C(rocm-smi), C(rocminfo), C(nvidia-smi)) in the order of O(tools) until one lists
    GPUs, and returns its report - vendor, count, model names, the canonical arch key (V(mi300x), V(mi325),
    V(h100); on AMD the gfx target's candidates when the model name says none), driver and CUDA version on
    NVIDIA - parsed as preflight's probe parses it.
  - A tool that is missing, exits non-zero or lists no GPU gives way to the next; a node where none tells is
    not a failure here - RV(gpu) is null and RV(tried) says why, and the plan names the node.
  - Light (one tool run, no Docker, nothing written); C(playbooks/tasks/plan.yml) runs it only when the arch
    must be detected (M(clusterval.training.training_arch)) and hands every node's result to
    M(clusterval.training.training_plan) as O(clusterval.training.training_plan#module:gpus_found).
options:
  tools:
    description:
      - The GPU tools, each C(path) and C(args), optionally C(vendor) (V(amd) or V(nvidia); default V(nvidia)
        for C(nvidia-smi), V(amd) otherwise) and, for nvidia-smi, C(version_args) (default V(--version)).
      - Default - the tools preflight asks (C(/opt/rocm/bin/amd-smi static --asic), C(/usr/bin/amd-smi static
        --asic), C(/opt/rocm/bin/rocm-smi --showproductname --json), C(/usr/bin/nvidia-smi
        --query-gpu=index,name,driver_version,memory.total --format=csv)) and C(/opt/rocm/bin/rocminfo) (its GPU
        agents) before nvidia-smi.
    type: list
    elements: dict
  arch_map:
    description: GPU model name fragment to arch key (longest fragment wins); empty - the built-in table.
    type: dict
    default: {}
extends_documentation_fragment:
  - clusterval.training.attributes
attributes:
  check_mode:
    support: full
    details: Reads only; runs the same in check mode.
"""

EXAMPLES = r"""
- name: The nodes' GPUs
  clusterval.training.training_gpus:
  register: gpus

- name: A node's GPUs through tools at other paths
  clusterval.training.training_gpus:
    tools:
      - {path: /opt/rocm-6.4.1/bin/amd-smi, args: [static, --asic]}
      - {path: /usr/local/nvidia/bin/nvidia-smi, args: ["--query-gpu=index,name,driver_version", "--format=csv"]}
"""

RETURN = r"""
gpu:
  description:
    - The first tool's report that lists GPUs - C(vendor), C(tool), C(count), C(models), C(arch) (canonical arch
      key, null when the model name says none), C(arch_candidates) (from the gfx target, AMD), C(gfx),
      C(driver), C(cuda) - or null when no tool listed any.
  returned: always
  type: dict
  sample: {vendor: amd, tool: /opt/rocm/bin/amd-smi, count: 8, models: [AMD Instinct MI300X], arch: mi300x,
           arch_candidates: [mi300x, mi300a, mi325], gfx: [gfx942], driver: null, cuda: null}
tried:
  description: Why each tool before the one that told (or every tool, with RV(gpu) null) told nothing.
  returned: always
  type: list
  elements: str
  sample: ["/opt/rocm/bin/amd-smi: not on the node"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils._gpu_detect import DEFAULT_TOOLS, detect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            tools=dict(type="list", elements="dict"),
            arch_map=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    tools = module.params["tools"] or DEFAULT_TOOLS
    for index, tool in enumerate(tools):
        if not isinstance(tool.get("path"), str) or not isinstance(tool.get("args", []), list):
            module.fail_json(msg="tools[%d]: expected a path string and an args list, found %r" % (index, tool))
    gpu, tried = detect(tools, module.params["arch_map"])
    module.exit_json(changed=False, gpu=gpu, tried=tried)


if __name__ == "__main__":
    main()
