"""Every config file of the validation suite at dddd9143 (tests/fixtures/cvs, copied from ROCm/cvs, MIT; see
SOURCE.md there), each model x arch (the legacy layout) or sweep (the versioned one): it plans, or it is refused
with a message that names the model or the stack and why; none crashes.

The site's values the suite leaves as ``<changeme>`` (interfaces, HCAs, image, batch sizes) are filled in as a
site would, through the overrides; the configs stay as the suite wrote them."""
import json
import os
import re

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
SUITE = os.path.join(REPO, "tests", "fixtures", "cvs")
# What a site fills in for the suite's <changeme>, by key.
SITE_VALUES = {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_ib_hca": "bnxt_re0,bnxt_re1", "ib_hca_list": "bnxt_re0",
               "ib_hca": "bnxt_re0", "nccl_socket_ifname": "eth0", "gloo_socket_ifname": "eth0",
               "socket_ifname": "eth0", "nic_type": "thor2", "nccl_ib_gid_index": "3", "ib_gid_index": "3",
               "container_image": "rocm/megatron-lm:v25.5_py310", "image": "rocm/megatron-lm:v25.5_py310",
               "training_iterations": "10", "training_steps": "10", "global_batch_size": "64",
               "micro_batch_size": "1", "batch_size": "64", "master_address": "10.0.0.1"}
# (file, combination) -> the refusal's message, for each combination the collection cannot run.
REFUSED = {
    ("torchtitan/mi3xx_torchtitan_deepseek_distributed.json", "deepseek_16b/mi300x"):
        r"^model_params\.multi_node\.deepseek_16b\.mi300x: expected a model the suite's TorchTitan registry knows .* the suite itself would train "
        r"llama3_3_70b in place of deepseek_16b",
    ("torchtitan/mi3xx_torchtitan_deepseek_distributed.json", "deepseek_16b/mi325"): r"registry knows",
    ("torchtitan/mi3xx_torchtitan_deepseek_single.json", "deepseek_16b/mi300x"): r"registry knows",
    ("torchtitan/mi3xx_torchtitan_deepseek_single.json", "deepseek_16b/mi325"): r"registry knows",
}
# TorchTitan's parallel sizes must make up the world: the legacy multi-node configs shard 8 (llama) or 16 (qwen3)
# ways on their example's 4 nodes, which TorchTitan's ParallelDims refuses at start-up.
PARALLEL = (r"data_parallel_shard_degree: expected dp_shard x tp x pp x cp = the run's 32 GPUs \(TorchTitan's "
            r"parallel dims\), found (8|16) x 1 = (8|16)")
for _model in ("llama3_1_8b", "llama3_1_70b", "qwen3_32b"):
    for _arch in ("mi300x", "mi325"):
        _name = "qwen3" if _model.startswith("qwen") else "llama"
        REFUSED[("torchtitan/mi3xx_torchtitan_%s_distributed.json" % _name, "%s/%s" % (_model, _arch))] = PARALLEL


def suite_files():
    return sorted("%s/%s" % (directory, name) for directory in sorted(os.listdir(SUITE))
                  if os.path.isdir(os.path.join(SUITE, directory))
                  for name in os.listdir(os.path.join(SUITE, directory))
                  if name.endswith(".json") and not name.endswith("_threshold.json"))


def combinations(relative):
    """model/arch of the legacy layout (every mode's), or the sweeps of the versioned one."""
    config = load_config_file(os.path.join(SUITE, relative))
    if "schema_version" not in config:
        return ["%s/%s" % (model, arch) for mode in config["model_params"].values() for model, archs in mode.items()
                if not model.startswith("_") for arch in archs if not arch.startswith("_")]
    if config["framework"] == "jaxmaxtext":
        return [sweep["name"] for sweep in config["training"]["sweeps"]]
    return [key for key in config["sweep"]["combinations"] if not key.startswith("_")]


