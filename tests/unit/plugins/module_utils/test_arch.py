"""The run's GPU arch detected from the nodes' GPU tools (real amd-smi and nvidia-smi output): when the nodes are
asked, which config entry their GPUs pick, and every refusal naming the config's path, the expected and the found."""
import copy
import os
import stat
import subprocess

import pytest
from real_logs import repo_excerpts

from ansible_collections.clusterval.training.plugins.module_utils import _arch, _gpu_detect, _gpus, _probe
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REAL = repo_excerpts("node_health_real.txt")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
MEGATRON = os.path.join(REPO, "configs", "megatron", "mi3xx_megatron_llama_distributed.json")  # mi300x, mi325
JAX = os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json")  # mi300x only
PATH = "model_params.multi_node.llama3_1_8b"
NETWORK = {"config": {"nic_type": "cx7", "nccl_ib_hca_list": "mlx5_0,mlx5_1", "nccl_ib_hca": "mlx5_0,mlx5_1",
                      "nccl_socket_ifname": "ens1", "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3",
                      "training_iterations": "12", "nnodes": "2"}}


def run_printing(output, version=""):
    def run(argv):
        return subprocess.CompletedProcess(list(argv), 0, version if "--version" in argv else output, "")
    return run


def amd_smi(output, path="/opt/rocm/bin/amd-smi"):
    """What training_gpus returns on a node whose amd-smi prints `output` (real lines)."""
    report = _probe.gpu_report({"path": path, "args": ["static", "--asic"]}, {}, run_printing(output))
    report.pop("output")
    return {"gpu": report, "tried": []}


def nvidia_smi():
    """An H100 node: real `nvidia-smi --query-gpu=... --format=csv` and `--version` lines (NV-02, NV-03)."""
    tool = {"path": "/usr/bin/nvidia-smi", "args": list(_gpus.NVIDIA_QUERY)}
    report = _probe.gpu_report(tool, {}, run_printing(REAL["NV-02"], REAL["NV-03"]))
    report.pop("output")
    return {"gpu": report, "tried": ["/opt/rocm/bin/amd-smi: not on the node"]}


MI350X = REAL["GT-01"]
MI300X_SIM = "GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI300X\n        TARGET_GRAPHICS_VERSION: gfx942\n"
GFX942_ONLY = "GPU: 0\n    ASIC:\n        TARGET_GRAPHICS_VERSION: gfx942\n"


def test_the_nodes_are_asked_only_when_the_config_offers_several_archs_or_auto():
    megatron, jax = load_config_file(MEGATRON), load_config_file(JAX)
    asked = _arch.decision(megatron, {}, 2, "llama3_1_8b", None)
    assert (asked["detect"], asked["archs"], asked["path"]) == (True, ["mi300x", "mi325"], PATH)
    assert asked["reason"] == "%s offers mi300x, mi325 and training_gpu_arch is not given" % PATH
    assert _arch.decision(megatron, {}, 2, "llama3_1_8b", "mi325")["detect"] is False
    assert _arch.decision(jax, {}, 2, None, None)["detect"] is False
    assert _arch.decision(jax, {}, 2, None, "AUTO")["detect"] is True
    # an arch added by the overrides is one more choice
    more = {"model_params": {"multi_node": {"llama3.1-70b": {"h100": {"model_size": "70"}}}}}
    assert _arch.decision(jax, more, 2, None, None)["archs"] == ["mi300x", "h100"]
    # a config the plan refuses is not refused here: the plan names the problem
    broken = _arch.decision(megatron, {}, 2, None, None)
    assert broken["detect"] is False and broken["path"] == "model_params.multi_node"


def test_amd_nodes_pick_their_entry_from_the_real_amd_smi_model_name():
    found = {"n1": amd_smi(MI350X), "n2": amd_smi(MI350X)}
    detected = _arch.pick_detected(PATH, ["mi300x", "mi350"], found)
    assert (detected.key, detected.vendor, detected.nodes, detected.tools) == ("mi350", "amd", ["n1", "n2"],
                                                                               ["amd-smi"])
    assert detected.text == "detected on n[1-2] by amd-smi (1 x AMD Instinct MI350X (mi350, gfx950))"


