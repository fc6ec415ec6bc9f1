#!/usr/bin/env python3
"""Launch benchmark: time from `ansible-playbook` start until every node's training process runs,
against a baseline that starts the same containers with plain parallel ssh + docker run.

Needs a simulated cluster (scripts/simcluster up --nodes 4). Prints both figures and the ratio, and how long
after the last node's last log line the verdict (results.json) was written.

    .venv/bin/python benchmarks/launch_bench.py [--inventory inventories/simulated/hosts.yml] [--nodes 4]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view  # noqa: E402
CONFIG = "configs/jax/mi300x_distributed_llama3_1_70b.json"
SIMCLUSTER = REPO / "scripts" / "simcluster"


def cluster_info() -> dict:
    return json.loads(subprocess.run([str(SIMCLUSTER), "status", "--json"], capture_output=True, text=True,
                                     check=True).stdout)


def ssh_argv(info: dict, address: str, command: str) -> list[str]:
    return ["ssh", "-i", info["ssh_key"], "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={info['known_hosts']}", f"root@{address}", command]


def training_running(info: dict, address: str) -> bool:
    probe = "docker ps --filter label=clusterval.run_id -q | xargs -r -I{} docker top {} | grep -q train"
    return subprocess.run(ssh_argv(info, address, probe), capture_output=True).returncode == 0


def wait_all_running(info: dict, addresses: list[str], started: float, timeout_s: float = 300) -> float:
    pending = set(addresses)
    while pending and time.monotonic() - started < timeout_s:
        with ThreadPoolExecutor(len(pending)) as pool:
            done = [a for a, ok in zip(list(pending), pool.map(lambda a: training_running(info, a), list(pending))) if ok]
        pending -= set(done)
    if pending:
        raise SystemExit(f"training never started on {sorted(pending)}")
    return time.monotonic() - started


def remove_containers(info: dict, addresses: list[str]) -> None:
    command = "docker ps -aq --filter label=clusterval.run_id | xargs -r docker rm -f"
    with ThreadPoolExecutor(len(addresses)) as pool:
        list(pool.map(lambda a: subprocess.run(ssh_argv(info, a, command), capture_output=True), addresses))


def playbook_launch(info: dict, inventory: str, hosts: list[str], run_dir: str) -> tuple[float, dict]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, "playbooks/train.yml",
            "-e", f"training_config={CONFIG}", "-e", json.dumps({"training_hosts": ":".join(hosts),
                                                                "training_run_dir": run_dir})]
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    addresses = [info["hosts"][h]["address"] for h in hosts]
    elapsed = wait_all_running(info, addresses, started)
    proc.wait(timeout=600)
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    return elapsed, plan, verdict_delay(info, plan, Path(run_dir))


def verdict_delay(info: dict, plan: dict, run_dir: Path) -> float:
    """Seconds from the last line any node wrote to its training log until results.json was written."""
    def log_mtime(host: str) -> float:
        node = node_view(plan, host)
        out = subprocess.run(ssh_argv(info, node["address"], "stat -c %.9Y " + shlex.quote(node["log_path"])),
                             capture_output=True, text=True, check=True).stdout
        return float(out.strip())

    with ThreadPoolExecutor(len(plan["nodes"])) as pool:
        last_line = max(pool.map(log_mtime, plan["nodes"]))
    return (run_dir / "results.json").stat().st_mtime - last_line


def baseline_launch(info: dict, plan: dict) -> float:
    """The same containers and launch script, started with ssh + docker run in parallel."""
    def start(host: str) -> None:
        node = node_view(plan, host)
        spec = node["container"]
        args = ["docker", "run", "-d", "--name", spec["name"] + "-baseline", "--network", "host", "--ipc", "host"]
        for device in spec["devices"]:
            args += ["--device", device]
        for volume in spec["volumes"]:
            args += ["-v", volume]
        for key, value in {**spec["env"], **{"clusterval.run_id": "baseline"}}.items():
            args += ["-e", f"{key}={value}"] if key != "clusterval.run_id" else ["--label", f"{key}={value}"]
        args += ["--workdir", node["launch"]["workdir"], spec["image"], *node["launch"]["argv"]]
        subprocess.run(ssh_argv(info, node["address"], shlex.join(args)), capture_output=True, check=True)

    started = time.monotonic()
    with ThreadPoolExecutor(len(plan["nodes"])) as pool:
        list(pool.map(start, plan["nodes"]))
    return wait_all_running(info, [node["address"] for node in plan["nodes"].values()], started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=str(REPO / "inventories" / "simulated" / "hosts.yml"))
    parser.add_argument("--nodes", type=int, default=4)
    options = parser.parse_args()
    info = cluster_info()
    hosts = sorted(info["hosts"], key=lambda name: int(name[4:]))[: options.nodes]
    addresses = [info["hosts"][h]["address"] for h in hosts]
    with tempfile.TemporaryDirectory() as tmp:
        playbook_s, plan, verdict_s = playbook_launch(info, options.inventory, hosts, os.path.join(tmp, "run"))
        remove_containers(info, addresses)
        baseline_s = baseline_launch(info, plan)
        remove_containers(info, addresses)
    print(f"nodes: {len(hosts)}")
    print(f"ansible-playbook start -> all training processes running: {playbook_s:.1f} s")
    print(f"baseline parallel ssh + docker run -> all running:        {baseline_s:.1f} s")
    print(f"ratio: {playbook_s / baseline_s:.2f}x (target <= 1.5x)")
    print(f"verdict written {verdict_s:.1f} s after the last node's last log line "
          f"(target: poll interval + 5 s)")


if __name__ == "__main__":
    main()