def filled(value, key=None):
    """The config with the site's values where the suite wrote <changeme>."""
    if isinstance(value, dict):
        return {k: filled(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v) for v in value]
    return SITE_VALUES.get(key, value) if value == "<changeme>" else value


def node_count(config, relative):
    written = str((config.get("config") or {}).get("nnodes", ""))
    if written.isdigit():
        return int(written)
    if "schema_version" in config and config["framework"] == "jaxmaxtext":
        return 4 if "405b" in relative else 2
    return 1 if "single" in relative else 4


def plan(relative, combination):
    config = filled(load_config_file(os.path.join(SUITE, relative)))
    hosts = [Host("n%d" % i, "10.0.0.%d" % i) for i in range(1, node_count(config, relative) + 1)]
    if "schema_version" in config:
        options = PlanOptions(config_path=os.path.join(SUITE, relative), run_id="r1", sweep=combination)
    else:
        model, arch = combination.split("/")
        options = PlanOptions(config_path=relative, run_id="r1", model=model, gpu_arch=arch)
    return plan_run(config, hosts, options)


ALL = [(relative, combination) for relative in suite_files() for combination in combinations(relative)]


def test_the_fixtures_hold_the_suites_37_files_and_75_combinations():
    assert len(suite_files()) == 37
    assert len(ALL) == 75
    assert sum(1 for relative in suite_files() if relative.startswith("torchtitan/")) == 14


@pytest.mark.parametrize("relative, combination", ALL)
def test_every_combination_plans_or_is_refused_naming_the_model_and_why(relative, combination):
    if (relative, combination) in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[(relative, combination)]):
            plan(relative, combination)
        return
    result = plan(relative, combination)
    stack = "torchtitan" if relative.startswith("torchtitan/") else \
        "megatron" if relative.startswith("megatron/") else "maxtext"
    assert result["framework"] == stack
    node = result["nodes"]["n1"]
    assert node["launch"]["command"]


