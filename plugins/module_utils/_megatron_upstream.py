# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Upstream Megatron-LM on NVIDIA's images: a seed Megatron config as pretrain_gpt.py's own arguments.

The seed configs (configs/megatron/*.json) describe a run of ROCm's examples/llama/train_llama3.sh through its
environment (MODEL_SIZE, TP, TE_FP8, FSDP, ...). NVIDIA's image (NGC PyTorch with a checkout of
github.com/NVIDIA/Megatron-LM) has no such script: there the same run is pretrain_gpt.py under torchrun with
the arguments that script gives it, less ROCm's own (no --no-masked-softmax-fusion, no
--no-gradient-accumulation-fusion, no hipBLASLt tuning), each one in upstream's parser
(tests/fixtures/megatron-lm/, checked by tests/unit/plugins/module_utils/test_megatron_upstream.py). What
upstream cannot run as the config means is a ConfigError before any node is touched. Pure Python.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._config import to_bool, to_int, to_str
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
# The Megatron stack module imports this one: its functions are reached through the module at call time.
from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron

# Llama 3 / 3.1 by size (billions): the shapes of ROCm's train_llama3.sh for MODEL_SIZE 8 and 70.
LLAMA3_SHAPES = {
    8: {"num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32,
        "num_query_groups": 8},
    70: {"num_layers": 80, "hidden_size": 8192, "ffn_hidden_size": 28672, "num_attention_heads": 64,
         "num_query_groups": 8},
}
LLAMA3_ARCHITECTURE = {
    "group_query_attention": True, "position_embedding_type": "rope", "rotary_base": 500000, "swiglu": True,
    "normalization": "RMSNorm", "untie_embeddings_and_output_weights": True, "add_bias_linear": False,
    "attention_dropout": 0.0, "hidden_dropout": 0.0, "init_method_std": 0.02,
}
# The optimizer, schedule, logging and process group of train_llama3.sh; no evaluation, no checkpoint.
TRAINING = {
    "lr": 1e-4, "min_lr": 1e-5, "lr_decay_style": "cosine", "weight_decay": 0.1, "clip_grad": 1.0,
    "adam_beta1": 0.9, "adam_beta2": 0.95, "log_interval": 1, "log_throughput": True, "eval_iters": 0,
    "distributed_backend": "nccl", "distributed_timeout_minutes": 120, "tokenizer_type": "HuggingFaceTokenizer",
}
# TE_FP8=1: Transformer Engine's FP8 with the delayed-scaling settings of train_llama3.sh (its margin 0 and
# interval 1 are upstream's defaults).
FP8 = {"transformer_impl": "transformer_engine", "fp8": "hybrid", "fp8_amax_history_len": 1024,
       "fp8_amax_compute_algo": "max"}
# RECOMPUTE=1: every layer's activations recomputed (full, one layer per recomputation unit, at any PP).
RECOMPUTE = {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
# FSDP=1: PyTorch's FSDP2, as train_llama3.sh gives it; upstream asserts these beside it.
FSDP = {"use_torch_fsdp2": True, "gradient_accumulation_fusion": False}
DATA_PARALLEL = {"use_distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True}


def llama3_size(model: str, params: Mapping[str, Any], path: str) -> int:
    """The model's size when it is a Llama 3 of a shape this module knows; else what upstream would need."""
    family = model.lower().replace("_", "").replace("-", "").replace(".", "")
    size_path = join_path(path, "model_size")
    size = to_int(params.get("model_size"), size_path)
    if not family.startswith("llama3"):
        raise ConfigError(path, "a Llama 3 model (llama3_1_8b, llama3_1_70b): the shapes the collection gives "
                          "upstream Megatron-LM's pretrain_gpt.py on NVIDIA nodes; for another model set "
                          "config.megatron_arguments with its shape", show(model))
    if size not in LLAMA3_SHAPES:
        raise ConfigError(size_path, "8 or 70 (the Llama 3 sizes the collection gives pretrain_gpt.py)", show(size))
    return size


def seed_arguments(model: str, params: Mapping[str, Any], total_steps: int, path: str,
                   config: Mapping[str, Any], warnings: List[str]) -> Dict[str, Any]:
    """pretrain_gpt.py's arguments (by dest) for a seed model_params entry; warnings are appended to `warnings`.
    `config`: the config's section of that name (FSDP2 refuses CUDA_DEVICE_MAX_CONNECTIONS=1)."""
    def at(key: str) -> str:
        return join_path(path, key)

    size = llama3_size(model, params, path)
    # TE_FP16 runs BF16, as on ROCm (the seed's targets were measured so); precision_env says so
    te_fp8, precision_warnings = _stack_megatron.precision_env(params.get("precision", "TE_BF16"), at("precision"))
    warnings.extend(precision_warnings)
    arguments = _stack_megatron.params_arguments(params, total_steps, path)
    arguments.update(LLAMA3_SHAPES[size])
    arguments.update(LLAMA3_ARCHITECTURE)
    arguments.update(TRAINING)
    arguments["tokenizer_model"] = to_str(params.get("tokenizer_model", ""), at("tokenizer_model"))
    if not arguments["tokenizer_model"]:
        raise ConfigError(at("tokenizer_model"), "a Hugging Face tokenizer (NousResearch/Meta-Llama-3-8B)",
                          show(params.get("tokenizer_model", "")))
    if te_fp8 == "1":
        arguments.update(FP8)
    if to_bool(params.get("recompute", "0"), at("recompute")):
        arguments.update(RECOMPUTE)
    if to_bool(params.get("fsdp", "0"), at("fsdp")):
        arguments.update(fsdp_arguments(arguments, path, config, warnings))
    else:
        arguments.update(DATA_PARALLEL)
    if arguments["tensor_model_parallel_size"] > 1:
        arguments["sequence_parallel"] = True
    return arguments


def fsdp_arguments(arguments: Mapping[str, Any], path: str, config: Mapping[str, Any],
                   warnings: List[str]) -> Dict[str, Any]:
    """FSDP as train_llama3.sh runs it (TP forced to 1), refused where upstream's FSDP2 asserts."""
    if arguments["pipeline_model_parallel_size"] != 1:
        raise ConfigError(join_path(path, "pipeline_parallelism"), "1 with fsdp: upstream Megatron-LM asserts "
                          "'--use-torch-fsdp2 is not supported with pipeline parallelism'",
                          show(arguments["pipeline_model_parallel_size"]))
    for setting, value in connection_settings(config):
        if str(value).strip() == "1":
            raise ConfigError(setting, "unset or above 1 with fsdp: upstream Megatron-LM asserts 'FSDP always "
                              "requires CUDA_DEVICE_MAX_CONNECTIONS value large than one'", show(value))
    changed = dict(FSDP)
    if arguments["tensor_model_parallel_size"] != 1:
        warnings.append("%s: FSDP=1 forces TP=1 (as train_llama3.sh does); tensor_parallelism %d is ignored"
                        % (join_path(path, "fsdp"), arguments["tensor_model_parallel_size"]))
        changed["tensor_model_parallel_size"] = 1
    return changed


def connection_settings(config: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    """(path, value) of each place the config sets CUDA_DEVICE_MAX_CONNECTIONS."""
    container = config.get("container_config")
    env_dict = container.get("env_dict") if isinstance(container, dict) else None
    found = [("config.cuda_device_max_connections", config["cuda_device_max_connections"])] \
        if "cuda_device_max_connections" in config else []
    for path, section in (("config.env_vars", config.get("env_vars")), ("config.container_config.env_dict", env_dict)):
        if isinstance(section, dict) and "CUDA_DEVICE_MAX_CONNECTIONS" in section:
            found.append((join_path(path, "CUDA_DEVICE_MAX_CONNECTIONS"), section["CUDA_DEVICE_MAX_CONNECTIONS"]))
    return found