def test_nvidia_nodes_pick_their_entry_compared_in_canonical_form():
    detected = _arch.pick_detected(PATH, ["mi300x", "H100"], {"n1": nvidia_smi(), "n2": nvidia_smi()})
    assert (detected.key, detected.arch, detected.vendor) == ("H100", "h100", "nvidia")
    assert "by nvidia-smi (1 x NVIDIA H100 80GB HBM3 (h100), driver 580.82.07, CUDA 12.4)" in detected.text


def test_nodes_that_disagree_are_named_by_arch():
    found = {"node1": amd_smi(MI300X_SIM), "node2": amd_smi(MI300X_SIM), "node3": nvidia_smi(),
             "node4": nvidia_smi()}
    with pytest.raises(ConfigError) as error:
        _arch.pick_detected(PATH, ["mi300x", "h100"], found)
    problem = error.value.problems[0]
    assert problem.path == PATH
    assert problem.expected.startswith("one GPU arch on every node of the run")
    assert problem.found == "h100 on node[3-4]; mi300x on node[1-2]"


def test_an_arch_the_config_has_no_entry_for_lists_the_configs_archs():
    with pytest.raises(ConfigError) as error:
        _arch.pick_detected(PATH, ["mi300x", "mi325"], {"n1": amd_smi(MI350X)}, "training_gpu_arch=auto")
    problem = error.value.problems[0]
    assert problem.path == PATH
    assert problem.expected == ("an entry for the nodes' GPU arch (the config has: mi300x, mi325) "
                                "(training_gpu_arch=auto); set training_gpu_arch to the entry to run "
                                "(-e training_gpu_arch=mi300x: its values on the mi350 nodes) or add an entry "
                                "model_params.multi_node.llama3_1_8b.mi350 (training_overrides)")
    assert problem.found == "mi350 detected on n1"


def test_a_node_without_gpus_is_named_with_what_each_tool_said():
    found = {"n1": amd_smi(MI350X),
             "n2": {"gpu": None, "tried": ["/opt/rocm/bin/amd-smi: not on the node",
                                           "/usr/bin/nvidia-smi failed: exit 9: NVIDIA-SMI has failed"]},
             "n3": {"unreachable": True, "msg": "Failed to connect to the host via ssh"}}
    with pytest.raises(ConfigError) as error:
        _arch.pick_detected(PATH, ["mi300x", "mi350"], found)
    problem = error.value.problems[0]
    assert problem.path == PATH and problem.expected.startswith("GPUs on every node")
    assert problem.found == ("no GPU found on n2: /opt/rocm/bin/amd-smi: not on the node; /usr/bin/nvidia-smi "
                             "failed: exit 9: NVIDIA-SMI has failed; n3: unreachable (Failed to connect to the host "
                             "via ssh)")


def test_a_gfx_target_alone_picks_the_one_candidate_the_config_has():
    found = {"n1": amd_smi(GFX942_ONLY)}
    assert _arch.pick_detected(PATH, ["mi300x", "mi355"], found).key == "mi300x"
    with pytest.raises(ConfigError) as error:  # gfx942 is MI300X or MI325X: the model name would tell
        _arch.pick_detected(PATH, ["mi300x", "mi325"], found)
    assert error.value.problems[0].expected.startswith("one entry for the nodes' GPUs (their gfx target fits "
                                                       "mi300x, mi325")


