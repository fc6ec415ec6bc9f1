"""The simulated pretrain_gpt.py parses its command line with upstream Megatron-LM's parser as data
(simulator/standin/megatron_lm_arguments.json, the fixture of core_v0.19.0): what the plan renders for a seed
config on NVIDIA nodes trains; what upstream's parser or validate_args refuses, it refuses the same way."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

from conftest import STANDIN

REPO = STANDIN.parents[1]
SEED = REPO / "configs" / "megatron" / "mi3xx_megatron_llama_distributed.json"
CX7 = {"config": {"nic_type": "cx7", "nccl_ib_hca_list": "mlx5_0", "nccl_socket_ifname": "ens1",
                  "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3", "training_iterations": "5"}}


def seed_argv() -> list[str]:
    plan = plan_run(load_config_file(str(SEED)), [Host("n1", "10.0.0.1", "nvidia")],
                    PlanOptions(config_path=str(SEED), model="llama3_1_8b", gpu_arch="mi300x", mode="multi_node",
                                run_id="r1", overrides=CX7, container_image="nvcr.io/nvidia/pytorch:25.09-py3"))
    words = shlex.split(plan["nodes"]["n1"]["launch"]["command"])
    return words[words.index("pretrain_gpt.py") + 1:]


def pretrain(standin, argv: list[str]) -> subprocess.CompletedProcess:
    command = ["torchrun", "--nproc_per_node", "8", "--nnodes", "1", "--node_rank", "0", "--master_addr",
               "127.0.0.1", "--master_port", str(standin.free_port()), "pretrain_gpt.py", *argv]
    return subprocess.run([sys.executable, str(STANDIN / "megatron_args_train.py"), *command],
                          env=standin.env({"CLUSTERVAL_SIM_GPUS": "8"}), capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_standins_parser_is_the_upstream_fixture():
    with open(STANDIN / "megatron_lm_arguments.json", encoding="utf-8") as standin, \
            open(REPO / "tests" / "fixtures" / "megatron-lm" / "core_v0.19.0.json", encoding="utf-8") as fixture:
        assert json.load(standin) == json.load(fixture)


def test_a_seed_config_planned_for_nvidia_trains_on_the_standin(standin):
    proc = pretrain(standin, seed_argv())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  num_layers ...................................... 32" in proc.stdout
    assert "  fp8 ............................................. hybrid" in proc.stdout
    assert "throughput per GPU (TFLOP/s/GPU)" in proc.stdout


@pytest.mark.parametrize("extra,said", [
    (["--train-llama3"], "pretrain_gpt.py: error: unrecognized arguments: --train-llama3"),
    (["--fp8-format", "e5m2"], "pretrain_gpt.py: error: argument --fp8-format: invalid choice: 'e5m2' "
                               "(choose from 'e4m3', 'hybrid')"),
    (["--num-layers", "thirty"], "pretrain_gpt.py: error: argument --num-layers: invalid int value: 'thirty'"),
    (["--tokenizer-model"], "pretrain_gpt.py: error: argument --tokenizer-model: expected one argument"),
])
def test_what_upstreams_parser_refuses_the_standin_refuses(standin, extra, said):
    proc = pretrain(standin, seed_argv() + extra)
    assert proc.returncode == 2 and said in proc.stdout + proc.stderr


def test_fsdp_beside_the_distributed_optimizer_fails_as_upstreams_validate_args_does(standin):
    proc = pretrain(standin, seed_argv() + ["--use-torch-fsdp2"])
    assert proc.returncode == 1
    assert "AssertionError: --use-torch-fsdp2 is not supported with MCore's distributed optimizer" in proc.stdout
