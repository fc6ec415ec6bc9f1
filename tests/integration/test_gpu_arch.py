"""The GPU arch detected from the nodes (playbooks/tasks/plan.yml through the real playbooks/plan.yml): a config
with two arch entries for the model (the seed Megatron-LM config's mi300x, plus an h100 entry with another micro
batch) planned on the simulated AMD nodes (amd-smi stand-in: MI300X) picks mi300x, on simulated NVIDIA nodes
(nvidia-smi stand-in: H100) h100; nodes of both are refused naming each arch's nodes; a given arch asks no node."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO
from test_train_e2e import ANSIBLE_PLAYBOOK

pytestmark = pytest.mark.cluster
CONFIG = "configs/megatron/mi3xx_megatron_llama_distributed.json"
MODEL = "llama3_1_8b"


def h100_entry() -> dict:
    with open(REPO / CONFIG, encoding="utf-8") as handle:
        entry = dict(json.load(handle)["model_params"]["multi_node"][MODEL]["mi300x"])
    entry["micro_batch_size"] = "4"
    return entry


def plan(cluster, hosts: list[str], *extra: str, config: str = CONFIG,
         entries: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """playbooks/plan.yml; `entries` are added to the config's model_params (default: an h100 entry)."""
    added = {"multi_node": {MODEL: {"h100": h100_entry()}}} if entries is None else entries
    variables = {"training_hosts": ":".join(hosts), "training_model": MODEL,
                 "training_overrides_extra": {"model_params": added}}
    argv = [ANSIBLE_PLAYBOOK, "-i", str(cluster.inventory), str(REPO / "playbooks" / "plan.yml"),
            "-e", f"training_config={config}", "-e", json.dumps(variables), *extra]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.stdout.startswith("{"), proc.stdout[-2000:] + proc.stderr[-2000:]
    tasks = {task["task"]["name"]: task["hosts"] for play in json.loads(proc.stdout)["plays"]
             for task in play["tasks"]}
    return proc, tasks


def the_plan(tasks: dict) -> dict:
    return next(iter(tasks["Plan the run"].values()))["plan"]


def test_the_plan_picks_the_config_entry_of_the_nodes_gpus(simcluster, nvidia_nodes):
    amd_nodes = [node for node in simcluster.nodes if node not in nvidia_nodes]

    proc, tasks = plan(simcluster, amd_nodes)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    asked = tasks["Plan | The nodes' GPUs (the config offers several archs)"]
    assert sorted(asked) == sorted(amd_nodes)
    assert {result["gpu"]["tool"] for result in asked.values()} == {"/opt/rocm/bin/amd-smi"}
    result = the_plan(tasks)
    assert (result["gpu_arch"], result["gpu_vendor"]) == ("mi300x", "amd")
    assert result["gpu_arch_source"].startswith("detected on node")
    assert "by amd-smi (8 x AMD Instinct MI300X (mi300x, gfx942))" in result["gpu_arch_source"]
    assert result["node_shared"]["container"]["env"]["MBS"] == "2"

    proc, tasks = plan(simcluster, nvidia_nodes)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = the_plan(tasks)
    assert (result["gpu_arch"], result["gpu_vendor"]) == ("h100", "nvidia")
    assert "by nvidia-smi (8 x NVIDIA H100 80GB HBM3 (h100), driver 550.90.07, CUDA 12.4)" in \
        result["gpu_arch_source"]
    # NVIDIA's image runs upstream Megatron-LM: the h100 entry's values as pretrain_gpt.py's arguments
    assert "pretrain_gpt.py" in result["node_shared"]["launch"]["command"]
    assert "--micro-batch-size 4" in result["node_shared"]["launch"]["command"]
    assert "device_requests" in result["node_shared"]["container"]

    # both vendors in one run: refused before the plan, naming each arch's nodes
    proc, tasks = plan(simcluster, simcluster.nodes)
    assert proc.returncode != 0
    failed = next(iter(tasks["Plan the run"].values()))
    assert failed["failed"] is True
    assert failed["problems"][0]["path"] == "model_params.multi_node.llama3_1_8b"
    assert failed["problems"][0]["found"].startswith("h100 on node")
    assert "; mi300x on node" in failed["problems"][0]["found"]

    # a given arch: no node is asked (the common path keeps its cost)
    proc, tasks = plan(simcluster, amd_nodes, "-e", "training_gpu_arch=mi300x")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Plan | The nodes' GPUs (the config offers several archs)" not in tasks
    assert the_plan(tasks)["gpu_arch_source"] == "training_gpu_arch"


def test_nvidia_nodes_run_the_seeds_amd_entries_when_they_agree_else_the_refusal_says_what_to_set(
        simcluster, nvidia_nodes):
    # the seed's mi300x and mi325 entries agree on every parameter: mi300x's run, their targets are not judged
    proc, tasks = plan(simcluster, nvidia_nodes, entries={})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = the_plan(tasks)
    assert (result["gpu_arch"], result["gpu_vendor"]) == ("mi300x", "nvidia")
    assert result["gpu_arch_detected"]["arch"] == "h100"
    assert result["gpu_arch_source"].endswith("; the config has no nvidia entry: mi300x's values run, which mi325's "
                                              "equal (its targets are amd GPUs', not judged)")
    assert "pretrain_gpt.py" in result["node_shared"]["launch"]["command"]

    # the mi35x seed's entries differ (fsdp, recompute): refused before any node is changed, with the fix
    proc, tasks = plan(simcluster, nvidia_nodes, config="configs/megatron/mi35x_megatron_llama_single.json",
                       entries={})
    assert proc.returncode != 0
    problem = next(iter(tasks["Plan the run"].values()))["problems"][0]
    assert problem["path"] == "model_params.single_node.llama3_1_8b"
    assert "which differ in fsdp, recompute" in problem["expected"]
    assert "-e training_gpu_arch=mi350: its values on the h100 nodes, its result_dict targets not judged" in \
        problem["expected"]
    assert problem["found"].startswith("h100 detected on node")
