"""What one task costs the controller per node: a skipped task, and a module call over SSH.

Runs two generated playbooks on the simulated cluster, each on the smallest and the largest node count in turn:
``--tasks`` tasks skipped by their ``when`` (a conditional step that does not run: the fork of a worker per
node), then ``--tasks`` calls of ``ansible.builtin.ping`` (the floor of a per-node step that does something). It
prints the controller's CPU-seconds (ansible-playbook and every worker it forked and reaped) per added node per
task: the unit in which a run's per-node tasks are counted (docs/architecture.md, "The controller's cost per
node").

    CLUSTERVAL_SIMCLUSTER_PREFIX=cvbench .venv/bin/python benchmarks/task_cost_bench.py --nodes 2 16
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from node_cost_bench import REPO, inventory

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
TASKS = {
    "skipped": "    - name: Skipped {index}\n      ansible.builtin.debug:\n        msg: never\n      when: false\n",
    "module call": "    - name: Ping {index}\n      ansible.builtin.ping:\n",
}


def playbook(directory: str, kind: str, count: int) -> str:
    path = os.path.join(directory, kind.replace(" ", "_") + ".yml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("- hosts: all\n  gather_facts: false\n  tasks:\n")
        handle.write("".join(TASKS[kind].format(index=index) for index in range(count)))
    return path


def cpu_of(inventory_path: str, path: str, hosts: list[str]) -> float:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([PLAYBOOK, "-i", inventory_path, path, "--limit", ":".join(hosts),
                           "--forks", str(max(64, len(hosts)))],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{path} on {len(hosts)} nodes failed:\n{proc.stdout[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs=2, default=[2, 16], metavar=("FEW", "MANY"))
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    inventory_path, hosts = inventory()
    few, many = options.nodes
    if many > len(hosts) or few >= many:
        raise SystemExit(f"the cluster has {len(hosts)} nodes; --nodes asks for {few} and {many}")
    with tempfile.TemporaryDirectory(prefix="task-cost-") as directory:
        for kind in TASKS:
            path = playbook(directory, kind, options.tasks)
            for dummy in range(options.repeat):
                cost = cpu_of(inventory_path, path, hosts[:many]) - cpu_of(inventory_path, path, hosts[:few])
                print(f"{kind:>12}: {cost / (many - few) / options.tasks * 1000:5.1f} ms per node per task "
                      f"({options.tasks} tasks, {few} and {many} nodes)", flush=True)


if __name__ == "__main__":
    main()
