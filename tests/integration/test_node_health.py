"""Node health in preflight on the simulated cluster: each simulated fault named with its node and evidence.

The faults are the simulated cluster's (scripts/simcluster: <state>/nodes/<node>/sim, seen on the node as
/run/clusterval-sim): one GPU fewer in the amd-smi stand-in, a real amdgpu error line in the kernel-log
stand-in, an RDMA port Down in the sysfs-like port files; and a real one, the node's log directory on a
tiny tmpfs.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from test_train_e2e import JAX_MULTI, assert_no_training_container, run_train

pytestmark = pytest.mark.cluster

# A real amdgpu line (tests/fixtures/real-logs/node_health_real.txt, KL-01).
AMDGPU_ERROR = "[127035.492304] amdgpu 0000:c5:00.0: amdgpu: GPU reset begin!"
LOG_DIR = "/tmp/clusterval-logs"  # the simulated inventory's config.log_dir


def sim_dir(cluster, node: str) -> Path:
    return cluster.state_dir / "nodes" / node / "sim"


@contextlib.contextmanager
def changed(path: Path, text: str):
    before = path.read_text()
    path.write_text(text)
    try:
        yield
    finally:
        path.write_text(before)


@contextlib.contextmanager
def tiny_log_disk(cluster, node: str):
    cluster.run(node, ["mkdir", "-p", LOG_DIR])
    cluster.run(node, ["mount", "-t", "tmpfs", "-o", "size=256k", "cvfull", LOG_DIR])
    try:
        yield
    finally:
        cluster.run(node, ["umount", LOG_DIR], check=False)


def test_each_node_fault_is_named_with_its_node_and_evidence(simcluster, four_nodes, tmp_path):
    disk, gpus, kernel, rdma = four_nodes
    gpu_file = sim_dir(simcluster, gpus) / "gpus.json"
    kernel_log = sim_dir(simcluster, kernel) / "kernel.log"
    state = sim_dir(simcluster, rdma) / "sys" / "class" / "infiniband" / "bnxt_re1" / "ports" / "1" / "state"
    with changed(gpu_file, json.dumps({"model": "AMD Instinct MI300X", "count": 7})), \
            changed(kernel_log, kernel_log.read_text() + AMDGPU_ERROR + "\n"), \
            changed(state, "1: DOWN\n"), tiny_log_disk(simcluster, disk):
        proc = run_train(simcluster, JAX_MULTI, tmp_path / "run", four_nodes, more_vars={"preflight_gpu_tools": [
            {"path": "/run/clusterval-sim/bin/amd-smi", "args": ["static", "--asic"]}]})
    out = proc.stdout
    assert proc.returncode != 0
    assert (f"{gpus} preflight FAIL gpu_count: /run/clusterval-sim/bin/amd-smi lists 7 GPUs (AMD Instinct MI300X), "
            "the plan needs 8") in out
    assert f"{disk} preflight OK   gpu_count: /run/clusterval-sim/bin/amd-smi lists 8 GPUs" in out
    assert (f"{kernel} preflight FAIL gpu_errors: 1 GPU error line in the kernel log since boot "
            f"(/run/clusterval-sim/bin/dmesg): {AMDGPU_ERROR}") in out
    assert f"{rdma} preflight OK   gpu_errors: no GPU error in the kernel log since boot" in out
    assert (f"{rdma} preflight FAIL rdma_ports: bnxt_re1 port 1 state '1: DOWN' "
            "(/run/clusterval-sim/sys/class/infiniband/bnxt_re1/ports/1/state), expected ACTIVE") in out
    assert f"{gpus} preflight OK   rdma_ports: ACTIVE: bnxt_re0 port 1 400 Gb/sec (4X NDR), bnxt_re1 port 1" in out
    assert f"{disk} preflight FAIL disk: 0 MiB free on {LOG_DIR}/clusterval (need 1089: the expected log 65 MiB" in out
    assert "the run's logs would fill the disk (ENOSPC) on this node" in out
    for node, check in ((disk, "disk"), (gpus, "gpu_count"), (kernel, "gpu_errors"), (rdma, "rdma_ports")):
        assert f"preflight failed on {node}: {check}" in out
    assert "Container | Start or replace the training container" not in out
    assert_no_training_container(simcluster, four_nodes)
