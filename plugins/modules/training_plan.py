# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: training_plan
short_description: Plan a training validation run for every node from a training config
version_added: 0.1.0
description:
  - Reads a training config (JSON, the seed format of the cluster validation suite) on the controller,
    applies O(overrides), resolves C({user-id}) to the remote user, selects
    C(model_params[single_node|multi_node][model][gpu_arch]) and computes, for every host, everything it
    needs to train - node rank, coordinator, container spec, environment, C(XLA_FLAGS), the MaxText YAML or
    the Megatron-LM environment, C(launch.sh) - and the thresholds of the verdict.
  - Values the planner can derive are derived - the number of nodes from the hosts, the coordinator (master)
    address from the first host in multi-node mode. Every other value that still says C(<changeme>) is an
    error; all of them are listed at once with their JSON path.
  - A single-node config run on several hosts is one independent one-node job per host.
  - Bad input fails the task with a message naming the JSON path, the expected and the found value; the
    list of problems is returned in RV(problems).
  - The plan is returned in RV(plan) and set as the fact C(training_plan). Run it with C(run_once) so that
    the fact lands on every host of the play; a host finds its own part with
    C(training_plan | clusterval.training.node_view(inventory_hostname)), which works with both forms of
    the plan (see O(compact)).
options:
  config:
    description:
      - Path of the training config on the controller. A relative path is looked for under the current
        directory, then the playbook's directory, then the collection's own C(configs/) (both
        C(configs/jax/x.json) and C(jax/x.json) work from an installed collection); the plan's
        C(config_found_in) and the task's message say which file was used.
      - A C(.yaml) or C(.yml) config is a Neuronx Distributed Training YAML, planned for AWS Trainium nodes.
    type: path
    required: true
  hosts:
    description:
      - Ordered host names; the first one is node rank 0 and the coordinator in multi-node mode.
      - A name in the inventory uses its C(ansible_host) as address; any other name is its own address.
      - Defaults to the hosts of the play.
    type: list
    elements: str
  model:
    description:
      - Model key under C(model_params[mode]), for example V(llama3_1_8b) or V(llama3.1-70b).
      - Defaults to the only model of the config; an error lists the available keys when there are several.
    type: str
  gpu_arch:
    description:
      - GPU arch key under the model, for example V(mi300x), V(mi325), V(mi350), V(mi355).
      - Defaults to the only arch of the model. When the model has several, or with V(auto), the arch is the
        one the nodes' GPUs show (O(gpus_found)); without O(gpus_found) an error lists the available keys.
    type: str
  gpus_found:
    description:
      - What each node's GPU tool said, host name to the result of M(clusterval.training.training_gpus) (its
        C(gpu) report and C(tried)); C(playbooks/tasks/plan.yml) asks the nodes and passes it when the arch is
        to be detected (see M(clusterval.training.training_arch)).
      - Used only when O(gpu_arch) is not given and the model has several arch entries, or is V(auto). Every
        node must list GPUs of one arch that the config has an entry for (compared in canonical form, V(MI325X)
        is V(mi325)); otherwise the task fails naming the config's path, the nodes of each arch, the
        config's archs and what to set. GPUs of a vendor the config has no entry for (H100s and the seeds'
        AMD entries) run the config's entries when these agree on every parameter but their targets, which
        are then not judged. The plan's C(gpu_arch_source) and C(gpu_arch_detected) say what was detected, where
        and by which tool.
      - The detected vendor is the run's when neither the inventory's C(training_gpu_vendor) nor
        C(config.gpu_vendor) names one, and must be theirs when they do.
    type: raw
  container_image:
    description:
      - The image to run (the playbooks pass C(training_container_image), an inventory value), over
        C(config.container_images[<vendor>]) and C(config.container_image); for example
        V(nvcr.io/nvidia/pytorch:25.09-py3) with Megatron-LM on NVIDIA nodes.
      - The GPU vendor of the run is the hosts' C(training_gpu_vendor) (V(amd) or V(nvidia), an inventory or
        extra variable), else C(config.gpu_vendor), else the vendor the image names (C(nvcr.io/nvidia/),
        C(ghcr.io/nvidia/) - NVIDIA; C(rocm/) - AMD), else V(amd). Hosts of two vendors, or an image of the other
        vendor, are refused before any node is touched.
    type: str
  mode:
    description:
      - V(single_node) or V(multi_node); defaults to the only mode of the config.
    type: str
    choices: [single_node, multi_node]
  framework:
    description:
      - Training stack. Defaults to what the config implies (C(training_steps) - MaxText,
        C(training_iterations) - Megatron-LM, C(torchtitan_root) - TorchTitan, a C(.yaml) config - Neuronx
        Distributed Training).
    type: str
    choices: [maxtext, megatron, primus, nxdt, torchtitan]
  overrides:
    description:
      - Deep-merged over the config JSON before planning, in the same shape as the config, for example a
        dict with key C(config) holding C(nccl_ib_hca_list). A V(null) value removes the key.
      - For the suite's versioned format, keys at the paths the config uses (C(training.nccl.ib_hca_list),
        C(container.image)) are merged over the config as written, C(config) over the engine's shape.
      - Anything but a dict (a list, a string) fails with a message naming C(training_overrides), before any
        node is touched.
    type: raw
    default: {}
  overrides_extra:
    description:
      - Deep-merged over O(overrides) (the playbooks pass C(training_overrides_extra) here, over the
        inventory's C(training_overrides)); a V(null) stays and removes the config's key.
      - Anything but a dict fails with a message naming C(training_overrides_extra).
    type: raw
    default: {}
  iterations:
    description:
      - Number of training steps; sets C(config.training_steps) (MaxText) or C(config.training_iterations)
        (Megatron-LM).
    type: int
  run_id:
    description:
      - Identifier of the run, used in paths and container labels. Defaults to C(<UTC timestamp>-<config name>).
    type: str
  remote_user:
    description:
      - User that C({user-id}) resolves to. Defaults to the connection user of the first host, else the
        controller's user.
    type: str
  warmup_steps:
    description:
      - Steps skipped before judging throughput. Defaults to V(3) for MaxText, V(2) for Megatron-LM.
    type: int
  gpus_per_node:
    description:
      - GPUs per node; the MaxText C(ici_*) parallelism product must equal it, and the job's total tokens/s
        is the per-GPU rate times the job's GPUs.
      - Defaults to C(training.gpus_per_node) of a versioned config, else V(8).
    type: int
  sweep:
    description:
      - The validation suite's versioned format (C(schema_version) V(1)) describes several runs, its sweeps
        (C(training.sweeps[].name) for MaxText, the keys of C(sweep.combinations) for Megatron-LM). This
        names the one to run.
      - Defaults to the first enabled sweep (C(training.enabled_sweep_list), C(sweep.runs)); a warning names
        the others.
    type: str
  compact:
    description:
      - Return the plan in its compact form - what every node shares (files, container spec, environment,
        launch, paths) is stored once in C(node_shared), what the nodes of a job share in
        C(jobs[i].node_shared), and C(nodes[host]) keeps only what is the node's own (C(host), C(address),
        C(job), C(node_rank), C(prints_steps), C(NODE_RANK), C(JAX_PROCESS_INDEX) and the like).
      - The full form grows by about 5.9 KB per host (each node carries its own C(launch.sh), MaxText YAML,
        container spec and environment); the compact form by a few hundred bytes, so that a plan for
        hundreds of hosts stays within what AWX or a fact cache accepts.
      - Read a node's part with the filter P(clusterval.training.node_view#filter); it gives the same dict from
        both forms. V(false) returns the full form, easier to read for a handful of hosts.
    type: bool
    default: true
  runs_dir:
    description:
      - The controller directory that holds the runs; RV(run_dir) is C(<runs_dir>/<run id>).
      - Defaults to C(runs) under the directory C(ansible-playbook) (or ansible-runner) runs from, never inside
        the collection.
    type: path
  hf_token_handed:
    description:
      - Whether the controller hands the HF token to every node. The C(preflight) role copies
        C(training_hf_token_controller_file), which an AWX credential sets, and each node's C(hf_token_file) is
        then the run's own copy C(<log_dir>/clusterval/.hf_token-<run id>) instead of the config's.
    type: bool
    default: false
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
    details: Nothing changes anywhere; the plan is computed the same way in check mode.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: all
    details: Runs on the controller only; nothing runs on the hosts.
