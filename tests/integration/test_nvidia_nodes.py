"""NVIDIA nodes on the simulated cluster: the seed Megatron-LM config on two NVIDIA-like nodes (`scripts/simcluster
vendor nvidia`: simulated H100s, the simulated NVIDIA Container Toolkit hook on dockerd's PATH, nvidia-smi
stand-ins) runs upstream Megatron-LM's pretrain_gpt.py under torchrun (the stand-in parses its arguments as
upstream's parser does), whose containers get their GPUs through Docker's device request; AMD nodes keep
/dev/kfd and ROCm's example script."""
from __future__ import annotations

import json
import threading
import time

import pytest

from test_train_e2e import MEGATRON_ARGS, MEGATRON_MULTI, assert_no_training_container, results, run_train, sim_env

pytestmark = pytest.mark.cluster


class ContainerWatch(threading.Thread):
    """While a run goes on, `docker inspect` of a node's training container and what it sees of its GPUs."""

    def __init__(self, cluster, node: str, deadline_s: float = 150):
        super().__init__(daemon=True)
        self.cluster, self.node, self.deadline = cluster, node, time.monotonic() + deadline_s
        self.inspect: dict | None = None
        self.inside = ""
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.deadline and self.inspect is None:
            ids = self.cluster.docker(self.node, "ps", "-q", "--filter", "label=clusterval.run_id", check=False)
            for container in ids.stdout.split():
                found = self.cluster.docker(self.node, "inspect", container, check=False)
                seen = self.cluster.docker(self.node, "exec", container, "sh", "-c",
                                           "ls /dev/nvidia* 2>&1; nvidia-smi -L 2>&1", check=False)
                if found.returncode == 0:
                    self.inspect, self.inside = json.loads(found.stdout)[0], seen.stdout
            time.sleep(0.2)


def watched_run(cluster, node, *args, **kwargs):
    watch = ContainerWatch(cluster, node)
    watch.start()
    try:
        proc = run_train(cluster, *args, **kwargs)
    finally:
        watch.stop.set()
        watch.join(timeout=10)
    return proc, watch


def test_megatron_seed_on_nvidia_nodes_runs_upstream_pretrain_gpt_with_its_gpus_through_a_device_request(
        simcluster, nvidia_nodes, tmp_path):
    # slow enough steps for the watch to catch the container while it runs; no training_gpu_arch: the nodes' H100s
    # are detected and run the seed's mi300x entry (its mi325 entry is the same)
    proc, watch = watched_run(simcluster, nvidia_nodes[-1], MEGATRON_MULTI, tmp_path, nvidia_nodes,
                              extra=sim_env(STEP_SECONDS="0.5"), args=["-e", "training_model=llama3_1_8b"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert results(tmp_path)["verdict"] == "PASS"
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert (plan["gpu_vendor"], plan["gpu_vendor_source"]) == ("nvidia", "the inventory's training_gpu_vendor")
    assert (plan["gpu_arch"], plan["gpu_arch_detected"]["arch"]) == ("mi300x", "h100")
    # upstream Megatron-LM's launch, its arguments read by the stand-in as upstream's parser reads them
    launch = plan["node_shared"]["launch"]["command"] if "node_shared" in plan else \
        plan["nodes"][nvidia_nodes[0]]["launch"]["command"]
    assert launch.startswith("torchrun --nproc_per_node 8 ") and " pretrain_gpt.py " in launch
    first_log = (tmp_path / "logs" / nvidia_nodes[0] / "training.log").read_text()
    assert "  fp8 ............................................. hybrid" in first_log
    assert "  num_layers ...................................... 32" in first_log
    assert "iteration" in (tmp_path / "logs" / nvidia_nodes[-1] / "training.log").read_text()
    # preflight read the simulated nvidia-smi at its real path: vendor, count, model, driver and CUDA version
    assert "gpu_vendor: /usr/bin/nvidia-smi: nvidia GPUs" in proc.stdout
    assert "8 x NVIDIA H100 80GB HBM3 (h100), driver 550.90.07, CUDA 12.4" in proc.stdout
    assert watch.inspect is not None, "the training container was never seen running"
    host_config = watch.inspect["HostConfig"]
    requests = [{key: request[key] for key in ("Driver", "Count", "Capabilities")}
                for request in host_config["DeviceRequests"]]
    assert requests == [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]
    assert not [d for d in host_config["Devices"] or [] if d["PathInContainer"] in ("/dev/kfd", "/dev/dri")]
    # the (simulated) toolkit hook gave the container its GPUs
    assert "/dev/nvidia7" in watch.inside and "GPU 0: NVIDIA H100 80GB HBM3" in watch.inside
    assert_no_training_container(simcluster, nvidia_nodes)


def test_amd_nodes_keep_kfd_and_no_device_request(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    proc, watch = watched_run(simcluster, nodes[-1], MEGATRON_MULTI, tmp_path, nodes,
                              extra=sim_env(STEP_SECONDS="0.5"), args=MEGATRON_ARGS)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert watch.inspect is not None, "the training container was never seen running"
    host_config = watch.inspect["HostConfig"]
    assert {d["PathInContainer"] for d in host_config["Devices"]} >= {"/dev/kfd", "/dev/dri"}
    assert not host_config.get("DeviceRequests")
    assert "No such file" in watch.inside and "NVIDIA-SMI has failed" not in watch.inside
    assert_no_training_container(simcluster, nodes)
