#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: training_slurm
short_description: The Slurm job a training plan emits (sbatch script, step wrapper, every node's part)
version_added: 0.2.0
description:
  - On the controller, nothing runs on any host. Renders the job of C(training_launcher=slurm) (C(docs/slurm.md))
    - an sbatch script with one step and one task per node (C(--nodelist), C(--exclusive), C(--no-requeue),
    C(--wait-all-nodes=1), C(--kill-on-bad-exit=0), C(--time) above the run's deadline, a comment naming the run),
    the step wrapper (C(_slurm_step)) and every node's part of the plan (its files and its container, the same as
    on the SSH path), to be written on the shared C(data_cache_dir) under the run's status directory.
  - The C(clusterval.training.slurm) role writes the files on the login host, submits the script and follows it.
options:
  plan:
    description: The plan (C(clusterval.training.training_plan)'s C(plan)).
    type: dict
    required: true
  hosts:
    description: The planned nodes by their Slurm node names, in the plan's order.
    type: list
    elements: str
    required: true
  shipments:
    description: Every host's supervisor shipment (the C(clusterval.training.supervisors) filter).
    type: dict
    required: true
  settings:
    description:
      - C(partition), C(account), C(qos), C(reservation), C(time_limit) (minutes), C(sbatch_args), C(runtime)
        (V(docker), V(pyxis), V(apptainer)), C(python), C(stop_grace), C(docker_host), C(gpu_vendor)
        (the slurm role's C(slurm_settings)).
    type: dict
    default: {}
  spec_overrides:
    description: The container spec's overrides of the run (the container role's C(container_spec_overrides)).
    type: dict
    default: {}
  host_spec_overrides:
    description: Host name to that node's own overrides (a host variable), used instead of O(spec_overrides).
    type: dict
    default: {}
  hf_token_present:
    description: Mount the HF token file (the step leaves out a bind mount whose file the node lacks).
    type: bool
    default: true
  deadline:
    description: The run's deadline in seconds; C(--time) is derived from it.
    type: float
    required: true
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
    details: Renders the same job; the role shows the script and submits nothing.
"""

EXAMPLES = r"""
- name: The job the plan emits
  clusterval.training.training_slurm:
    plan: "{{ train_plan }}"
    hosts: "{{ ansible_play_hosts_all }}"
    shipments: "{{ slurm_shipments }}"
    settings: {partition: gpu, runtime: docker, stop_grace: 10}
    deadline: 3600
  register: slurm_job
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
job:
  description:
    - C(script) and C(script_path), C(submit) (the sbatch argv), C(clean) (the cleanup step's srun argv), C(options),
      C(step), C(runtime), C(time_limit_minutes), C(output_pattern), C(slurm_dir), C(name), and the C(directories)
      and C(files) to write on the shared file system.
  returned: success
  type: dict
  sample: {runtime: docker, time_limit_minutes: 62, submit: [sbatch, --parsable, /shared/.clusterval-status/r1/slurm/job.sbatch]}
status_dir:
  description: The run's status directory on the shared C(data_cache_dir).
  returned: success
  type: str
  sample: /shared/cache/.clusterval-status/20261129T042833Z-a33530-mi300x_distributed_llama3_1_70b
"""