notes:
  - The HF token never enters the plan; only the path of its file (C(hf_token_file)) does.
seealso:
  - name: Config semantics
    description: docs/config.md in the collection.
    link: https://example.invalid/clusterval/training/docs/config.md
"""

EXAMPLES = r"""
- name: Plan the run once for the whole play
  clusterval.training.training_plan:
    config: "{{ training_config }}"
    overrides: "{{ training_overrides | default({}) }}"
  run_once: true

- name: Plan a Megatron-LM run of 30 iterations on two named hosts
  clusterval.training.training_plan:
    config: configs/megatron/mi3xx_megatron_llama_distributed.json
    hosts: [node1, node2]
    model: llama3_1_8b
    gpu_arch: mi300x
    iterations: 30
    overrides:
      config:
        nic_type: thor2
        nccl_ib_hca_list: bnxt_re0,bnxt_re1,bnxt_re2,bnxt_re3
        nccl_socket_ifname: ens51f1np1
        gloo_socket_ifname: ens51f1np1
        nccl_ib_gid_index: "3"
  run_once: true

- name: Plan a small run in the full form, every node spelled out
  clusterval.training.training_plan:
    config: "{{ training_config }}"
    compact: false
  run_once: true

- name: Show this host's container environment (either form)
  ansible.builtin.debug:
    msg: "{{ (training_plan | clusterval.training.node_view(inventory_hostname)).container.env }}"