def plan(found, hosts=None, **options):
    hosts = hosts or [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")]
    options.setdefault("model", "llama3_1_8b")
    return plan_run(load_config_file(MEGATRON), hosts,
                    PlanOptions(config_path=MEGATRON, run_id="r1", gpus_found=found,
                                overrides=options.pop("overrides", NETWORK), **options))


def test_the_plan_selects_the_detected_entry_and_says_so():
    mi325 = "GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI325X\n        TARGET_GRAPHICS_VERSION: gfx942\n"
    result = plan({"n1": amd_smi(mi325), "n2": amd_smi(mi325)})
    assert result["gpu_arch"] == "mi325"
    assert result["gpu_arch_source"] == "detected on n[1-2] by amd-smi (1 x AMD Instinct MI325X (mi325, gfx942))"
    assert result["gpu_arch_detected"]["nodes"] == ["n1", "n2"]
    # the thresholds are the mi325 entry's (its _example_ values differ from mi300x's: both <changeme> here)
    assert any("llama3_1_8b.mi325.result_dict" in warning for warning in result["warnings"])


def test_given_or_single_arch_plans_as_before_without_asking():
    given = plan(None, gpu_arch="mi300x")
    assert given["gpu_arch_source"] == "training_gpu_arch" and "gpu_arch_detected" not in given
    with pytest.raises(ConfigError) as error:  # several archs, nobody asked, none given: the choices are listed
        plan(None)
    assert error.value.problems[0].expected == "a GPU arch chosen with training_gpu_arch (available: mi300x, mi325)"
    with pytest.raises(ConfigError) as error:
        plan(None, gpu_arch="auto")
    assert error.value.problems[0].path == "training_gpu_arch"
    assert error.value.problems[0].found == "auto, and no node was asked"


def test_the_detected_vendor_is_the_runs_unless_the_inventory_says_otherwise():
    overrides = copy.deepcopy(NETWORK)
    overrides["model_params"] = {"multi_node": {"llama3_1_8b": {"h100": {
        "tokenizer_model": "NousResearch/Meta-Llama-3-8B", "model_size": "8", "batch_size": "128",
        "micro_batch_size": "4", "precision": "TE_BF16", "sequence_length": "8192", "tensor_parallelism": "1",
        "pipeline_parallelism": "1", "recompute": "0", "fsdp": "0", "result_dict": {}}}}}
    # the config's image is AMD's; its NVIDIA image is config.container_images.nvidia
    overrides["config"]["container_images"] = {"nvidia": "nvcr.io/nvidia/pytorch:25.01-py3"}
    found = {"n1": nvidia_smi(), "n2": nvidia_smi()}
    result = plan(found, overrides=overrides)
    assert (result["gpu_arch"], result["gpu_vendor"]) == ("h100", "nvidia")
    assert result["gpu_vendor_source"] == "detected on the nodes by nvidia-smi"
    # the h100 entry's values, given to upstream Megatron-LM's pretrain_gpt.py (NVIDIA's image)
    assert "pretrain_gpt.py" in result["nodes"]["n1"]["launch"]["command"]
    assert "--micro-batch-size 4" in result["nodes"]["n1"]["launch"]["command"]
    assert result["nodes"]["n1"]["container"]["image"] == "nvcr.io/nvidia/pytorch:25.01-py3"
    with pytest.raises(ConfigError) as error:
        plan(found, hosts=[Host("n1", "10.0.0.1", "amd"), Host("n2", "10.0.0.2", "amd")], overrides=overrides)
    problem = error.value.problems[0]
    assert problem.path == "hosts[0].gpu_vendor"
    assert problem.expected.startswith("the vendor of the nodes' GPUs, nvidia (detected on n[1-2] by nvidia-smi")
    assert problem.found == "amd (the inventory's training_gpu_vendor)"


def executable(tmp_path, name):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_node_side_asks_each_tool_until_one_lists_gpus(tmp_path):
    amd, nvidia = executable(tmp_path, "amd-smi"), executable(tmp_path, "nvidia-smi")
    tools = [{"path": str(tmp_path / "absent" / "rocm-smi"), "args": []}, {"path": amd, "args": ["static"]},
             {"path": nvidia, "args": list(_gpus.NVIDIA_QUERY)}]

    def run(argv):
        if argv[0] == amd:  # an amd-smi that finds no AMD GPU
            return subprocess.CompletedProcess(list(argv), 1, "", "no AMD GPU\n")
        return subprocess.CompletedProcess(list(argv), 0, REAL["NV-03"] if "--version" in argv else REAL["NV-02"],
                                           "")
    report, tried = _gpu_detect.detect(tools, {}, run)
    assert (report["vendor"], report["arch"], report["count"], report["tool"]) == ("nvidia", "h100", 1, nvidia)
    assert "output" not in report
    assert tried == ["%s: not on the node" % tools[0]["path"], "%s failed: exit 1: no AMD GPU" % amd]


def test_a_tool_that_fails_with_its_complaint_on_stdout_is_no_gpu(tmp_path):
    # nvidia-smi without its driver prints the complaint on stdout and exits 9: never a GPU named "NVIDIA-SMI has..."
    nvidia = executable(tmp_path, "nvidia-smi")
    complaint = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"

    def run(argv):
        return subprocess.CompletedProcess(list(argv), 9, complaint, "")
    report, tried = _gpu_detect.detect([{"path": nvidia, "args": list(_gpus.NVIDIA_QUERY)}], {}, run)
    assert report is None
    assert tried == ["%s failed: exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                     "driver." % nvidia]


def test_nvidia_gpus_run_the_seeds_amd_entries_when_they_agree_and_judge_none_of_their_targets():
    overrides = copy.deepcopy(NETWORK)
    overrides["model_params"] = {"multi_node": {"llama3_1_8b": {"mi300x": {"result_dict": {
        "throughput_per_gpu": "610.0"}}, "mi325": {"result_dict": {"throughput_per_gpu": "620.0"}}}}}
    found = {"n1": nvidia_smi(), "n2": nvidia_smi()}
    result = plan(found, overrides=overrides, container_image="nvcr.io/nvidia/pytorch:25.09-py3")
    assert (result["gpu_arch"], result["gpu_vendor"]) == ("mi300x", "nvidia")
    assert (result["gpu_arch_detected"]["key"], result["gpu_arch_detected"]["arch"]) == ("mi300x", "h100")
    assert result["gpu_arch_source"].endswith(
        "; the config has no nvidia entry: mi300x's values run, which mi325's equal (its targets are amd GPUs', "
        "not judged)")
    assert "pretrain_gpt.py" in result["nodes"]["n1"]["launch"]["command"]
    threshold = result["thresholds"][0]  # the seed's tokens_per_gpu is <changeme>
    assert (threshold["metric"], threshold["set"], threshold["value"]) == ("throughput_per_gpu", False, None)
    assert threshold["unset_reason"] == "throughput_per_gpu 610.0 of mi300x, not judged on nvidia GPUs"


def test_amd_entries_that_differ_are_refused_on_nvidia_gpus_with_the_fix():
    mi350 = {"fsdp": "0", "recompute": "0", "batch_size": "128", "result_dict": {"tokens_per_gpu": "1"}}
    entries = {"mi350": mi350, "mi355": dict(mi350, fsdp="1", recompute="1", result_dict={})}
    with pytest.raises(ConfigError) as error:
        _arch.pick_detected(PATH, ["mi350", "mi355"], {"n1": nvidia_smi()}, "training_gpu_arch=auto", entries)
    problem = error.value.problems[0]
    assert problem.expected == (
        "an entry for the nodes' GPU arch, or entries of amd that agree (the config has: mi350, mi355, which differ "
        "in fsdp, recompute) (training_gpu_arch=auto); set training_gpu_arch to the entry to run "
        "(-e training_gpu_arch=mi350: its values on the h100 nodes, its result_dict targets not judged) or add an "
        "entry model_params.multi_node.llama3_1_8b.h100 (training_overrides)")
    assert problem.found == "h100 detected on n1"


def test_an_amd_entry_given_for_nvidia_gpus_runs_with_its_targets_not_judged():
    overrides = copy.deepcopy(NETWORK)
    overrides["model_params"] = {"multi_node": {"llama3_1_8b": {"mi300x": {"result_dict": {
        "throughput_per_gpu": "610.0", "tokens_per_gpu": "<changeme>"}}}}}
    result = plan(None, hosts=[Host("n1", "10.0.0.1", "nvidia"), Host("n2", "10.0.0.2", "nvidia")],
                  overrides=overrides, gpu_arch="mi300x", container_image="nvcr.io/nvidia/pytorch:25.09-py3")
    assert [(t["metric"], t["set"], t.get("unset_reason")) for t in result["thresholds"]] == [
        ("throughput_per_gpu", False, "throughput_per_gpu 610.0 of mi300x, not judged on nvidia GPUs"),
        ("tokens_per_gpu", False, None)]
    assert ("model_params.multi_node.llama3_1_8b.mi300x: the parameters of the config's mi300x block run on nvidia "
            "GPUs (the config has no block for them); its result_dict targets are mi300x's, reported and not judged"
            in result["warnings"])
