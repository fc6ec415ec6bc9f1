"""Isolation benchmark on the simulated cluster: a lock-step job slowed on node3, side by side in one run.

For each node count N (default 4 and 8; node1..nodeN of the cluster that is up), with node3's containers 4 times
slower (the simulator's CLUSTERVAL_SIM_SLOW_FACTOR, a host variable of a second inventory file, simulated):

- ``playbooks/train.yml`` on the N nodes, with a threshold of 100 tokens/s/GPU (healthy simulated nodes run at
  about 150): its wall time and its verdict (lock-step: every node reports the slowest node's pace, so every node
  is below the threshold and none stands out);
- ``playbooks/isolate.yml`` on the same nodes, each short run ``--steps`` steps: the seconds from its start to the
  ``ISOLATION:`` line, what it named, its rounds and runs.

Needs a simulated cluster with at least the largest node count (scripts/simcluster up --nodes 8) and the
environment of that cluster (CLUSTERVAL_SIMCLUSTER_PREFIX ...).

    .venv/bin/python benchmarks/isolate_bench.py [--nodes 4 8] [--steps 6]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from launch_bench import cluster_info  # noqa: E402
from test_isolate import slow_node_inventory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
CONFIG = str(REPO / "configs" / "jax" / "mi300x_distributed_llama3_1_70b.json")
SLOW = "node3"
STEP_SECONDS = "0.15"
EXPECTED = "100"
TIMEOUT_S = 900


def run(playbook: str, inventories: list[str], hosts: list[str], work: Path, extra: dict) -> tuple[float, float, str]:
    """(wall seconds, seconds until the ISOLATION or VERDICT line, output)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_INJECT_FACT_VARS="False")
    variables = {"training_config": CONFIG, "training_hosts": ":".join(hosts), "training_run_dir": str(work),
                 "fabric_enabled": False, "training_overrides_extra": {
                     "config": {"container_config": {"env_dict": {"CLUSTERVAL_SIM_STEP_SECONDS": STEP_SECONDS}}},
                     # healthy simulated nodes run at about 150 tokens/s/GPU, node3's jobs at a quarter of it
                     "model_params": {"multi_node": {"llama3.1-70b": {"mi300x": {"result_dict": {
                         "tokens_per_sec_per_gpu": EXPECTED}}}}}}, **extra}
    argv = [PLAYBOOK]
    for inventory in inventories:
        argv += ["-i", inventory]
    argv += [str(REPO / "playbooks" / playbook), "-e", json.dumps(variables)]
    started = time.monotonic()
    seen, lines = None, []
    with subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        for line in proc.stdout:
            lines.append(line)
            if seen is None and re.match(r"^\s*\"?(ISOLATION|VERDICT):", line):
                seen = time.monotonic() - started
        proc.wait(timeout=TIMEOUT_S)
    wall = time.monotonic() - started
    return wall, seen if seen is not None else wall, "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    info = cluster_info()
    if max(args.nodes) > int(info["nodes"]):
        raise SystemExit(f"--nodes {max(args.nodes)}: only {info['nodes']} nodes are up")
    print("nodes  train_s  train verdict                          | isolate: to_named_s  wall_s  named  rounds  runs")
    with tempfile.TemporaryDirectory(prefix="isolate-bench-") as tmp:
        inventories = [info["inventory"], slow_node_inventory(Path(tmp) / "slow.json", SLOW)]
        for count in args.nodes:
            hosts = [f"node{i}" for i in range(1, count + 1)]
            train, dummy, out = run("train.yml", inventories, hosts, Path(tmp) / f"train-{count}",
                                    {"training_iterations": args.steps})
            verdict = next((line.strip()[9:48] for line in out.splitlines() if line.startswith("VERDICT:")), "?")
            work = Path(tmp) / f"isolate-{count}"
            wall, named_at, out = run("isolate.yml", inventories, hosts, work, {"isolate_iterations": args.steps})
            try:
                document = json.loads((work / "isolation.json").read_text())
            except (OSError, ValueError):
                print(f"{count:5d}  {train:7.1f}  {verdict:38s} | no isolation.json:\n{out[-2000:]}")
                continue
            named = ",".join(document["conclusion"]["named"]) or document["conclusion"]["kind"]
            runs = sum(len(entry["groups"]) for entry in document["rounds"])
            print(f"{count:5d}  {train:7.1f}  {verdict:38s} |          {named_at:10.1f}  {wall:6.1f}  {named:5s}  "
                  f"{len(document['rounds']):6d}  {runs:4d}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
