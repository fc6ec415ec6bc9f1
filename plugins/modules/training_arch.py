# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: training_arch
short_description: Say whether a run's plan needs the nodes' GPU arch detected
version_added: 0.2.0
description:
  - Reads the training config on the controller, as M(clusterval.training.training_plan) does (same O(config)
    lookup, O(overrides), mode and model choice), and says whether the nodes' GPUs must be asked before the
    plan - when O(gpu_arch) is not given and the chosen model has several arch entries in C(model_params), or
    when O(gpu_arch) is V(auto).
  - C(playbooks/tasks/plan.yml) runs it once, then M(clusterval.training.training_gpus) on every node only when
    RV(detect) is true, so that a config with one arch (or a given arch) costs no task on the nodes.
  - Never fails on a config the plan would refuse - RV(detect) is then false (unless V(auto)) and the plan task
    names the problem.
options:
  config:
    description: Path of the training config, looked for as M(clusterval.training.training_plan) looks for it.
    type: path
    required: true
  hosts:
    description: The hosts of the run (their number chooses single_node or multi_node); default the play's.
    type: list
    elements: str
  model:
    description: Model key under C(model_params[mode]); default the config's only model.
    type: str
  gpu_arch:
    description: The arch given by hand (C(training_gpu_arch)); V(auto) asks the nodes whatever the config has.
    type: str
  mode:
    description: V(single_node) or V(multi_node); default as the plan chooses.
    type: str
    choices: [single_node, multi_node]
  overrides:
    description: Deep-merged over the config first, as the plan's O(clusterval.training.training_plan#module:overrides).
    type: raw
    default: {}
  overrides_extra:
    description: Deep-merged over O(overrides).
    type: raw
    default: {}
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
    details: Runs on the controller only; nothing runs on the hosts.
"""

EXAMPLES = r"""
- name: Does the plan need the nodes' GPU arch
  clusterval.training.training_arch:
    config: "{{ training_config }}"
    model: "{{ training_model | default(omit) }}"
    gpu_arch: "{{ training_gpu_arch | default(omit) }}"
  register: arch_need
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
detect:
  description: Whether the nodes' GPUs must be asked before the plan.
  returned: always
  type: bool
  sample: true
archs:
  description: The config's arch keys for the chosen mode and model.
  returned: always
  type: list
  elements: str
  sample: [mi300x, h100]
path:
  description: Where in the config they are (C(model_params.<mode>.<model>)).
  returned: always
  type: str
  sample: model_params.multi_node.llama3_1_8b
reason:
  description: Why the nodes are asked, or not.
  returned: always
  type: str
  sample: model_params.multi_node.llama3_1_8b offers mi300x, h100 and training_gpu_arch is not given
"""