"""

RETURN = r"""
run_dir:
  description: The run's directory on the controller, C(<runs_dir>/<run id>), for plan.json, the logs and the reports.
  returned: success
  type: str
  sample: /home/alice/validation/runs/20261121T101500Z-mi300x_distributed_llama3_1_70b
plan:
  description:
    - The plan; its schema is documented in docs/architecture.md.
    - C(form) says which form it has, V(full) or V(compact) (see O(compact)). In the compact form the plan
      also has C(node_shared) and every job C(node_shared), and C(nodes[host]) holds only the node's own
      values.
  returned: success
  type: dict
  sample:
    form: full
    framework: maxtext
    simulated: false
    config_name: mi300x_distributed_llama3_1_70b
    config_found_in: found in the working directory
    run_id: 20261121T101500Z-mi300x_distributed_llama3_1_70b
    mode: multi_node
    model: llama3.1-70b
    trains_model: llama3.1-70b
    gpu_arch: mi300x
    gpu_arch_source: detected on node[1-2] by amd-smi (8 x AMD Instinct MI300X (mi300x, gfx942))
    gpu_arch_detected: {key: mi300x, arch: mi300x, vendor: amd, nodes: [node1, node2], tools: [amd-smi],
                        models: [AMD Instinct MI300X], text: "detected on node[1-2] by amd-smi (...)"}
    final_step: 29
    total_steps: 30
    warmup_steps: 3
    jobs: [{name: job-0, hosts: [node1, node2], nnodes: 2, coordinator_address: 10.0.0.11,
            coordinator_port: 1234}]
    thresholds: [{metric: tokens_per_sec_per_gpu, kind: min, value: null, direction: higher, set: false}]
    warnings: []
    nodes: {node1: {node_rank: 0, nnodes: 2, container: {env: {NNODES: "2", NODE_RANK: "0"}}}}
ansible_facts:
  description: The fact C(training_plan), the same dict as RV(plan).
  returned: success
  type: dict
  sample: {training_plan: {framework: maxtext}}
msg:
  description: One line saying what was planned, or the error.
  returned: always
  type: str
  sample: planned maxtext on 2 host(s) in 1 job(s), full form
problems:
  description: Every input problem, each with the JSON path, the expected and the found value.
  returned: failure
  type: list
  elements: dict
  sample: [{path: config.nccl_ib_hca_list, expected: a value set in the config or through overrides,
            found: <changeme>}]
"""
