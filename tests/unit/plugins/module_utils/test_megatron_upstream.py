"""The seed Megatron-LM configs on NVIDIA nodes: upstream Megatron-LM's pretrain_gpt.py under torchrun, every
argument checked against upstream's own parser (tests/fixtures/megatron-lm: core_v0.16.0 and core_v0.19.0, the
releases whose LTS image is nvcr.io/nvidia/pytorch:25.09-py3), or refused before any node is touched."""
import copy
import glob
import json
import os
import shlex

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
UPSTREAM = {os.path.basename(path)[:-5]: json.load(open(path, encoding="utf-8"))
            for path in sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "megatron-lm", "*.json")))}
SEEDS = sorted(glob.glob(os.path.join(REPO, "configs", "megatron", "*.json")))
NGC = "nvcr.io/nvidia/pytorch:25.09-py3"
CX7 = {"config": {"nic_type": "cx7", "nccl_ib_hca_list": "mlx5_0,mlx5_1", "nccl_socket_ifname": "ens1",
                  "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3", "training_iterations": "12"}}
# upstream's kinds for the kinds of _stack_megatron.ARGUMENTS
KINDS = {"on": ("store_true",), "off": ("store_false",), "int": ("int",), "float": ("float",),
         "str": ("str", "choice")}


def seed_entries():
    for path in SEEDS:
        config = load_config_file(path)
        for mode, models in config["model_params"].items():
            for model, archs in models.items():
                for arch in archs:
                    if not arch.startswith("_"):
                        yield pytest.param(path, mode, model, arch,
                                           id="%s-%s-%s-%s" % (os.path.basename(path)[:-5], mode, model, arch))


def nvidia_plan(path, mode, model, arch, overrides=None):
    hosts = [Host("n1", "10.0.0.1", "nvidia"), Host("n2", "10.0.0.2", "nvidia")]
    return plan_run(load_config_file(path), hosts,
                    PlanOptions(config_path=path, model=model, gpu_arch=arch, mode=mode, run_id="r1",
                                overrides=overrides or CX7, container_image=NGC))


def pretrain_argv(plan):
    """pretrain_gpt.py's arguments in the launch line (after torchrun's own)."""
    words = shlex.split(plan["nodes"]["n1"]["launch"]["command"])
    assert words[0] == "torchrun"
    return words[words.index("pretrain_gpt.py") + 1:]


def parsed(argv):
    """(option, value or None) pairs, a flag being an option followed by another option or by nothing."""
    pairs, index = [], 0
    while index < len(argv):
        value = argv[index + 1] if index + 1 < len(argv) and not argv[index + 1].startswith("--") else None
        pairs.append((argv[index], value))
        index += 1 if value is None else 2
    return pairs


def shape_problem(spec, value):
    """What is wrong with a value for an upstream option of this kind (None: nothing)."""
    kind = spec["kind"]
    if kind in ("store_true", "store_false"):
        return None if value is None else "a flag given the value %r" % value
    if value is None:
        return "no value for a %s option" % kind
    try:
        {"int": int, "float": float}.get(kind, str)(value)
    except ValueError:
        return "%r is not a %s" % (value, kind)
    if kind == "choice" and value not in spec["choices"]:
        return "%r is none of %s" % (value, spec["choices"])
    return None


def test_the_fixtures_are_upstreams_parser_at_named_commits():
    assert set(UPSTREAM) == {"core_v0.16.0", "core_v0.19.0"}
    for name, document in UPSTREAM.items():
        source = document["source"]
        assert source["repository"] == "github.com/NVIDIA/Megatron-LM" and source["tag"] == name
        assert len(source["commit"]) == 40 and len(document["options"]) > 600
        assert document["options"]["--micro-batch-size"] == {"dest": "micro_batch_size", "kind": "int"}


