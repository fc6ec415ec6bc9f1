"""Seed 003's NxDT YAML through playbooks/train.yml on Trainium-like simulated nodes (scripts/simcluster vendor
trainium): real ansible-playbook, SSH and Docker; the NxDT stand-in under torchrun rendezvousing across nodes."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import SIMCLUSTER
from test_train_e2e import assert_no_training_container, results, run_train, sim_env, watch_file

pytestmark = pytest.mark.cluster

SEED003 = "tests/fixtures/nxdt/seed003_nxdt.yaml"


@pytest.fixture(scope="module")
def trainium_nodes(simcluster) -> list[str]:
    """The first two nodes made Trainium-like for the module, AMD-like after."""
    nodes = simcluster.nodes[:2]
    subprocess.run([str(SIMCLUSTER), "vendor", "trainium", *nodes], check=True, capture_output=True, timeout=60)
    try:
        yield nodes
    finally:
        subprocess.run([str(SIMCLUSTER), "vendor", "amd", *nodes], check=True, capture_output=True, timeout=60)


def neuron_devices(cluster) -> dict:
    """The containers' Neuron and EFA devices: the cluster's fake device nodes at the real paths."""
    devices = [f"{cluster.device_dir}/neuron{index}:/dev/neuron{index}" for index in range(16)]
    devices.append(f"{cluster.device_dir}/infiniband/uverbs0:/dev/infiniband/uverbs0")
    return {"config": {"container_config": {"device_list": devices}}}


def run_nxdt(cluster, nodes, tmp_path, **knobs):
    extra = {**neuron_devices(cluster)}
    extra["config"]["container_config"].update(sim_env(**knobs)["config"]["container_config"])
    return run_train(cluster, SEED003, tmp_path, nodes, extra=extra, more_vars={"train_hang_timeout": 8})


def node_log(run_dir: Path, node: str) -> str:
    return (run_dir / "logs" / node / "training.log").read_bytes().decode()


def test_seed003_on_two_trainium_nodes_passes(simcluster, trainium_nodes, tmp_path):
    proc = run_nxdt(simcluster, trainium_nodes, tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert results(tmp_path)["verdict"] == "PASS"
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert (plan["framework"], plan["gpu_vendor"]) == ("nxdt", "trainium")
    first, second = (node_log(tmp_path, node) for node in trainium_nodes)
    # global rank 0 prints the bar: one update per step after a carriage return, one newline at the end
    assert first.count("\rEpoch 0: ") == 12 and "| 12/12 [" in first and "global_step=11.000" in first
    assert "Epoch 0" not in second and "||NEURON_CACHE||: Compile cache path:" in second
    assert_no_training_container(simcluster, trainium_nodes)


def test_a_crash_on_one_node_is_named(simcluster, trainium_nodes, tmp_path):
    proc = run_nxdt(simcluster, trainium_nodes, tmp_path, CRASH_AT_STEP="5", CRASH_RANK="1")
    assert proc.returncode != 0
    culprit = json.loads(watch_file(tmp_path, "outcome.json").read_text())["culprit"]
    assert culprit["host"] == trainium_nodes[1], culprit
    assert "SIGSEGV" in culprit["text"] or "exitcode" in culprit["text"] or "ChildFailedError" in culprit["text"]
    assert f"VERDICT: FAIL: {trainium_nodes[1]} " in proc.stdout
    assert_no_training_container(simcluster, trainium_nodes)


def test_the_bar_is_followed_before_it_ends(simcluster, trainium_nodes, tmp_path):
    """Every rank hangs at step 8: the bar never gets its newline, and the watch saw the steps before, read
    from the carriage-return updates alone."""
    proc = run_nxdt(simcluster, trainium_nodes, tmp_path, HANG_AT_STEP="8")
    assert proc.returncode != 0
    first = node_log(tmp_path, trainium_nodes[0])
    assert "| 8/12 [" in first and not first.rstrip(" ").endswith("\n")
    progress = json.loads(watch_file(tmp_path, "progress.json").read_text())["progress"]
    assert progress["step"]["max"] == 6, progress  # step 7's update waits for the next one (it may be partial)
    assert_no_training_container(simcluster, trainium_nodes)
