#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: training_isolate
short_description: Find the bad node of a failed or slow run with short runs on halves of the nodes
version_added: 0.2.0
description:
  - Re-runs the same training config for a few steps on halves of O(hosts), then on halves of the bad half,
    about log2(N) rounds, each subset through C(playbooks/train.yml) (preflight, containers, watch, verdict and
    teardown on every path); subsets that share no node run at the same time.
  - A subset is V(healthy), V(slow) (more than O(slow_pct) below the best subset's throughput), V(below_expected)
    (alike with the best, but below the config's threshold) or V(failed) (its run failed; a culprit its
    verdict names is taken as it is). Every node of a healthy subset is cleared; a bad subset with exactly one
    node not cleared names it, with the rounds as evidence.
  - A multi-node config is never tested on one node alone (no inter-node collective would run); a half smaller
    than O(min_nodes) is completed with nodes already found healthy.
  - The sub-runs take this play's inventories, C(--forks), C(--user), C(--private-key), vault and become options
    and every C(-e) as given, then O(run_vars) before them and their subset, run directory and run id after.
  - Writes C(isolation.json) into O(run_dir), each subset's run under C(rounds/), and prints each round.
  - Runs on the controller; use it with C(run_once) and C(delegate_to=localhost).
options:
  hosts:
    description: The nodes to isolate, in rank order.
    type: list
    elements: str
    required: true
  mode:
    description: The plan's mode; a V(multi_node) config needs at least 2 nodes per subset.
    type: str
    choices: [single_node, multi_node]
    default: multi_node
  config:
    description: The training config, for the fabric command the result recommends when no node is named.
    type: str
    required: true
  run_dir:
    description: The isolation's directory on the controller (C(isolation.json), C(rounds/<round>g<group>/)).
    type: path
    required: true
  run_id:
    description: The isolation's run id; each subset's run id is it followed by C(-r<round>g<group>).
    type: str
    required: true
  min_nodes:
    description: Nodes per subset at least; V(0) means 2 for a multi-node config and 1 for a single-node one.
    type: int
    default: 0
  slow_pct:
    description: A subset more than this many percent below the best subset's throughput is slow.
    type: float
    default: 10.0
  max_rounds:
    description: Rounds at most; V(0) means ceil(log2(N)) + 2.
    type: int
    default: 0
  iterations:
    description: Steps of each short run (C(training_iterations) of the sub-runs); V(0) keeps the run's.
    type: int
    default: 0
  run_timeout:
    description: Seconds one sub-run may take; it is then interrupted (its teardown runs) and counted failed.
    type: float
    default: 3600.0
  playbook:
    description: The playbook each subset runs; default the collection's C(playbooks/train.yml).
    type: path
  run_vars:
    description: Extra variables of every sub-run, given before the play's own C(-e) (which can change them).
    type: dict
    default: {}
  forced_vars:
    description: Extra variables of every sub-run, given after the play's own C(-e) (with its subset, run
      directory and run id), for example C(slurm_nodes=0) - a subset is exactly its nodes.
    type: dict
    default: {}
  fail_on_finding:
    description: Fail the task when the isolation names a node or finds no healthy explanation.
    type: bool
    default: true
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: Isolate the bad node(s) of the play's hosts
  clusterval.training.training_isolate:
    hosts: "{{ ansible_play_hosts }}"
    mode: "{{ training_plan_result.plan.mode }}"
    config: "{{ training_plan_result.plan.config_path }}"
    run_dir: "{{ training_plan_result.run_dir }}"
    run_id: "{{ training_plan_result.plan.run_id }}"
    iterations: 12
    run_vars:
      fabric_enabled: false
  register: isolate_result
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
conclusion:
  description:
    - C(kind) (V(named), V(shared) every subset bad alike, V(between) a bad subset of healthy nodes,
      V(healthy) no subset reproduces the fault, V(undetermined)), C(named) (hosts), C(evidence) (per named
      host, the sentence and its groups), C(text), C(failed), C(advice) (the next command when no node is named).
  returned: always
  type: dict
  sample: {kind: named, named: [node3], failed: true, text: "node3 is bad in every group it joined: ..."}
isolation:
  description: The isolation document written as C(isolation.json) (C(docs/isolation.md)).
  returned: always
  type: dict
  sample: {schema_version: 1, nodes: [node1, node2, node3, node4], rounds: [], conclusion: {}}
lines:
  description: The lines printed for the isolation, one per subset run, then the conclusion.
  returned: always
  type: list
  elements: str
  sample: ["isolate round 1 node[1-2]: HEALTHY (step 108.1 s) - 151.5 tokens_per_sec_per_gpu (the best) [31.2s]"]
"""
