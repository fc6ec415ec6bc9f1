"""Fixtures for tests that need the simulated cluster (scripts/simcluster).

``simcluster`` (session scope) brings up CLUSTERVAL_SIMCLUSTER_NODES nodes
(default 3) once per test session and removes them at the end, unless
CLUSTERVAL_SIMCLUSTER_KEEP=1.  Under pytest-xdist (`-n 2`) each worker has a cluster of its own: its own prefix
and subnet (the given ones, numbered by the worker), so that the two never meet.  It skips, with the reason, on a machine where
the cluster cannot run (not root, no network namespaces, no Docker engine),
and fails there when CLUSTERVAL_REQUIRE_CLUSTER=1 (`make test` sets it).
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
SIMCLUSTER = REPO / "scripts" / "simcluster"


def pytest_configure(config):  # pylint: disable=unused-argument
    """A pytest-xdist worker (gw0, gw1, ...) brings up its own cluster: the prefix gets the worker's number and the
    subnet moves up by it (10.213.0.0/24: gw0 10.213.1.0/24, gw1 10.213.2.0/24)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    number = int(worker[2:])
    prefix = os.environ.get("CLUSTERVAL_SIMCLUSTER_PREFIX", "cvsim")
    subnet = ipaddress.IPv4Network(os.environ.get("CLUSTERVAL_SIMCLUSTER_SUBNET", "10.213.0.0/24"))
    moved = ipaddress.IPv4Network((int(subnet.network_address) + (number + 1) * subnet.num_addresses,
                                   subnet.prefixlen))
    os.environ.update(CLUSTERVAL_SIMCLUSTER_PREFIX=f"{prefix}{number}", CLUSTERVAL_SIMCLUSTER_SUBNET=str(moved))


