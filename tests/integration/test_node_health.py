"""Node health in preflight on the simulated cluster: each simulated fault named with its node and evidence.

The faults are the simulated cluster's (scripts/simcluster: <state>/nodes/<node>/sim, seen on the node as
/run/clusterval-sim): one GPU fewer in the amd-smi stand-in (/opt/rocm/bin/amd-smi on the node), real amdgpu and
NVRM lines in the kernel log (read by the node's dmesg, as root only), an RDMA port Down in the sysfs-like port
files; and real ones: the node's log directory on a tiny tmpfs, the GPU tools' directory hidden. Preflight runs
with the collection's defaults, as the nodes' user (not root).
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from test_train_e2e import (JAX_MULTI, MEGATRON_ARGS, MEGATRON_MULTI, assert_no_training_container, results,
                            run_train)

pytestmark = pytest.mark.cluster

# amdgpu's messages as the driver prints them (drivers/gpu/drm/amd/amdgpu/amdgpu_device.c; a ring timeout of
# tests/fixtures/real-logs/node_health_real.txt, KL-01): a failed GPU reset fails the node, a ring timeout the
# driver recovers from is reported.
AMDGPU_ERROR = "[127037.563001] amdgpu 0000:c5:00.0: amdgpu: GPU reset(2) failed"
AMDGPU_TIMEOUT = ("[127033.279661] amdgpu 0000:c5:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=2662395, "
                  "emitted seq=2662397")
# NVIDIA's XID lines (KL-02's format): 79 is critical, 43 an application's fault.
XID_CRITICAL = "[ 5012.803144] NVRM: Xid (PCI:0000:18:00): 79, pid=2231, name=python3, GPU has fallen off the bus."
XID_APPLICATION = "[ 4120.311871] NVRM: Xid (PCI:0000:2a:00): 43, pid=1045242, name=pt_main_thread, Ch 00000008"
DMESG = "(dmesg, as root)"
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
    cluster.ssh(node, f"mkdir -p {LOG_DIR}")  # the user's, as a run would make it
    cluster.run(node, ["mount", "-t", "tmpfs", "-o", "size=256k", "cvfull", LOG_DIR])
    try:
        yield
    finally:
        cluster.run(node, ["umount", LOG_DIR], check=False)


def appended(cluster, node: str, line: str):
    kernel_log = sim_dir(cluster, node) / "kernel.log"
    return changed(kernel_log, kernel_log.read_text() + line + "\n")


def run_with_kernel_lines(cluster, lines: dict[str, str], config: str, run_dir: Path, nodes: list[str],
                          args: list[str] | None = None):
    """A run whose nodes have these lines (node -> line) in their kernel logs meanwhile."""
    with contextlib.ExitStack() as stack:
        for node, line in lines.items():
            stack.enter_context(appended(cluster, node, line))
        return run_train(cluster, config, run_dir, nodes, args=args)


def assert_failed_and_reported(out: str, failed: str, failure: str, reported: str, report: str) -> None:
    """`failed`'s line names its critical kernel log line; `reported`'s passes, reporting its line."""
    assert (f"{failed} preflight FAIL gpu_errors: 1 critical GPU error in the kernel log since boot {DMESG}: "
            f"{failure}") in out
    assert (f"{reported} preflight OK   gpu_errors: no critical GPU error in the kernel log since boot {DMESG}; "
            f"reported, not failed: {report}") in out


@contextlib.contextmanager
def no_gpu_tools(cluster, node: str):
    """The node's /opt/rocm hidden: its GPU tools are nowhere preflight looks."""
    cluster.run(node, ["mount", "-t", "tmpfs", "-o", "size=64k", "cvnotools", "/opt/rocm"])
    try:
        yield
    finally:
        cluster.run(node, ["umount", "/opt/rocm"], check=False)


