#!/usr/bin/python3
"""Measures the simulated cluster: image build, bring-up, teardown, memory.  Prints figures.

    sudo simulator/benchmark.py [--nodes 4] [--cold]

--cold removes the cached simulator image first, so the build is measured too.
Leaves no cluster behind.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIMCLUSTER = str(REPO / "scripts" / "simcluster")


def timed(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, text=True)
    return time.monotonic() - started


def daemon_rss_mb(nodes: int) -> float:
    """Resident memory of everything running in the nodes' network namespaces (sshd, dockerd, containerd)."""
    total_kb = 0
    for index in range(1, nodes + 1):
        pids = subprocess.run(["ip", "netns", "pids", f"cvsim-node{index}"], capture_output=True, text=True,
                              check=False).stdout
        for pid in pids.split():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kb / 1024


def container_start_s(node: str, image: str) -> float:
    return timed([SIMCLUSTER, "exec", node, "--", "docker", "run", "--rm", "--network", "host", image, "true"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    subprocess.run([SIMCLUSTER, "down", *(["--purge"] if args.cold else [])], check=True, capture_output=True)
    up_s = timed([SIMCLUSTER, "up", "--nodes", str(args.nodes)])
    info = json.loads(subprocess.run([SIMCLUSTER, "status", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    again_s = timed([SIMCLUSTER, "up", "--nodes", str(args.nodes)])
    size = subprocess.run([SIMCLUSTER, "exec", "node1", "--", "docker", "image", "inspect", "-f", "{{.Size}}",
                           info["image"]], capture_output=True, text=True, check=True).stdout
    start_s = min(container_start_s("node1", info["image"]) for dummy in range(3))
    rss = daemon_rss_mb(args.nodes)
    down_s = timed([SIMCLUSTER, "down"])
    print(f"nodes: {args.nodes}")
    print(f"up ({'cold: image built' if args.cold else 'image cached'}): {up_s:.1f} s")
    print(f"up again (idempotent, nothing to do): {again_s:.2f} s")
    print(f"down: {down_s:.1f} s")
    print(f"image size: {int(size) / 1e6:.1f} MB")
    print(f"docker run --rm (container start+stop), best of 3: {start_s:.2f} s")
    print(f"daemons' memory (sshd, dockerd, containerd): {rss:.0f} MiB total, {rss / args.nodes:.0f} MiB per node")


if __name__ == "__main__":
    main()