@dataclass
class SimCluster:
    inventory: Path
    nodes: list[str]
    addresses: dict[str, str]
    shared_dir: Path
    device_dir: Path
    state_dir: Path
    ifname: str
    image: str
    ssh_key: Path
    known_hosts: Path
    user: str = "clusterval"
    data_roots: dict[str, str] = field(default_factory=dict)

    def run(self, node: str, argv: Sequence[str], check: bool = True, timeout: float = 120,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run argv inside the node's network and mount namespaces (as its sshd and dockerd see the world)."""
        proc = subprocess.run([str(SIMCLUSTER), "exec", node, "--", *argv], capture_output=True, text=True,
                              timeout=timeout, input=input, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{node}: {' '.join(argv)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def ssh(self, node: str, command: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a shell command on the node over real SSH as the inventory's user (not root: `sudo` where root is
        needed), with the inventory's key and known_hosts."""
        argv = ["ssh", "-i", str(self.ssh_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                f"{self.user}@{self.addresses[node]}", command]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {node}: {command} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def docker(self, node: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.run(node, ["docker", *args], check=check, timeout=timeout)

    def device_args(self) -> list[str]:
        """--device options giving a container the node's fake GPU and RDMA devices."""
        return ["--device", f"{self.device_dir}/kfd:/dev/kfd", "--device", f"{self.device_dir}/dri:/dev/dri",
                "--device", f"{self.device_dir}/infiniband/rdma_cm:/dev/infiniband/rdma_cm"]

    def unique_name(self, stem: str) -> str:
        return f"{stem}-{uuid.uuid4().hex[:8]}"


def cannot_run_reason() -> str | None:
    if os.geteuid() != 0:
        return "the simulated cluster needs root (network and mount namespaces, a bridge, daemons)"
    if not Path("/proc/self/ns/net").exists():
        return "this kernel has no network namespaces"
    for tool in ("ip", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (scripts/setup.sh installs it)"
    for tool in ("dockerd", "sshd"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is missing: install docker.io and openssh-server (scripts/setup.sh)"
    # Named per process: test sessions running side by side must not trip over each other's probe.
    name = f"cvsim-probe-{os.getpid()}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"cannot create network namespaces here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
    return None


def bring_up(count: int) -> SimCluster:
    proc = subprocess.run([str(SIMCLUSTER), "up", "--nodes", str(count)], capture_output=True, text=True,
                          timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"simcluster up failed:\n{proc.stderr}")
    status = subprocess.run([str(SIMCLUSTER), "status", "--json"], capture_output=True, text=True, check=True)
    info = json.loads(status.stdout)
    hosts = info["hosts"]
    return SimCluster(
        inventory=Path(proc.stdout.strip().splitlines()[-1]),
        nodes=sorted(hosts, key=lambda name: int(name[4:])),
        addresses={name: host["address"] for name, host in hosts.items()},
        shared_dir=Path(info["shared_dir"]),
        device_dir=Path(info["device_dir"]),
        state_dir=Path(info["state_dir"]),
        ifname=info["ifname"],
        image=info["image"],
        ssh_key=Path(info["ssh_key"]),
        known_hosts=Path(info["known_hosts"]),
        user=info["user"],
        data_roots={name: host["data_root"] for name, host in hosts.items()},
    )


@pytest.fixture(scope="session")
def simcluster_supported() -> None:
    """Skips, with the reason, where the simulated cluster cannot run (fails instead under `make test`)."""
    reason = cannot_run_reason()
    if reason and os.environ.get("CLUSTERVAL_REQUIRE_CLUSTER") == "1":
        pytest.fail(reason)
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def simcluster(simcluster_supported):
    cluster = bring_up(int(os.environ.get("CLUSTERVAL_SIMCLUSTER_NODES", "3")))
    try:
        yield cluster
    finally:
        if os.environ.get("CLUSTERVAL_SIMCLUSTER_KEEP") != "1":
            subprocess.run([str(SIMCLUSTER), "down"], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def four_nodes(simcluster) -> list[str]:
    """The first 4 nodes, for tests that isolate one node among several (CLUSTERVAL_SIMCLUSTER_NODES=4)."""
    if len(simcluster.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    return simcluster.nodes[:4]


@pytest.fixture()
def access(simcluster):
    """Changes what the nodes' user may do (`scripts/simcluster access NODE --no-sudo`...) for one test, and gives
    it back after: call it with the node and the options."""
    changed = []

    def change(node: str, *options: str) -> None:
        changed.append(node)
        subprocess.run([str(SIMCLUSTER), "access", node, *options], check=True, capture_output=True, timeout=60)
    yield change
    for node in changed:
        subprocess.run([str(SIMCLUSTER), "access", node, "--sudo", "--docker-group"], check=True,
                       capture_output=True, timeout=60)


@pytest.fixture()
def nvidia_nodes(simcluster) -> list[str]:
    """The last two nodes made NVIDIA-like for the test (`scripts/simcluster vendor nvidia`), AMD-like after."""
    nodes = simcluster.nodes[-2:]
    subprocess.run([str(SIMCLUSTER), "vendor", "nvidia", *nodes], check=True, capture_output=True, timeout=60)
    try:
        yield nodes
    finally:
        subprocess.run([str(SIMCLUSTER), "vendor", "amd", *nodes], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def ee_image(simcluster_supported):
    """The execution environment (scripts/ee) built (cached) once; every run of the session reuses its layers."""
    proc = subprocess.run([str(REPO / "scripts" / "ee"), "build"], capture_output=True, text=True, timeout=1800,
                          check=False)
    if proc.returncode != 0:
        pytest.fail(f"scripts/ee build failed:\n{proc.stderr[-3000:]}")
    os.environ["CLUSTERVAL_EE_LAYERS"] = ":".join(proc.stdout.split())
    yield proc.stdout.split()
    os.environ.pop("CLUSTERVAL_EE_LAYERS", None)


@pytest.fixture(scope="session", autouse=True)
def ee_controller(request):
    """CLUSTERVAL_CONTROLLER=ee or ee:2.X (tests/integration/controller.py): the image, built before any test."""
    if os.environ.get("CLUSTERVAL_CONTROLLER", "venv").startswith("ee"):
        request.getfixturevalue("ee_image")
