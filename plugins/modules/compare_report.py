# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: compare_report
short_description: Write the comparison report of two training runs (comparison.json, comparison.html)
version_added: 0.2.0
description:
  - Reads what each side of a comparison ran - its C(plan.json) (the rendered launch), every node's
    C(logs/<host>/training.log) (the argument dump printed at start, the iteration lines) and C(results.json)
    - and writes C(comparison.json) and C(comparison.html) into O(compare_dir).
  - Flags every apple-to-apple row whose values differ in the argument dumps (naming the argument and both
    values), shows best-vs-best rows side by side, puts per-GPU tokens/s, TFLOP/s, step time and memory side
    by side, overlays the loss curves and says whether they agree within the file's tolerance.
  - Fails when anything is flagged (O(fail_on_problems)).
options:
  comparison:
    description: The comparison file both runs were planned from.
    type: path
    required: true
  compare_dir:
    description: Where the two reports are written.
    type: path
    required: true
  run_dirs:
    description: The run directory of each side (C(nvidia), C(amd)).
    type: dict
    required: true
  data_path:
    description: The dataset prefix the runs read, if any (the report says mock data otherwise).
    type: str
  fail_on_problems:
    description: Fail the task when the report flags anything.
    type: bool
    default: true
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: none
    details: Writes the two report files.
  idempotent:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
    details: Runs on the controller only; nothing runs on the hosts.
"""

EXAMPLES = r"""
- name: Compare
  clusterval.training.compare_report:
    comparison: comparison/llama3_8b_nvidia_vs_amd.yml
    compare_dir: runs/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd
    run_dirs:
      nvidia: runs/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd-nvidia
      amd: runs/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd/20261126T111500Z-a1b2c3-llama3_8b_nvidia_vs_amd-amd
"""

RETURN = r"""
verdict:
  description: PASS when nothing is flagged.
  returned: success
  type: str
  sample: PASS
problems:
  description: One line per flagged mismatch, missing dump, loss disagreement or failed side.
  returned: success
  type: list
  elements: str
  sample: ["micro_batch_size (Micro Batch Size (MBS)): NVIDIA 2, AMD 4, in the argument dump"]
figures:
  description: The per-GPU figures side by side (metric, nvidia, amd, amd_over_nvidia).
  returned: success
  type: list
  elements: dict
  sample: [{"metric": "tokens_per_gpu", "nvidia": 9800.0, "amd": 9400.0, "amd_over_nvidia": 0.959}]
loss_agreement:
  description: Whether the loss curves agree within the tolerance, and the largest gap.
  returned: success
  type: dict
  sample: {"agrees": true, "tolerance_relative": 0.02, "text": "the loss curves agree within 2%"}
json:
  description: Path of comparison.json.
  returned: success
  type: str
  sample: runs/x/comparison.json
html:
  description: Path of comparison.html.
  returned: success
  type: str
  sample: runs/x/comparison.html
"""