@pytest.mark.parametrize("path,mode,model,arch", list(seed_entries()))
def test_every_argument_of_a_seed_entry_on_nvidia_is_in_upstreams_parser_with_a_value_of_its_shape(
        path, mode, model, arch):
    argv = pretrain_argv(nvidia_plan(path, mode, model, arch))
    for name, document in UPSTREAM.items():
        options = document["options"]
        unknown = [option for option, _value in parsed(argv) if option not in options]
        assert unknown == [], "%s: not in upstream's parser at %s" % (unknown, name)
        wrong = {option: shape_problem(options[option], value) for option, value in parsed(argv)}
        assert {option: problem for option, problem in wrong.items() if problem} == {}, name


def test_the_collections_megatron_arguments_are_upstreams_with_their_dest_and_kind():
    for name, document in UPSTREAM.items():
        options = document["options"]
        for dest, (option, kind) in _stack_megatron.ARGUMENTS.items():
            assert option in options, "%s not in upstream's parser at %s" % (option, name)
            assert options[option]["dest"] == dest, option
            assert options[option]["kind"] in KINDS[kind], option


def test_the_8b_seed_runs_llama_3_1_8b_in_fp8_with_the_configs_batch_and_parallelism():
    path = os.path.join(REPO, "configs", "megatron", "mi3xx_megatron_llama_distributed.json")
    plan = nvidia_plan(path, "multi_node", "llama3_1_8b", "mi300x")
    args = dict(parsed(pretrain_argv(plan)))
    assert {key: args[key] for key in ("--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
                                       "--num-query-groups", "--micro-batch-size", "--global-batch-size",
                                       "--seq-length", "--tensor-model-parallel-size", "--train-iters",
                                       "--fp8-format", "--tokenizer-model")} == {
        "--num-layers": "32", "--hidden-size": "4096", "--ffn-hidden-size": "14336", "--num-attention-heads": "32",
        "--num-query-groups": "8", "--micro-batch-size": "2", "--global-batch-size": "128", "--seq-length": "8192",
        "--tensor-model-parallel-size": "1", "--train-iters": "12", "--fp8-format": "hybrid",
        "--tokenizer-model": "NousResearch/Meta-Llama-3-8B"}
    assert {"--bf16", "--mock-data", "--log-throughput", "--use-distributed-optimizer", "--overlap-grad-reduce",
            "--transformer-impl"} <= set(args)
    assert "--sequence-parallel" not in args and "--use-torch-fsdp2" not in args
    node = plan["nodes"]["n1"]
    assert node["launch"]["workdir"] == "/workspace/Megatron-LM"
    assert "--nproc_per_node 8" in node["launch"]["command"]
    # the watch computes tokens per GPU from the sequence length
    assert node["container"]["env"]["SEQ_LENGTH"] == "8192"


def test_the_70b_seeds_te_fp16_runs_bf16_with_tensor_and_sequence_parallelism():
    path = os.path.join(REPO, "configs", "megatron", "mi3xx_megatron_llama_distributed.json")
    plan = nvidia_plan(path, "multi_node", "llama3_1_70b", "mi325")
    args = dict(parsed(pretrain_argv(plan)))
    assert (args["--num-layers"], args["--hidden-size"], args["--tensor-model-parallel-size"]) == ("80", "8192", "8")
    assert "--bf16" in args and "--sequence-parallel" in args and "--fp8-format" not in args
    assert any("TE_FP16 runs BF16" in warning for warning in plan["warnings"])