def test_torchtitan_launches_as_the_suite_does_with_the_toml_it_generates():
    result = plan("torchtitan/mi355_llama3_1_70b_distributed_config.json", "llama3_1_70b-mi355-4n-bs128-mbs1-fp8")
    node = result["nodes"]["n3"]
    assert node["launch"]["workdir"] == "/workspace/Primus/third_party/torchtitan"
    assert node["launch"]["command"] == (
        'torchrun --nnodes "$NNODES" "--node_rank=$NODE_RANK" --nproc_per_node 8 --rdzv_id 101 --rdzv_backend c10d '
        '--rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --role rank --tee 3 --module torchtitan.train '
        '--job.config_file %s/torchtitan/run_config.toml' % node["run_dir"])
    env = node["container"]["env"]
    rendezvous = ("4", "2", "10.0.0.1", "29500")
    assert (env["NNODES"], env["NODE_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == rendezvous
    assert env["PYTORCH_HIP_ALLOC_CONF"] == "expandable_segments:True" and env["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    toml = next(f["content"] for f in node["files"] if f["path"].endswith("run_config.toml"))
    for line in ('name = "llama3"', 'flavor = "70B"', "local_batch_size = 1", "global_batch_size = 128",
                 "steps = 10", "tensor_parallel_degree = 4", "data_parallel_shard_degree = 8",
                 "enable_fsdp_float8_all_gather = true"):
        assert line in toml.splitlines(), line
    assert result["threshold_file"]["cell"] == "MBS=1,GBS=128,PRECISION=fp8"
    assert node["log"]["format"] == "torchtitan" and node["log"]["final_step"] == 10
    assert all(n["prints_steps"] for n in result["nodes"].values())


def test_the_suites_canned_toml_is_named_with_the_step_count_on_the_command_line():
    result = plan_run(filled(load_config_file(os.path.join(SUITE, "torchtitan/mi3xx_torchtitan_llama_single.json"))),
                      [Host("n1", "10.0.0.1")], PlanOptions(config_path="x", run_id="r1", model="llama3_1_8b",
                                                            gpu_arch="mi325"))
    command = result["nodes"]["n1"]["launch"]["command"]
    assert command.endswith("--job.config_file ./train_configs/llama3_8B.toml --training.steps 10")


def test_megatron_deepseek_runs_its_own_script_with_its_variables():
    result = plan("megatron/mi325x_megatron_deepseek-v2-lite_single.json", "deepseek_v2_lite-mi325x-bs128-mbs4-fp8")
    node = result["nodes"]["n1"]
    env = node["container"]["env"]
    assert node["launch"]["command"] == "bash examples/deepseek_v2/train_deepseekv2.sh"
    assert {k: env[k] for k in ("MODEL_SIZE", "MBS", "GBS", "PR", "TRAIN_ITERS")} == \
        {"MODEL_SIZE": "16", "MBS": "4", "GBS": "128", "PR": "fp8", "TRAIN_ITERS": "10"}
    assert env["TOKENIZER_MODEL"].endswith("/deepseek_v2_lite/tokenizer.model")
    assert "TOTAL_ITERS" not in env and "BS" not in env
    assert any("tokenizer.model" in warning for warning in result["warnings"])


@pytest.mark.parametrize("sweep, expected", [
    ("llama3_1_8b-mi325-bs128-mbs4-mxfp4", {"TE_FP8": "0", "TE_FP4": "1", "TE_FP4_RECIPE": "mxfp4"}),
    ("llama3_1_8b-mi325-bs128-mbs4-mxfp8", {"TE_FP8": "1", "TE_FP8_RECIPE": "mxfp8"}),
])
def test_the_mxfp_sweeps_set_the_llama_scripts_recipes(sweep, expected):
    env = plan("megatron/mi325x_megatron_llama-3.1-8b_single.json", sweep)["nodes"]["n1"]["container"]["env"]
    assert {k: env.get(k) for k in expected} == expected


def test_a_model_no_script_family_knows_is_refused_naming_it():
    config = filled(load_config_file(os.path.join(SUITE, "megatron/mi325x_megatron_deepseek-v2-lite_single.json")))
    config["model_params"].update(model_name="gemma_7b", tokenizer_model="google/gemma-7b")
    with pytest.raises(ConfigError, match=r"^model_params: expected a model of a family with a "
                                          r"Megatron-LM example script \(llama3, llama2, deepseek, mixtral, qwen3, "
                                          r"qwen2\), found 'gemma_7b'"):
        plan_run(config, [Host("n1", "10.0.0.1")], PlanOptions(config_path="x", run_id="r1"))


def test_a_llama_size_the_scripts_lack_names_the_model():
    config = filled(load_config_file(os.path.join(SUITE, "megatron/mi325x_megatron_llama-3.1-8b_single.json")))
    config["model_params"]["model_size"] = "405"
    with pytest.raises(ConfigError, match=r"model_params\.model_size: expected 8 or 70 \(the sizes the Megatron-LM "
                                          r"llama scripts support for llama3\.1_8B\), found 405"):
        plan_run(config, [Host("n1", "10.0.0.1")], PlanOptions(config_path="x", run_id="r1"))


def test_an_mxfp_precision_torchtitan_lacks_is_refused_naming_it():
    config = filled(load_config_file(os.path.join(SUITE, "torchtitan/mi355_qwen3_32b_single_config.json")))
    config["sweep"]["combinations"]["qwen3_32b-mi355-bs16-mbs1-bf16"]["precision"] = "mxfp8"
    with pytest.raises(ConfigError, match=r"precision: expected bf16 or fp8 .*found 'mxfp8'"):
        plan_run(config, [Host("n1", "10.0.0.1")], PlanOptions(config_path="x", run_id="r1"))


def test_the_refused_table_names_only_real_combinations():
    assert set(REFUSED) <= set(ALL)
    assert all(re.compile(pattern) for pattern in REFUSED.values())
    assert json.dumps(sorted(REFUSED))
