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
  - With O(launch=container) (the role's default) every node of the group runs the command in a container of
    O(spec) (the training container's, with host network, the GPU devices, the plan's NCCL/RCCL and socket settings),
    started detached through the node's Docker daemon, waited for, read and removed; run with C(async) by the role,
    so that every node's rank starts whatever C(forks) is. With O(launch=each) every node of the group runs the
    command on the host; with O(launch=first) only the group's first node does, for example C(mpirun -H
    {hosts_slots} ...), and the others return at once.
  - With O(check), nothing runs - the module says which of the benchmarks' programs the image (O(spec)'s) or the
    host lacks, for the role to say once that the gate cannot run.
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
    description:
      - Where the command runs - in a container on every node of the group, on every node's host, or only on the
        group's first node's host.
      - With O(launch=container), the container runs on the node's Docker daemon, O(docker_host).
    type: str
    choices: [container, each, first]
    default: each
  spec:
    description:
      - With O(launch=container), the training container's spec for this node (the role's
        C(clusterval.training.fabric_container) filter makes it from the plan, with the gate's image).
    type: dict
  check:
    description: Only look for the benchmarks' programs (in the image with O(launch=container), else on the host).
    type: bool
    default: false
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
  - clusterval.training.docker
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
missing:
  description: With O(check), the programs the image or the host lacks.
  returned: with O(check)
  type: list
  elements: str
  sample: [/opt/rccl-tests/build/all_reduce_perf]
where:
  description: With O(check), where they were looked for (the image, or the host).
  returned: with O(check)
  type: str
  sample: rocm/jax-training:maxtext-v25.9
error:
  description: With O(check), why nothing could be looked at (the image is not on the node).
  returned: with O(check), when it failed
  type: str
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
      C(unmet) says why the ranks of a group of several nodes did not meet (each ran alone); C(env), in a container,
      the NCCL/RCCL and socket settings it ran with.
  returned: always
  type: dict
  sample: {all_reduce_perf: {rc: 0, timed_out: false, seconds: 1.2, busbw: 361.17, avg_busbw: 142.652}}
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _fabric, _fabric_container
from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION, DockerError

# The settings of the fabric's libraries and sockets that the result shows (none is a secret).
NETWORK_ENV = ("NCCL_", "RCCL_", "GLOO_", "UCX_", "HSA_", "HIP_VISIBLE", "CUDA_VISIBLE")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            round=dict(type="dict", required=True),
            benchmarks=dict(type="list", elements="dict", required=True),
            gpus=dict(type="int", default=8),
            launch=dict(type="str", choices=["container", "each", "first"], default="each"),
            spec=dict(type="dict"),
            **ENDPOINT_OPTION,
            check=dict(type="bool", default=False),
            port=dict(type="int", default=29650),
            timeout=dict(type="float", default=300.0),
        ),
        supports_check_mode=False,
    )
    params = module.params
    if params["launch"] == "container" and not (params["spec"] or {}).get("image"):
        module.fail_json(msg="spec: launch=container needs the container spec with its image")
    if params["check"]:
        module.exit_json(changed=False, **check_tools(params))
    name = params["round"].get("name", "?")
    group = _fabric.group_of(params["round"], params["node"])
    if group is None:
        module.exit_json(changed=False, round=name, group=None, rank=0, seconds=0.0, simulated=False, benchmarks={})
    rank = group["hosts"].index(params["node"])
    results, seconds = {}, 0.0
    if params["launch"] != "first" or rank == 0:
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
            result = run(params, argv, env, str(bench.get("name")))
            result["unmet"] = _fabric.unmet(result, group) if rank == 0 else ""
            timed_out = str(bench.get("name")) if result["timed_out"] else None
            results[str(bench.get("name"))] = dict(result, argv=argv)
            seconds += result["seconds"]
    module.exit_json(changed=False, round=name, group=group, rank=rank, seconds=round(seconds, 3),
                     simulated=any(r.get("simulated") for r in results.values()), benchmarks=results)


def run(params, argv, env, benchmark):
    """One benchmark on the host, or in a container of the training container's spec."""
    if params["launch"] != "container":
        return _fabric.run_benchmark(argv, env, params["timeout"], benchmark)
    spec = _fabric_container.fabric_spec(params["spec"], argv, env)
    ran = _fabric_container.run_in_container(params["docker_host"], spec, params["timeout"])
    result = _fabric.outcome(ran["output"], ran["rc"], ran["timed_out"], ran["seconds"], benchmark)
    if ran.get("error"):
        result["tail"] = [ran["error"]]
    result["env"] = {k: v for k, v in spec["env"].items() if k.startswith(NETWORK_ENV)}
    return result


def check_tools(params):
    """{missing, where}, or {error} when the image is not on the node."""
    paths = _fabric.tool_paths(params["benchmarks"])
    if params["launch"] != "container":
        return {"missing": [p for p in paths if not (os.access(p, os.X_OK) if p.startswith("/") else shutil.which(p))],
                "where": "the hosts (fabric_launch: %s)" % params["launch"]}
    image = params["spec"]["image"]
    try:
        missing = _fabric_container.tools_missing(params["docker_host"], image, paths,
                                                  "%s-fabric-probe" % params["spec"].get("name", "clusterval"))
    except LookupError as exc:
        return {"error": str(exc)}
    except (OSError, ValueError, DockerError) as exc:
        return {"error": "looking into %s: %s" % (image, exc)}
    return {"missing": missing, "where": image}


if __name__ == "__main__":
    main()