def test_fsdp_and_recompute_as_the_mi355_seed_means_them():
    path = os.path.join(REPO, "configs", "megatron", "mi35x_megatron_llama_single.json")
    args = dict(parsed(pretrain_argv(nvidia_plan(path, "single_node", "llama3_1_8b", "mi355"))))
    assert {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion"} <= set(args)
    assert "--use-distributed-optimizer" not in args and "--overlap-param-gather" not in args
    assert (args["--recompute-granularity"], args["--recompute-method"], args["--recompute-num-layers"]) == \
        ("full", "uniform", "1")


def fsdp_overrides(**params):
    overrides = copy.deepcopy(CX7)
    overrides["model_params"] = {"single_node": {"llama3_1_8b": {"mi355": params}}}
    return overrides


def test_fsdp_forces_tensor_parallelism_to_one_and_says_so():
    path = os.path.join(REPO, "configs", "megatron", "mi35x_megatron_llama_single.json")
    plan = nvidia_plan(path, "single_node", "llama3_1_8b", "mi355", fsdp_overrides(tensor_parallelism="2"))
    assert dict(parsed(pretrain_argv(plan)))["--tensor-model-parallel-size"] == "1"
    assert "model_params.single_node.llama3_1_8b.mi355.fsdp: FSDP=1 forces TP=1" in " ".join(plan["warnings"])


@pytest.mark.parametrize("overrides,path,expected", [
    (fsdp_overrides(pipeline_parallelism="2"), "model_params.single_node.llama3_1_8b.mi355.pipeline_parallelism",
     "'--use-torch-fsdp2 is not supported with pipeline parallelism'"),
    (dict(fsdp_overrides(), config=dict(CX7["config"], cuda_device_max_connections="1")),
     "config.cuda_device_max_connections", "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS"),
])
def test_what_upstreams_fsdp_asserts_against_is_refused_before_any_node(overrides, path, expected):
    seed = os.path.join(REPO, "configs", "megatron", "mi35x_megatron_llama_single.json")
    with pytest.raises(ConfigError) as error:
        nvidia_plan(seed, "single_node", "llama3_1_8b", "mi355", overrides)
    problem = error.value.problems[0]
    assert problem.path == path and expected in problem.expected


@pytest.mark.parametrize("params,path,expected", [
    ({"model_size": "13"}, "model_params.single_node.llama3_1_8b.mi355.model_size", "8 or 70"),
    ({"tokenizer_model": ""}, "model_params.single_node.llama3_1_8b.mi355.tokenizer_model", "a Hugging Face"),
])
def test_a_shape_upstream_is_not_given_is_refused_naming_the_key(params, path, expected):
    seed = os.path.join(REPO, "configs", "megatron", "mi35x_megatron_llama_single.json")
    with pytest.raises(ConfigError) as error:
        nvidia_plan(seed, "single_node", "llama3_1_8b", "mi355", fsdp_overrides(**params))
    assert error.value.problems[0].path == path and expected in error.value.problems[0].expected


def test_a_model_other_than_llama_3_is_refused_with_the_way_to_run_it():
    seed = os.path.join(REPO, "configs", "megatron", "mi35x_megatron_llama_single.json")
    config = load_config_file(seed)
    entry = config["model_params"]["single_node"]["llama3_1_8b"]["mi355"]
    config["model_params"]["single_node"] = {"llama2_7b": {"mi355": dict(entry, model_size="8")}}
    with pytest.raises(ConfigError) as error:
        plan_run(config, [Host("n1", "10.0.0.1", "nvidia")],
                 PlanOptions(config_path=seed, run_id="r1", overrides=CX7, container_image=NGC))
    problem = error.value.problems[0]
    assert problem.path == "model_params.single_node.llama2_7b.mi355"
    assert "a Llama 3 model" in problem.expected and "config.megatron_arguments" in problem.expected


def test_amd_nodes_keep_rocms_example_script():
    path = os.path.join(REPO, "configs", "megatron", "mi3xx_megatron_llama_distributed.json")
    plan = plan_run(load_config_file(path), [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")],
                    PlanOptions(config_path=path, model="llama3_1_8b", gpu_arch="mi300x", run_id="r1",
                                overrides=CX7))
    assert plan["nodes"]["n1"]["launch"]["command"] == "bash examples/llama/train_llama3.sh"
    assert plan["nodes"]["n1"]["container"]["env"]["TE_FP8"] == "1"