def test_each_node_fault_is_named_with_its_node_and_evidence(simcluster, four_nodes, tmp_path):
    disk, gpus, kernel, rdma = four_nodes
    gpu_file = sim_dir(simcluster, gpus) / "gpus.json"
    state = sim_dir(simcluster, rdma) / "sys" / "class" / "infiniband" / "bnxt_re1" / "ports" / "1" / "state"
    with changed(gpu_file, json.dumps({"model": "AMD Instinct MI300X", "count": 7})), \
            appended(simcluster, kernel, AMDGPU_ERROR), changed(state, "1: DOWN\n"), tiny_log_disk(simcluster, disk):
        proc = run_train(simcluster, JAX_MULTI, tmp_path / "run", four_nodes)
    out = proc.stdout
    assert proc.returncode != 0
    assert (f"{gpus} preflight FAIL gpu_count: /opt/rocm/bin/amd-smi lists 7 GPUs (AMD Instinct MI300X), "
            "the plan needs 8") in out
    assert f"{disk} preflight OK   gpu_count: /opt/rocm/bin/amd-smi lists 8 GPUs" in out
    assert (f"{kernel} preflight FAIL gpu_errors: 1 critical GPU error in the kernel log since boot {DMESG}: "
            f"GPU reset failed: {AMDGPU_ERROR}") in out
    assert f"{rdma} preflight OK   gpu_errors: no GPU error in the kernel log since boot {DMESG}" in out
    assert (f"{rdma} preflight FAIL rdma_ports: bnxt_re1 port 1 state '1: DOWN' "
            "(/run/clusterval-sim/sys/class/infiniband/bnxt_re1/ports/1/state), expected ACTIVE") in out
    assert f"{gpus} preflight OK   rdma_ports: ACTIVE: bnxt_re0 port 1 400 Gb/sec (4X NDR), bnxt_re1 port 1" in out
    assert f"{disk} preflight FAIL disk: 0 MiB free on {LOG_DIR}/clusterval (need 1089: the expected log 65 MiB" in out
    assert "the run's logs would fill the disk (ENOSPC) on this node" in out
    for node, check in ((disk, "disk"), (gpus, "gpu_count"), (kernel, "gpu_errors"), (rdma, "rdma_ports")):
        assert f"preflight failed on {node}: {check}" in out
    assert "Container | Start or replace the training container" not in out
    assert_no_training_container(simcluster, four_nodes)


def test_an_amdgpu_error_on_one_node_of_four_names_that_node_and_a_recovered_hang_is_reported(
        simcluster, four_nodes, tmp_path):
    broken, hung = four_nodes[2], four_nodes[0]
    proc = run_with_kernel_lines(simcluster, {broken: AMDGPU_ERROR, hung: AMDGPU_TIMEOUT}, JAX_MULTI,
                                 tmp_path / "run", four_nodes)
    out = proc.stdout
    assert proc.returncode != 0
    assert_failed_and_reported(out, broken, f"GPU reset failed: {AMDGPU_ERROR}",
                               hung, f"ring timeout: a job hung the GPU: {AMDGPU_TIMEOUT}")
    for node in four_nodes:
        if node not in (broken, hung):
            assert f"{node} preflight OK   gpu_errors: no GPU error in the kernel log since boot {DMESG}" in out
        assert (f"preflight failed on {node}:" in out) is (node == broken)
    assert_no_training_container(simcluster, four_nodes)


def test_a_critical_xid_fails_its_node_and_an_application_xid_is_reported(simcluster, nvidia_nodes, tmp_path):
    critical, application = nvidia_nodes
    proc = run_with_kernel_lines(simcluster, {critical: XID_CRITICAL, application: XID_APPLICATION}, MEGATRON_MULTI,
                                 tmp_path / "run", nvidia_nodes, MEGATRON_ARGS)
    out = proc.stdout
    assert proc.returncode != 0
    assert_failed_and_reported(out, critical, f"XID 79 (GPU has fallen off the bus): {XID_CRITICAL}", application,
                               f"XID 43 (GPU stopped processing: an application's fault): {XID_APPLICATION}")
    assert f"preflight failed on {critical}: gpu_errors" in out and f"preflight failed on {application}" not in out
    assert_no_training_container(simcluster, nvidia_nodes)


def test_an_application_xid_alone_lets_the_run_pass(simcluster, nvidia_nodes, tmp_path):
    proc = run_with_kernel_lines(simcluster, {nvidia_nodes[0]: XID_APPLICATION}, MEGATRON_MULTI, tmp_path / "run",
                                 nvidia_nodes, MEGATRON_ARGS)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert results(tmp_path / "run")["verdict"] == "PASS"


def test_a_node_without_gpu_tools_fails_the_gpu_count_naming_the_paths_tried(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    with no_gpu_tools(simcluster, nodes[1]):
        proc = run_train(simcluster, JAX_MULTI, tmp_path / "run", nodes)
    assert proc.returncode != 0
    assert (f"{nodes[1]} preflight FAIL gpu_count: no GPU tool found, so the plan's 8 GPUs cannot be counted: tried "
            "/opt/rocm/bin/amd-smi, /usr/bin/amd-smi, /opt/rocm/bin/rocm-smi, /opt/rocm/bin/rocminfo, "
            "/usr/bin/nvidia-smi, /opt/aws/neuron/bin/neuron-ls, /usr/local/bin/tpu-info, /usr/bin/tpu-info "
            "(preflight_gpu_tools names the node's tools") in proc.stdout
    assert f"{nodes[0]} preflight OK   gpu_count: /opt/rocm/bin/amd-smi lists 8 GPUs" in proc.stdout
    assert f"preflight failed on {nodes[1]}: gpu_count" in proc.stdout
    assert_no_training_container(simcluster, nodes)
