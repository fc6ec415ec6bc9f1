#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_fabric
short_description: Run this node's part of one round of the fabric gate (rccl-tests / nccl-tests)
version_added: 0.2.0
description:
  - Runs on every node of a round at once. Finds the group of O(round) this node belongs to and runs each
    benchmark of O(benchmarks) (C(all_reduce_perf), C(alltoall_perf)) for it, to its end or O(timeout) seconds,
    after which its whole process group is killed, so nothing stays running.
  - With O(launch=each) every node of the group runs the command (the simulated stand-in, or a launcher that
    starts one rank per node); with O(launch=first) only the group's first node does, for example C(mpirun -H
    {hosts_slots} ...), and the others return at once.
  - Returns the bus bandwidth of the largest message size parsed from rccl-tests' table, the summary lines and
    the last lines of output; the C(clusterval.training.fabric) role judges the rounds.
options:
  node:
    description: This node's name in O(round).
    type: str
    required: true
  round:
    description:
      - The round - C(name) and C(groups), each C({name, hosts, addresses}) with the hosts in rank order (the
        C(clusterval.training.fabric_rounds) filter makes them).
    type: dict
    required: true
  benchmarks:
    description:
      - Each C({name, command}); C(command) is an argv in which C({hosts}), C({hosts_slots}), C({nnodes}),
        C({gpus}) and C({np}) are replaced by the group's addresses, C(addr:gpus) list, node count, GPUs per node
        and total GPUs.
    type: list
    elements: dict
    required: true
  gpus:
    description: GPUs per node.
    type: int
    default: 8
  launch:
    description: Who runs the command - every node of the group, or only its first node.
    type: str
    choices: [each, first]
    default: each
  port:
    description: The TCP port the simulated stand-in's ranks listen on (real rccl-tests ignore it).
    type: int
    default: 29650
  timeout:
    description: Seconds one benchmark may run; then it is killed and reported as timed out.
    type: float
    default: 300
extends_documentation_fragment:
  - clusterval.training.attributes
attributes:
  check_mode:
    support: none
"""

EXAMPLES = r"""
- name: This node's part of the all-nodes round
  clusterval.training.training_fabric:
    node: "{{ inventory_hostname }}"
    round: {name: all, groups: [{name: all, hosts: [node1, node2], addresses: [10.0.0.1, 10.0.0.2]}]}
    benchmarks:
      - name: all_reduce_perf
        command: [mpirun, -np, "{np}", -H, "{hosts_slots}", /opt/rccl-tests/build/all_reduce_perf, -b, 8M, -e, 1G]
    launch: first
"""

RETURN = r"""
round:
  description: The round's name.
  returned: always
  type: str
  sample: all
group:
  description: The group this node ran in; null when the node is in none of the round's groups.
  returned: always
  type: dict
  sample: {name: node1+node2, hosts: [node1, node2], addresses: [10.0.0.1, 10.0.0.2]}
rank:
  description: This node's rank in its group.
  returned: always
  type: int
  sample: 0
seconds:
  description: Seconds the benchmarks took on this node.
  returned: always
  type: float
  sample: 4.2
simulated:
  description: Whether the output came from the simulated stand-in.
  returned: always
  type: bool
  sample: true
benchmarks:
  description:
    - Benchmark name -> C({rc, timed_out, seconds, busbw, avg_busbw, out_of_bounds, rows, tail, argv}); C(busbw) is
      the bus bandwidth (GB/s) of the largest message size; empty when this node did not run (O(launch=first)).
  returned: always
  type: dict
  sample: {all_reduce_perf: {rc: 0, timed_out: false, seconds: 1.2, busbw: 361.17, avg_busbw: 142.652}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _fabric


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            round=dict(type="dict", required=True),
            benchmarks=dict(type="list", elements="dict", required=True),
            gpus=dict(type="int", default=8),
            launch=dict(type="str", choices=["each", "first"], default="each"),
            port=dict(type="int", default=29650),
            timeout=dict(type="float", default=300.0),
        ),
        supports_check_mode=False,
    )
    params = module.params
    name = params["round"].get("name", "?")
    group = _fabric.group_of(params["round"], params["node"])
    if group is None:
        module.exit_json(changed=False, round=name, group=None, rank=0, seconds=0.0, simulated=False, benchmarks={})
    rank = group["hosts"].index(params["node"])
    results, seconds = {}, 0.0
    if params["launch"] == "each" or rank == 0:
        env = _fabric.rank_env(group, params["node"], params["port"], params["timeout"])
        timed_out = None
        for bench in params["benchmarks"]:
            argv = _fabric.substitute(bench.get("command") or [], group, params["gpus"])
            if not argv:
                module.fail_json(msg="benchmarks: %r has no command" % bench.get("name"))
            if timed_out:
                # The group's ring is broken or crawling: the next benchmark would only wait as long again.
                results[str(bench.get("name"))] = {"skipped": "%s timed out first" % timed_out, "argv": argv}
                continue
            outcome = _fabric.run_benchmark(argv, env, params["timeout"], str(bench.get("name")))
            timed_out = str(bench.get("name")) if outcome["timed_out"] else None
            outcome["argv"] = argv
            results[str(bench.get("name"))] = outcome
            seconds += outcome["seconds"]
    module.exit_json(changed=False, round=name, group=group, rank=rank, seconds=round(seconds, 3),
                     simulated=any(r.get("simulated") for r in results.values()), benchmarks=results)


if __name__ == "__main__":
    main()
