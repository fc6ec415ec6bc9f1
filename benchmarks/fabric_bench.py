"""Fabric gate benchmark on the simulated cluster, side by side in one run.

For each node count N (default 2, 4, 8, 16; node1..nodeN of the cluster that is up):

- healthy: the wall time of ``playbooks/preflight.yml`` and of ``playbooks/fabric.yml`` (preflight + gate) on the
  same nodes; the gate's cost is the difference. Also the benchmark seconds of the gate's rounds;
- throttled (N >= 4): a real token bucket on node3's interface (``tc ... tbf rate 20mbit burst 32kbit latency
  400ms``), then ``playbooks/train.yml``: the seconds from the ansible-playbook start to the output line naming
  node3, the whole playbook's wall time, what was named, and the rounds the gate ran (the isolation's rounds).

Needs a simulated cluster with at least the largest node count (scripts/simcluster up --nodes 16) and the
environment of that cluster (CLUSTERVAL_SIMCLUSTER_PREFIX ...).

    .venv/bin/python benchmarks/fabric_bench.py [--nodes 2 4 8 16]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from launch_bench import cluster_info  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SIMCLUSTER = REPO / "scripts" / "simcluster"
PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
CONFIG = str(REPO / "configs" / "jax" / "mi300x_distributed_llama3_1_70b.json")
SLOW = "node3"
THROTTLE = ["tc", "qdisc", "replace", "dev", "simeth0", "root", "tbf", "rate", "20mbit", "burst", "32kbit",
            "latency", "400ms"]
TIMEOUT_S = 600


def run(playbook: str, hosts: list[str], work: Path, watch_for: str = "") -> tuple[float, float | None, str]:
    """(wall seconds, seconds until a line containing `watch_for` appeared or None, output)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_INJECT_FACT_VARS="False")
    argv = [PLAYBOOK, "-i", cluster_info()["inventory"], str(REPO / "playbooks" / playbook), "-e",
            json.dumps({"training_config": CONFIG, "training_hosts": ":".join(hosts), "training_run_dir": str(work)})]
    started = time.monotonic()
    seen, lines = None, []
    with subprocess.Popen(argv, cwd=work.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        for line in proc.stdout:
            lines.append(line)
            if watch_for and seen is None and watch_for in line:
                seen = time.monotonic() - started
        proc.wait(timeout=TIMEOUT_S)
    return time.monotonic() - started, seen, "".join(lines)


def throttle(on: bool) -> None:
    argv = THROTTLE if on else ["tc", "qdisc", "del", "dev", "simeth0", "root"]
    subprocess.run([str(SIMCLUSTER), "exec", SLOW, "--", *argv], capture_output=True, check=on)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    args = parser.parse_args()
    available = int(cluster_info()["nodes"])
    if max(args.nodes) > available:
        raise SystemExit(f"--nodes {max(args.nodes)}: only {available} nodes are up")
    print("nodes  preflight_s  preflight+gate_s  gate_s  | throttled node3: to_named_s  wall_s  named        rounds")
    with tempfile.TemporaryDirectory(prefix="fabric-bench-") as tmp:
        for count in args.nodes:
            hosts = [f"node{i}" for i in range(1, count + 1)]
            base, dummy, out = run("preflight.yml", hosts, Path(tmp) / f"pre-{count}")
            gate, dummy, out = run("fabric.yml", hosts, Path(tmp) / f"gate-{count}")
            passed = "fabric gate PASS" in out
            line = f"{count:5d}  {base:11.1f}  {gate:16.1f}  {gate - base:6.1f}{'' if passed else ' (not PASS)'}"
            if count >= 4:
                work = Path(tmp) / f"train-{count}"
                throttle(True)
                try:
                    wall, named_at, out = run("train.yml", hosts, work, f"fabric gate FAIL: {SLOW} is slow")
                finally:
                    throttle(False)
                fabric = json.loads((work / "results.json").read_text()).get("fabric", {})
                named = ",".join(n["name"] for n in fabric.get("named", [])) or "-"
                rounds = "+".join(r["name"] for r in fabric.get("rounds", []))
                line += (f"  | {named_at if named_at is None else round(named_at, 1)!s:>23}  {wall:6.1f}  "
                         f"{named:11}  {rounds}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
