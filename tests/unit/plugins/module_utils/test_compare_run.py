import json
import os

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _compare, _compare_run
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view

from real_logs import repo_excerpts

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
NETWORK = {"config": {"nic_type": "thor2", "nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_socket_ifname": "ens1",
                      "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}


def comparison():
    with open(os.path.join(REPO, "configs", "comparison", "llama3_8b_nvidia_vs_amd.yml"), encoding="utf-8") as f:
        return _compare.load(yaml.safe_load(f))


def settings(gpus=4, amd=None, nvidia=None):
    comp = comparison()
    config_path = os.path.join(REPO, "configs", comp.training_config)
    hosts = {"nvidia": [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")],
             "amd": [Host("n3", "10.0.0.3"), Host("n4", "10.0.0.4")]}
    own = {"nvidia": nvidia or {}, "amd": amd or {}}
    return comp, {side: {"hosts": hosts[side], "config": load_config_file(config_path), "config_path": config_path,
                         "gpu_arch": "mi300x", "gpus_per_node": gpus, "run_id": "cmp-%s" % side,
                         "base_overrides": NETWORK, "overrides": own[side], "image": comp.sides[side].image}
                  for side in _compare.SIDES}


def test_both_sides_render_their_own_launch_with_the_same_values():
    comp, given = settings()
    sides, mismatches = _compare_run.plan_sides(comp, given, 12)
    assert mismatches == []
    nvidia = node_view(sides["nvidia"]["plan"], "n2")
    amd = node_view(sides["amd"]["plan"], "n3")
    assert nvidia["launch"]["command"].startswith(
        'torchrun --nproc_per_node 4 --nnodes "$NNODES" --node_rank "$NODE_RANK"')
    assert "pretrain_gpt.py" in nvidia["launch"]["command"] and "--micro-batch-size 2" in nvidia["launch"]["command"]
    assert nvidia["container"]["env"]["NVTE_FUSED_ATTN"] == "1" and nvidia["container"]["image"].startswith("nvcr.io")
    assert amd["launch"]["command"].startswith("EXP=/") and amd["launch"]["command"].endswith(
        "bash examples/run_pretrain.sh")
    assert amd["launch"]["workdir"] == "/workspace/Primus" and amd["container"]["env"]["MASTER_PORT"] == "1234"
    experiment = [f for f in amd["files"] if f["path"].endswith("primus_experiment.yaml")][0]["content"]
    document = yaml.safe_load(experiment)
    assert document["modules"]["pre_trainer"]["framework"] == "megatron"
    assert document["modules"]["pre_trainer"]["model"] == "llama3.1_8B.yaml"
    overrides = document["modules"]["pre_trainer"]["overrides"]
    assert (overrides["micro_batch_size"], overrides["global_batch_size"], overrides["train_iters"]) == (2, 64, 12)
    assert overrides["use_turbo_attention"] is True and overrides["fp8"] is None
    assert sides["amd"]["plan"]["framework"] == "primus" and sides["nvidia"]["plan"]["framework"] == "megatron"
    # the training config's tokenizer, the same on both sides
    assert "--tokenizer-model NousResearch/Meta-Llama-3-8B" in nvidia["launch"]["command"]
    assert overrides["tokenizer_model"] == "NousResearch/Meta-Llama-3-8B"


def test_mbs_4_on_one_side_is_refused_naming_the_parameter_and_both_values():
    comp, given = settings(amd={"micro_batch_size": 4})
    _sides, mismatches = _compare_run.plan_sides(comp, given, 12)
    text = _compare_run.refusal(mismatches)
    assert text.startswith("comparison refused before the run")
    assert "micro_batch_size (Micro Batch Size (MBS)): NVIDIA 2, AMD 4, in the rendered launch" in text


def test_a_data_parallel_size_other_than_the_tables_is_refused():
    comp, given = settings(gpus=8)
    _sides, mismatches = _compare_run.plan_sides(comp, given, 12)
    assert [(m.argument, m.nvidia, m.amd) for m in mismatches if m.argument == "data_parallel_size"] == [
        ("data_parallel_size", 16, 16)]


def write_side(tmp_path, side, plan, log_text, verdict="PASS"):
    run_dir = tmp_path / side
    host = sorted(plan["nodes"])[-1]
    (run_dir / "logs" / host).mkdir(parents=True)
    (run_dir / "logs" / host / "training.log").write_text(log_text)
    (run_dir / "plan.json").write_text(json.dumps(plan))
    (run_dir / "results.json").write_text(json.dumps({"verdict": verdict}))
    return str(run_dir)


# Iteration lines in the two stacks' formats (synthetic values; the formats are the real ones of the fixtures).
def megatron_lines(losses):
    return "".join(" [2026-11-26 11:00:0%d] iteration %8d/      12 | consumed samples: %12d | elapsed time per "
                   "iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: 3.000000E-04 | "
                   "global batch size:    64 | lm loss: %.6E | loss scale: 1.0 | number of skipped iterations:   0 | "
                   "number of nan iterations:   0 |\n" % (i % 10, i, 64 * i, loss) for i, loss in enumerate(losses, 1))


def primus_lines(losses):
    return "".join("[20261126 11:00:0%d][rank-7/8][INFO ] [--------trainer.py:2560] : iteration %8d/      12 | "
                   "consumed samples: %12d | elapsed time per iteration (ms): 1100.0/1100.0 | hip mem "
                   "usage/free/total/usage_ratio: 153.81GB/102.17GB/255.98GB/60.09%% | throughput per GPU "
                   "(TFLOP/s/GPU): 360.0/360.0 | tokens per GPU (tokens/s/GPU): 14894.5/14894.5 | learning rate: "
                   "3.000000E-04 | global batch size:    64 | lm loss: %.6E | loss scale: 1.0 |\n"
                   % (i % 10, i, 64 * i, loss) for i, loss in enumerate(losses, 1))


def test_report_from_what_both_sides_ran(tmp_path):
    comp, given = settings()
    sides, _mismatches = _compare_run.plan_sides(comp, given, 12)
    dump = repo_excerpts("megatron_args_real.txt")["MA-01"]
    losses = [10.0 - 0.5 * i for i in range(12)]
    records = {
        "nvidia": _compare_run.side_record(comp, "nvidia", write_side(
            tmp_path, "nvidia", sides["nvidia"]["plan"], dump + megatron_lines(losses))),
        "amd": _compare_run.side_record(comp, "amd", write_side(
            tmp_path, "amd", sides["amd"]["plan"], dump + primus_lines([x * 1.001 for x in losses]))),
    }
    document = _compare_run.comparison_document(comp, records)
    assert document["verdict"] == "PASS", document["problems"]
    figures = {f["metric"]: f for f in document["figures"]}
    assert figures["throughput_per_gpu"]["nvidia"] == 400.0 and figures["throughput_per_gpu"]["amd"] == 360.0
    assert figures["throughput_per_gpu"]["amd_over_nvidia"] == pytest.approx(0.9)
    assert figures["mem_used_gb"]["amd"] == 153.81 and figures["mem_used_gb"]["nvidia"] is None
    assert document["loss"]["agreement"]["agrees"] and document["loss"]["agreement"]["compared_steps"] == 12
    html = _compare_run.comparison_html(document)
    assert "best-vs-best" in html and "<svg" in html and "Megatron-LM (NVIDIA)" in html

    changed = dump.replace("  seed ............................................ 1234",
                           "  seed ............................................ 43")
    records["amd"] = _compare_run.side_record(comp, "amd", write_side(
        tmp_path, "amd2", sides["amd"]["plan"], changed + primus_lines([x * 1.2 for x in losses])))
    document = _compare_run.comparison_document(comp, records)
    assert document["verdict"] == "FAIL"
    assert "seed (Seed): NVIDIA 1234, AMD 43, in the argument dump" in document["problems"]
    assert any(p.startswith("the loss curves differ by more than 2%") for p in document["problems"])


def test_a_plan_of_another_vendor_is_said_not_hidden():
    comp = comparison()
    assert _compare_run.vendor_warnings(comp, "nvidia", {"gpu_vendor": "amd", "gpu_vendor_source": "the default"}) == [
        "Megatron-LM (NVIDIA): the plan's GPU vendor is amd (the default), not nvidia: the comparison runs, and says so"]
    assert _compare_run.vendor_warnings(comp, "amd", {"gpu_vendor": "amd"}) == []
    assert _compare_run.vendor_warnings(comp, "nvidia", {}) == []
