"""Per-node fixed cost of a run: the controller's CPU-seconds for the same short job on N simulated nodes.

Runs playbooks/train.yml (the cluster watch) on each node count in turn, ``--repeat`` times, and prints for each
the controller's CPU-seconds (ansible-playbook and every worker it forked and reaped: ``RUSAGE_CHILDREN``), its
wall time and the job's own length, then the cost per added node (least-squares slope of CPU against nodes)
and its ratio to the goal (0.25 CPU-s per node per run). The job is fixed (``STEPS`` steps of ``STEP_SECONDS``)
so the watch's share, which does not grow with nodes, stays the same at every size. The fabric gate is off
unless ``--fabric`` (its own cost and growth are measured by benchmarks/fabric_bench.py).

Needs a simulated cluster with at least the largest node count; another cluster prefix keeps it apart from the
tests' (CLUSTERVAL_SIMCLUSTER_PREFIX=cvbench CLUSTERVAL_SIMCLUSTER_SUBNET=10.217.0.0/24 scripts/simcluster up
--nodes 16; the same variables for this script).

    .venv/bin/python benchmarks/node_cost_bench.py --nodes 2 6 16 --repeat 2

``--launcher ssh slurm`` measures both launchers side by side (Slurm: the cluster brought up with ``--slurm``;
the Slurm commands and the status reads then run on the login host, not counted as the controller's).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
CONFIG = "configs/jax/mi300x_distributed_llama3_1_70b.json"
STEPS = 8
STEP_SECONDS = "0.2"
GOAL_CPU_S_PER_NODE = 0.25


def inventory() -> tuple[str, list[str]]:
    status = subprocess.run([str(REPO / "scripts" / "simcluster"), "status", "--json"], capture_output=True,
                            text=True, check=False)
    if status.returncode != 0:
        raise SystemExit("no simulated cluster is up (see the docstring)")
    info = json.loads(status.stdout)
    return info["inventory"], sorted(info["hosts"], key=lambda name: int(name[4:]))


def one_run(inventory_path: str, hosts: list[str], fabric: bool, launcher: str = "ssh") -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="node-cost-"))
    extra = {"training_run_dir": str(run_dir), "training_hosts": ":".join(hosts), "training_iterations": STEPS,
             "fabric_enabled": fabric, "training_launcher": launcher,
             "training_overrides_extra": {"config": {"container_config": {"env_dict": {
                 "CLUSTERVAL_SIM_STEP_SECONDS": STEP_SECONDS}}}}}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run([PLAYBOOK, "-i", inventory_path, "playbooks/train.yml", "-e", f"training_config={CONFIG}",
                           "-e", json.dumps(extra), "--forks", str(max(64, len(hosts)))],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"the run on {len(hosts)} nodes failed:\n{proc.stdout[-3000:]}")
    progress = json.loads(next(run_dir.glob("watch/*/progress.json")).read_text())["progress"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"nodes": len(hosts), "cpu_s": cpu, "wall_s": wall, "training_s": progress["elapsed_s"], "launcher": launcher}


def slope(points: list[tuple[float, float]]) -> float:
    mean_x = sum(x for x, dummy in points) / len(points)
    mean_y = sum(y for dummy, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, dummy in points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 6, 16])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--fabric", action="store_true",
                        help="with the fabric gate (off by default: its own cost is in benchmarks/fabric_bench.py)")
    parser.add_argument("--launcher", nargs="+", choices=["ssh", "slurm"], default=["ssh"])
    options = parser.parse_args()
    inventory_path, hosts = inventory()
    if max(options.nodes) > len(hosts):
        raise SystemExit(f"the cluster has {len(hosts)} nodes; --nodes asks for {max(options.nodes)}")
    rows = []
    for dummy in range(options.repeat):
        for count in options.nodes:
            for launcher in options.launcher:
                rows.append(one_run(inventory_path, hosts[:count], options.fabric, launcher))
                row = rows[-1]
                print(f"{launcher:>5} {row['nodes']:>3} nodes: controller {row['cpu_s']:6.2f} CPU-s, "
                      f"wall {row['wall_s']:5.1f} s, training {row['training_s']:5.1f} s, "
                      f"{row['cpu_s'] / row['nodes']:.2f} CPU-s per node", flush=True)
    for launcher in options.launcher if len(set(options.nodes)) > 1 else ():
        per_node = slope([(r["nodes"], r["cpu_s"]) for r in rows if r["launcher"] == launcher])
        print(f"{launcher}: cost per added node: {per_node:.3f} CPU-s per run "
              f"({per_node / GOAL_CPU_S_PER_NODE:.2f} x the goal of {GOAL_CPU_S_PER_NODE} CPU-s)")


if __name__ == "__main__":
    main()
