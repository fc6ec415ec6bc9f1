"""The stand-ins of the comparison's two launches (torchrun + pretrain_gpt.py, Primus's run_pretrain.sh), fed
what the collection renders from the comparison file, read back by the comparison's own parsers."""
from __future__ import annotations

import subprocess
import sys

import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _compare, _logs, _stack_megatron, _stack_primus

from conftest import STANDIN

REPO = STANDIN.parents[1]


def rendered(iterations=6, amd_overrides=None):
    with open(REPO / "configs" / "comparison" / "llama3_8b_nvidia_vs_amd.yml", encoding="utf-8") as handle:
        comparison = _compare.load(yaml.safe_load(handle))
    nvidia = _compare.side_arguments(comparison, "nvidia", iterations)
    amd = _compare.side_arguments(comparison, "amd", iterations, amd_overrides)
    return comparison, nvidia, amd


def run_nvidia(standin, arguments, gpus=8):
    argv = ["torchrun", "--nproc_per_node", str(gpus), "--nnodes", "1", "--node_rank", "0", "--master_addr",
            "127.0.0.1", "--master_port", str(standin.free_port()), "pretrain_gpt.py",
            *_stack_megatron.render_argv(arguments, "x")]
    return subprocess.run([sys.executable, str(STANDIN / "megatron_args_train.py"), *argv],
                          env=standin.env({"CLUSTERVAL_SIM_GPUS": str(gpus)}), capture_output=True, text=True,
                          timeout=60, check=False)


def run_amd(standin, arguments, gpus=8):
    exp = standin.tmp / "primus_experiment.yaml"
    exp.write_text(_stack_primus.render(_stack_primus.experiment("unit", "llama3.1_8B.yaml", arguments)))
    env = standin.env({"EXP": str(exp), "NNODES": "1", "NODE_RANK": "0", "GPUS_PER_NODE": str(gpus),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(standin.free_port()),
                       "CLUSTERVAL_SIM_GPUS": str(gpus)})
    return subprocess.run([sys.executable, str(STANDIN / "megatron_args_train.py"), "primus"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_both_sides_print_the_dump_and_lines_the_comparison_reads(standin):
    comparison, nvidia, amd = rendered()
    out = {"nvidia": run_nvidia(standin, nvidia), "amd": run_amd(standin, amd)}
    for proc in out.values():
        assert proc.returncode == 0, proc.stdout + proc.stderr
    dumps = {side: _compare.parse_dump(out[side].stdout) for side in out}
    assert dumps["nvidia"]["micro_batch_size"] == "2" and dumps["amd"]["lr"] == "0.0003"
    assert dumps["amd"]["enable_primus_turbo"] == "True" and "enable_primus_turbo" not in dumps["nvidia"]
    rows, mismatches = _compare.row_report(comparison, dumps)
    assert mismatches == []
    assert {r["parameter"]: r["status"] for r in rows}["Gradient Accumulation (GA)"] == "match"
    steps = {side: _logs.parse_text(out[side].stdout, "megatron").steps for side in out}
    assert [s["step"] for s in steps["amd"]] == [1, 2, 3, 4, 5, 6]
    assert steps["amd"][-1]["tokens_per_gpu"] > 0 and "mem_used_gb" in steps["amd"][-1]
    assert steps["nvidia"][-1]["throughput_per_gpu"] > 0
    curves = {side: [(s["step"], s["loss"]) for s in steps[side]] for side in out}
    assert _compare.loss_agreement(curves, comparison.loss_relative)["agrees"]


def test_a_batch_megatron_refuses_is_refused_by_the_standin(standin):
    _comparison, nvidia, _amd = rendered()
    proc = run_nvidia(standin, dict(nvidia, global_batch_size=60))
    assert proc.returncode == 1
    assert "global batch size (60) is not divisible by micro batch size (2) times data parallel size (8)" in proc.stdout


def test_primus_without_its_experiment_file_says_so(standin):
    env = standin.env({"EXP": str(standin.tmp / "missing.yaml")})
    proc = subprocess.run([sys.executable, str(STANDIN / "megatron_args_train.py"), "primus"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "The specified EXP file does not exist" in proc.stdout
