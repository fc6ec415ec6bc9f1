# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: training_slurm
short_description: The Slurm job a training plan emits (sbatch script, the step, every node's part)
version_added: 0.2.0
description:
  - Renders, on the controller, what C(training_launcher=slurm) submits - one sbatch script with one step and one
    task per node (C(--nodelist), C(--exclusive), C(--no-requeue), C(--kill-on-bad-exit=0),
    C(--wait-all-nodes=1), C(--time) above the run's deadline, a comment naming the run), the step wrapper each task
    runs, and every node's part of the plan, which the task picks by C($SLURMD_NODENAME).
  - Touches no host - the C(clusterval.training.slurm) role writes the files on the shared file system from the
    login host and submits the script there. C(--check) shows the whole job.
  - The container is the one the SSH path would start (the same spec, overrides and token mount); the runtime is
    C(docker) through the step wrapper (Slurm's SIGTERM becomes the container's stop), or rendered for C(pyxis) or
    C(apptainer).
options:
  plan:
    description: The plan (C(clusterval.training.training_plan)'s C(plan)).
    type: dict
    required: true
  hosts:
    description: The training nodes, by their Slurm node names.
    type: list
    elements: str
    required: true
  shipments:
    description: Every host's supervisor shipment (the train role's C(ship) tasks), by host.
    type: dict
    required: true
  settings:
    description:
      - The Slurm settings (the slurm role's C(slurm_settings)) - C(partition), C(account), C(qos),
        C(reservation), C(time_limit), C(extra_args), C(runtime) (C(docker), C(pyxis), C(apptainer)),
        C(stop_grace), C(python), C(docker_host), C(gpu_vendor).
    type: dict
    default: {}
  spec_overrides:
    description: Overrides of the container spec, as the container role takes them.
    type: dict
    default: {}
  hf_token_present:
    description: Whether preflight found the HF token on the nodes (its mount is then part of the container).
    type: bool
    default: true
  deadline:
    description: The run's deadline in seconds; the job's C(--time) is above it.
    type: float
    required: true
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
    details: Renders the job; it never writes or submits anything.
  idempotent:
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
    details: Runs on the controller only; nothing runs on the hosts.
seealso:
  - name: Slurm as the launcher
    description: docs/slurm.md in the collection.
    link: https://example.invalid/clusterval/training/docs/slurm.md
"""

EXAMPLES = r"""
- name: The job the plan emits
  clusterval.training.training_slurm:
    plan: "{{ train_plan }}"
    hosts: "{{ ansible_play_hosts_all }}"
    shipments: "{{ slurm_shipments }}"
    settings: {partition: gpu, reservation: validation, runtime: docker}
    deadline: 3600
  register: slurm_job
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
job:
  description:
    - What the slurm role writes and runs - C(script) and C(script_path), C(submit) (the sbatch argv),
      C(options), C(step) (each task's argv), C(runtime), C(time_limit_minutes), C(name), C(output_pattern),
      C(slurm_dir), C(directories) and C(files) to write, C(clean) (the cleanup step's argv).
  returned: success
  type: dict
status_dir:
  description: The run's status directory on the shared file system, which the watch reads.
  returned: success
  type: str
  sample: /data/clusterval/status/20261129T040000Z-1a2b3c-llama
msg:
  description: The job in one line.
  returned: always
  type: str
  sample: "sbatch /data/clusterval/slurm/R/job.sbatch: 4 nodes, --time=70, runtime docker"
"""
