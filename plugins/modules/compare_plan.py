# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: compare_plan
short_description: Plan both sides of an apple-to-apple training comparison and refuse a mismatch
version_added: 0.2.0
description:
  - Reads a comparison file (C(configs/comparison/*.yml), the seed-004 table NVIDIA vs AMD) on the controller,
    renders each side's job from it - Megatron-LM's C(pretrain_gpt.py) under C(torchrun) on the NVIDIA side,
    Primus's C(examples/run_pretrain.sh) with an experiment file on the AMD side - with the planner of
    M(clusterval.training.training_plan), and reads back what each rendered launch passes (the launch
    script's command line, the experiment file's overrides).
  - Fails, before any node is touched, when an apple-to-apple value differs between the two rendered
    launches, naming the parameter, the argument and both values. Best-vs-best rows may differ.
  - Returns each side's C(training_overrides) and run id for C(playbooks/compare.yml), which runs
    C(playbooks/train.yml) once per side.
options:
  comparison:
    description: The comparison file; a relative path is also looked for under the collection's C(configs/).
    type: path
    required: true
  nvidia_hosts:
    description: The inventory group (or comma-separated host names) of the NVIDIA side.
    type: str
    default: compare_nvidia
  amd_hosts:
    description: The inventory group (or comma-separated host names) of the AMD side.
    type: str
    default: compare_amd
  iterations:
    description: Train iterations of both sides (default the table's Train Iters).
    type: int
  gpus_per_node:
    description: GPUs per node of both sides (default 8).
    type: int
  images:
    description: Container image per side (C(nvidia), C(amd)); default the inventory's, else the file's.
    type: dict
    default: {}
  overrides:
    description:
      - Megatron-LM arguments per side (C(nvidia), C(amd)) over the table's; an apple-to-apple difference is
        refused (this is how a deliberate mismatch is made).
    type: dict
    default: {}
  training_overrides:
    description: The inventory's C(training_overrides), merged under each side's.
    type: raw
    default: {}
  training_overrides_extra:
    description: More training overrides for both sides (for example a simulated node's environment).
    type: raw
    default: {}
  data_path:
    description: The dataset prefix both sides read (the table's BookCorpus); without it both use mock data.
    type: str
  tokenizer:
    description: The Hugging Face tokenizer both sides load (C(tokenizer_model)).
    type: str
  runs_dir:
    description: Where the comparison's directory is made (default C(runs/) under the current directory).
    type: path
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
    details: Nothing changes anywhere; both sides are planned the same way in check mode.
  idempotent:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
    details: Runs on the controller only; nothing runs on the hosts.
"""

EXAMPLES = r"""
- name: Plan both sides
  clusterval.training.compare_plan:
    comparison: comparison/llama3_8b_nvidia_vs_amd.yml
    nvidia_hosts: h100_nodes
    amd_hosts: mi300x_nodes
  register: compare_plan_result
"""

RETURN = r"""
compare_id:
  description: The comparison's id (its directory's name).
  returned: success
  type: str
  sample: 20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd
compare_dir:
  description: The comparison's directory on the controller (each side's run directory is inside it).
  returned: success
  type: str
  sample: /home/me/runs/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd
sides:
  description: Per side (C(nvidia), C(amd)) its run id, hosts, stack, launch command and training overrides.
  returned: success
  type: dict
  sample: {"amd": {"run_id": "x-amd", "hosts": ["node3", "node4"], "stack": "primus"}}
mismatches:
  description: The apple-to-apple differences of the rendered launches (parameter, argument, nvidia, amd).
  returned: always
  type: list
  elements: dict
  sample: [{"parameter": "Micro Batch Size (MBS)", "argument": "micro_batch_size", "nvidia": 2, "amd": 4}]
"""
