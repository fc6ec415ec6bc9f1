# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Megatron-LM (ROCm images): the example script, its environment and the launch line."""
from __future__ import annotations

import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _gpus, _megatron_upstream
from ansible_collections.clusterval.training.plugins.module_utils._config import to_bool, to_int, to_str
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Context

WORKDIR = "/workspace/Megatron-LM"
DEFAULT_MASTER_PORT = 6000
SCRIPTS = {
    "llama3": "examples/llama/train_llama3.sh",
    "llama2": "examples/llama/train_llama2.sh",
}
LAYERS_BY_SIZE = {8: 32, 70: 80}
# TE_* are the seed configs' labels; FP8, BF16, MXFP4 and MXFP8 the versioned format's (the suite's llama flags).
PRECISIONS = {"TE_FP8": {"TE_FP8": "1"}, "TE_BF16": {"TE_FP8": "0"}, "TE_FP16": {"TE_FP8": "0"},
              "FP8": {"TE_FP8": "1"}, "BF16": {"TE_FP8": "0"},
              "MXFP4": {"TE_FP8": "0", "TE_FP4": "1", "TE_FP4_RECIPE": "mxfp4"},
              "MXFP8": {"TE_FP8": "1", "TE_FP8_RECIPE": "mxfp8"}}
MX_PRECISIONS = ("MXFP4", "MXFP8")


class Family(NamedTuple):
    """A family of ROCm Megatron-LM's example scripts other than llama: the script and the names of the
    variables it reads (the validation suite's model registry, cvs lib/training/megatron/utils/model_registry.py)."""
    script: str
    precisions: Dict[str, Dict[str, str]]
    mbs: str
    gbs: str
    tp: str
    pp: str
    seq: str
    iters: str
    local_tokenizer: bool


PR = {"FP8": {"PR": "fp8"}, "FP16": {"PR": "fp16"}, "BF16": {"PR": "bf16"}}
# Matched against the model's name and its tokenizer, in this order (qwen3 before qwen2, as the suite orders them).
FAMILIES = {
    "deepseek": Family("examples/deepseek_v2/train_deepseekv2.sh", PR, "MBS", "GBS", "TP", "PP", "SEQ_LENGTH",
                       "TRAIN_ITERS", True),
    "mixtral": Family("examples/mixtral/train_mixtral_moe.sh", PR, "MBS", "GBS", "TP_SIZE", "PP_SIZE", "SEQLEN",
                      "TRAIN_ITERS", True),
    "qwen3": Family("examples/qwen3/train_qwen3.sh", {"FP8": {"PR": "fp8"}, "BF16": {"PR": "bf16"},
                                                      "MXFP8": {"PR": "fp8", "FP8_RECIPE": "mxfp8"}},
                    "MICRO_BATCH_SIZE", "GLOBAL_BATCH_SIZE", "TP", "PP", "SEQ_LENGTH", "TRAIN_ITERS", False),
    "qwen2": Family("examples/qwen2/train_qwen2.sh", {"FP8": {"TE_FP8": "1"}, "BF16": {"TE_FP8": "0"}},
                    "MBS", "BS", "TP", "PP", "SEQ_LENGTH", "TOTAL_ITERS", False),
}


class MegatronSettings(NamedTuple):
    env: Dict[str, str]
    script: str
    warnings: List[str]
    iterations_env: str = "TOTAL_ITERS"


def script_for_model(model: str, path: str) -> str:
    family = model.lower().replace("_", "").replace("-", "").replace(".", "")
    for prefix, script in SCRIPTS.items():
        if family.startswith(prefix):
            return script
    raise ConfigError(path, "a model of a family with a Megatron-LM example script (%s)"
                      % ", ".join(list(SCRIPTS) + list(FAMILIES)), show(model))


def family_of(model: str, params: Mapping[str, Any]) -> Optional[str]:
    """The non-llama family the model's name or its tokenizer names (the suite picks by the tokenizer)."""
    names = (model + " " + str(params.get("tokenizer_model") or "")).lower()
    return next((name for name in FAMILIES if name in names), None)


def precision_label(value: Any, path: str, known: Mapping[str, Any]) -> str:
    label = to_str(value, path).strip().upper()
    if label not in known:
        raise ConfigError(path, "one of %s" % ", ".join(known), show(value))
    return label


def precision_env(value: Any, path: str) -> Tuple[str, List[str]]:
    label = precision_label(value, path, PRECISIONS)
    warnings = []
    if label == "TE_FP16":
        warnings.append("%s: TE_FP16 runs BF16 (TE_FP8=0): the Megatron-LM example scripts have no FP16 mode"
                        % path)
    return PRECISIONS[label]["TE_FP8"], warnings


def model_env(model: str, params: Mapping[str, Any], path: str) -> MegatronSettings:
    """Environment read by the model's example script for the model, parallelism and precision."""
    family = family_of(model, params)
    if family is not None:
        return family_env(model, FAMILIES[family], params, path)
    return llama_env(model, params, path)


def llama_env(model: str, params: Mapping[str, Any], path: str) -> MegatronSettings:
    """examples/llama/train_llama*.sh."""
    def at(key: str) -> str:
        return join_path(path, key)

    script = script_for_model(model, path)
    size = to_int(params.get("model_size"), at("model_size"))
    if size not in LAYERS_BY_SIZE:
        raise ConfigError(at("model_size"), "8 or 70 (the sizes the Megatron-LM llama scripts support for %s)"
                          % model, show(size))
    _te_fp8, warnings = precision_env(params.get("precision", "TE_BF16"), at("precision"))
    precision = PRECISIONS[precision_label(params.get("precision", "TE_BF16"), at("precision"), PRECISIONS)]
    recompute = to_bool(params.get("recompute", "0"), at("recompute"))
    fsdp = to_bool(params.get("fsdp", "0"), at("fsdp"))
    tp = to_int(params.get("tensor_parallelism", "1"), at("tensor_parallelism"), minimum=1)
    if fsdp and tp != 1:
        warnings.append("%s: FSDP=1 forces TP=1 in the Megatron-LM scripts; tensor_parallelism %d is ignored"
                        % (at("fsdp"), tp))
    env = {
        "TOKENIZER_MODEL": to_str(params.get("tokenizer_model", ""), at("tokenizer_model")),
        "MODEL_SIZE": str(size),
        "MBS": str(to_int(params.get("micro_batch_size"), at("micro_batch_size"), minimum=1)),
        "BS": str(to_int(params.get("batch_size"), at("batch_size"), minimum=1)),
        "TP": str(tp),
        "PP": str(to_int(params.get("pipeline_parallelism", "1"), at("pipeline_parallelism"), minimum=1)),
        "SEQ_LENGTH": str(to_int(params.get("sequence_length"), at("sequence_length"), minimum=1)),
        "RECOMPUTE": "1" if recompute else "0",
        "FSDP": "1" if fsdp else "0",
        **precision,
    }
    if recompute:
        env["RECOMPUTE_NUM_LAYERS"] = str(LAYERS_BY_SIZE[size])
    return MegatronSettings(env, script, warnings)


def family_env(model: str, family: Family, params: Mapping[str, Any], path: str) -> MegatronSettings:
    """The deepseek, mixtral and qwen scripts, with the variables the suite exports to each: MODEL_SIZE as
    written (the script reads it), the precision as the family's flags, the batch and parallel sizes under the
    family's names. deepseek and mixtral read a tokenizer.model file, which the suite downloads into
    data_cache_dir/<model>: the run expects it there."""
    def at(key: str) -> str:
        return join_path(path, key)

    label = precision_label(params.get("precision", "BF16"), at("precision"), family.precisions)
    tokenizer = to_str(params.get("tokenizer_model", ""), at("tokenizer_model"))
    warnings = []
    if family.local_tokenizer:
        warnings.append("%s: %s's script reads a tokenizer.model file: the run expects it at "
                        "<data_cache_dir>/%s/tokenizer.model (the suite downloads it from %s)"
                        % (at("tokenizer_model"), model, model, tokenizer or "the tokenizer's repository"))
    env = {
        "TOKENIZER_MODEL": tokenizer,
        "MODEL_SIZE": to_str(params.get("model_size", ""), at("model_size")),
        family.mbs: str(to_int(params.get("micro_batch_size"), at("micro_batch_size"), minimum=1)),
        family.gbs: str(to_int(params.get("batch_size"), at("batch_size"), minimum=1)),
        family.tp: str(to_int(params.get("tensor_parallelism", "1"), at("tensor_parallelism"), minimum=1)),
        family.pp: str(to_int(params.get("pipeline_parallelism", "1"), at("pipeline_parallelism"), minimum=1)),
        family.seq: str(to_int(params.get("sequence_length"), at("sequence_length"), minimum=1)),
        "RECOMPUTE": "1" if to_bool(params.get("recompute", "0"), at("recompute")) else "0",
        "FSDP": "1" if to_bool(params.get("fsdp", "0"), at("fsdp")) else "0",
        **family.precisions[label],
    }
    return MegatronSettings(env, family.script, warnings, family.iters)


def data_env(config: Mapping[str, Any], data_cache_dir: str) -> Dict[str, str]:
    """Mock runs set MOCK_DATA=1 and never DATA_PATH (later scripts mock exactly when it is unset)."""
    env = {"DATA_CACHE_PATH": data_cache_dir}
    if to_bool(config.get("mock_data", "True"), "config.mock_data"):
        env["MOCK_DATA"] = "1"
        return env
    data_path = config.get("data_path")
    if not isinstance(data_path, str) or not data_path:
        raise ConfigError("config.data_path", "the dataset prefix when config.mock_data is false",
                          "missing" if data_path is None else show(data_path))
    env["MOCK_DATA"] = "0"
    env["DATA_PATH"] = data_path
    return env


def run_lines(script: str, log_path: str) -> Tuple[List[str], str]:
    command = "bash %s" % shlex.quote(script)
    return ["%s >>%s 2>&1" % (command, shlex.quote(log_path))], command


# -- Megatron-LM's own arguments (pretrain_gpt.py), for launches that pass them directly -----------------------
# dest (the name the argument dump prints) -> (command-line option, kind). Kinds: int, float, str (a value),
# on (a store_true flag: present means True), off (a store_false flag: present means False).
ARGUMENTS: Dict[str, Tuple[str, str]] = {
    "seed": ("--seed", "int"), "micro_batch_size": ("--micro-batch-size", "int"),
    "global_batch_size": ("--global-batch-size", "int"), "seq_length": ("--seq-length", "int"),
    "max_position_embeddings": ("--max-position-embeddings", "int"), "train_iters": ("--train-iters", "int"),
    "lr": ("--lr", "float"), "min_lr": ("--min-lr", "float"), "lr_decay_style": ("--lr-decay-style", "str"),
    "lr_warmup_iters": ("--lr-warmup-iters", "int"), "weight_decay": ("--weight-decay", "float"),
    "adam_beta1": ("--adam-beta1", "float"), "adam_beta2": ("--adam-beta2", "float"),
    "init_method_std": ("--init-method-std", "float"), "recompute_granularity": ("--recompute-granularity", "str"),
    "split": ("--split", "str"), "tokenizer_type": ("--tokenizer-type", "str"),
    "tokenizer_model": ("--tokenizer-model", "str"), "data_path": ("--data-path", "str"),
    "data_cache_path": ("--data-cache-path", "str"), "mock_data": ("--mock-data", "on"),
    "save": ("--save", "str"), "load": ("--load", "str"),
    "tensor_model_parallel_size": ("--tensor-model-parallel-size", "int"),
    "pipeline_model_parallel_size": ("--pipeline-model-parallel-size", "int"),
    "context_parallel_size": ("--context-parallel-size", "int"), "sequence_parallel": ("--sequence-parallel", "on"),
    "bf16": ("--bf16", "on"), "fp16": ("--fp16", "on"), "fp8": ("--fp8-format", "str"),
    "fp32_residual_connection": ("--fp32-residual-connection", "on"),
    "use_distributed_optimizer": ("--use-distributed-optimizer", "on"),
    "accumulate_allreduce_grads_in_fp32": ("--accumulate-allreduce-grads-in-fp32", "on"),
    "overlap_grad_reduce": ("--overlap-grad-reduce", "on"), "overlap_param_gather": ("--overlap-param-gather", "on"),
    "bias_swiglu_fusion": ("--no-bias-swiglu-fusion", "off"), "bias_gelu_fusion": ("--no-bias-gelu-fusion", "off"),
    "bias_dropout_fusion": ("--no-bias-dropout-fusion", "off"),
    "masked_softmax_fusion": ("--no-masked-softmax-fusion", "off"),
    "no_persist_layer_norm": ("--no-persist-layer-norm", "on"), "apply_rope_fusion": ("--no-rope-fusion", "off"),
    "cross_entropy_loss_fusion": ("--cross-entropy-loss-fusion", "on"), "use_flash_attn": ("--use-flash-attn", "on"),
    "num_layers": ("--num-layers", "int"), "hidden_size": ("--hidden-size", "int"),
    "ffn_hidden_size": ("--ffn-hidden-size", "int"), "num_attention_heads": ("--num-attention-heads", "int"),
    "num_query_groups": ("--num-query-groups", "int"), "group_query_attention": ("--group-query-attention", "on"),
    "normalization": ("--normalization", "str"), "swiglu": ("--swiglu", "on"),
    "position_embedding_type": ("--position-embedding-type", "str"),
    "untie_embeddings_and_output_weights": ("--untie-embeddings-and-output-weights", "on"),
    "add_bias_linear": ("--disable-bias-linear", "off"), "log_throughput": ("--log-throughput", "on"),
    "log_interval": ("--log-interval", "int"), "eval_iters": ("--eval-iters", "int"),
    # the seed configs' launch on NVIDIA's images (_megatron_upstream)
    "rotary_base": ("--rotary-base", "int"), "attention_dropout": ("--attention-dropout", "float"),
    "hidden_dropout": ("--hidden-dropout", "float"), "clip_grad": ("--clip-grad", "float"),
    "transformer_impl": ("--transformer-impl", "str"), "fp8_amax_history_len": ("--fp8-amax-history-len", "int"),
    "fp8_amax_compute_algo": ("--fp8-amax-compute-algo", "str"), "recompute_method": ("--recompute-method", "str"),
    "recompute_num_layers": ("--recompute-num-layers", "int"), "use_torch_fsdp2": ("--use-torch-fsdp2", "on"),
    "gradient_accumulation_fusion": ("--no-gradient-accumulation-fusion", "off"),
    "distributed_backend": ("--distributed-backend", "str"),
    "distributed_timeout_minutes": ("--distributed-timeout-minutes", "int"),
}
OPTIONS = {option: dest for dest, (option, _kind) in ARGUMENTS.items()}


def argument_default(dest: str) -> Any:
    """What Megatron-LM's argument dump shows for an argument the command line leaves out."""
    kind = ARGUMENTS[dest][1]
    return {"on": False, "off": True}.get(kind)


def render_argv(arguments: Mapping[str, Any], path: str) -> List[str]:
    """pretrain_gpt.py's command line for arguments keyed by dest; None leaves an argument at its default."""
    argv: List[str] = []
    for dest in sorted(arguments):
        at = join_path(path, dest)
        if dest not in ARGUMENTS:
            raise ConfigError(at, "a Megatron-LM argument this collection knows (%d of them)" % len(ARGUMENTS),
                              show(dest))
        option, kind = ARGUMENTS[dest]
        value = arguments[dest]
        if kind in ("on", "off"):
            if not isinstance(value, bool):
                raise ConfigError(at, "true or false", show(value))
            if value != argument_default(dest):
                argv.append(option)
        elif value is not None:
            if isinstance(value, bool) or (kind != "str" and not isinstance(value, (int, float))):
                raise ConfigError(at, "a number" if kind != "str" else "a string", show(value))
            argv.extend([option, str(value)])
    return argv


def parse_argv(argv: List[str]) -> Dict[str, Any]:
    """The arguments a pretrain_gpt.py command line sets, keyed by dest, typed as the argument dump prints them.

    Options it does not know are kept under their own name (without dashes) with their raw value.
    """
    found: Dict[str, Any] = {}
    index = 0
    while index < len(argv):
        token = argv[index]
        option, _sep, inline = token.partition("=")
        dest = OPTIONS.get(option)
        kind = ARGUMENTS[dest][1] if dest else None
        if kind in ("on", "off"):
            found[dest] = kind == "on"
            index += 1
            continue
        if not option.startswith("--"):
            index += 1
            continue
        if inline or "=" in token:
            raw, index = inline, index + 1
        elif index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            raw, index = argv[index + 1], index + 2
        else:
            raw, index = "", index + 1
        found[dest or option[2:].replace("-", "_")] = typed_value(raw, kind)
    return found


def typed_value(raw: str, kind: Optional[str]) -> Any:
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        return raw
    return raw


def args_run_lines(argv: List[str], gpus_per_node: int, log_path: str) -> Tuple[List[str], str]:
    """torchrun + pretrain_gpt.py (NGC Megatron-LM images); the node's env gives NNODES, NODE_RANK, MASTER_*."""
    launcher = ("torchrun --nproc_per_node %d --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" "
                "--master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\"" % gpus_per_node)
    command = "%s pretrain_gpt.py %s" % (launcher, " ".join(shlex.quote(arg) for arg in argv))
    return ["%s >>%s 2>&1" % (command, shlex.quote(log_path))], command


def params_arguments(params: Mapping[str, Any], total_steps: int, path: str) -> Dict[str, Any]:
    """The Megatron-LM arguments the seed format's model_params set (batch, parallelism, length, precision)."""
    def at(key: str) -> str:
        return join_path(path, key)

    te_fp8, _warnings = precision_env(params.get("precision", "TE_BF16"), at("precision"))
    if str(params.get("precision", "")).strip().upper() in MX_PRECISIONS:
        raise ConfigError(at("precision"), "FP8 or BF16 with Megatron-LM's own arguments (%s runs through the ROCm "
                          "example script's TE_FP4/TE_FP8 recipes)" % ", ".join(MX_PRECISIONS),
                          show(params.get("precision")))
    sequence = to_int(params.get("sequence_length"), at("sequence_length"), minimum=1)
    arguments: Dict[str, Any] = {
        "micro_batch_size": to_int(params.get("micro_batch_size"), at("micro_batch_size"), minimum=1),
        "global_batch_size": to_int(params.get("batch_size"), at("batch_size"), minimum=1),
        "tensor_model_parallel_size": to_int(params.get("tensor_parallelism", "1"), at("tensor_parallelism"),
                                             minimum=1),
        "pipeline_model_parallel_size": to_int(params.get("pipeline_parallelism", "1"), at("pipeline_parallelism"),
                                               minimum=1),
        "seq_length": sequence,
        "max_position_embeddings": sequence,
        "train_iters": total_steps,
        "bf16": True,
    }
    if te_fp8 == "1":
        arguments["fp8"] = "hybrid"
    if to_bool(params.get("recompute", "0"), at("recompute")):
        arguments["recompute_granularity"] = "full"
    return arguments


def configured_arguments(config: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """config.megatron_arguments: Megatron-LM arguments by dest, passed as they are (None: not given)."""
    value = config.get("megatron_arguments")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError("config.megatron_arguments", "an object of Megatron-LM arguments (dest: value)",
                          show(value))
    return dict(value)


# -- the planner's part of the stack (was _plan's) ------------------------------------------------

def megatron_parts(ctx: Context, data_cache_dir: str) -> Dict[str, Any]:
    if ctx.total_steps < 4:
        ctx.warnings.append("config.training_iterations %d: Megatron-LM prints its summary only with at "
                            "least 4 iterations" % ctx.total_steps)
    arguments = configured_arguments(ctx.config)
    if arguments is None and ctx.gpu_vendor == _gpus.NVIDIA:
        # NVIDIA's images run upstream Megatron-LM, which has no examples/llama/train_llama3.sh
        return megatron_args_parts(ctx, data_cache_dir, _megatron_upstream.seed_arguments(
            ctx.selection.model, ctx.params, ctx.total_steps, ctx.selection.path, ctx.config, ctx.warnings))
    settings = model_env(ctx.selection.model, ctx.params, ctx.selection.path)
    ctx.warnings.extend(settings.warnings)
    if arguments is not None:
        return megatron_args_parts(ctx, data_cache_dir, arguments)
    log_dir = "%s/megatron" % ctx.run_dir
    env = dict(settings.env)
    env.update(data_env(ctx.config, data_cache_dir))
    if family_of(ctx.selection.model, ctx.params) in ("deepseek", "mixtral"):
        env["TOKENIZER_MODEL"] = "%s/%s/tokenizer.model" % (data_cache_dir, ctx.selection.model)
    env.update({settings.iterations_env: str(ctx.total_steps), "LOG_DIR": log_dir, "EXP_NAME": ctx.run_id,
                "TEE_OUTPUT": "1"})
    lines, display = run_lines(settings.script, "%s/training.log" % ctx.run_dir)
    return {"env": env, "workdir": megatron_root(ctx), "run_lines": lines, "command": display, "files": [],
            "directories": [log_dir], "trains_model": ctx.selection.model, "script_candidates": []}


def megatron_args_parts(ctx: Context, data_cache_dir: str, configured: Mapping[str, Any]) -> Dict[str, Any]:
    """config.megatron_arguments: pretrain_gpt.py under torchrun with Megatron-LM's own arguments (NGC images),
    the model_params' arguments first, the configured ones over them."""
    arguments = params_arguments(ctx.params, ctx.total_steps, ctx.selection.path)
    data = data_env(ctx.config, data_cache_dir)
    arguments.update({"mock_data": data["MOCK_DATA"] == "1", "data_cache_path": data_cache_dir})
    if "DATA_PATH" in data:
        arguments["data_path"] = data["DATA_PATH"]
    arguments.update(configured)
    argv = render_argv(arguments, "config.megatron_arguments")
    lines, display = args_run_lines(argv, ctx.options.gpus_per_node, "%s/training.log" % ctx.run_dir)
    env = {"SEQ_LENGTH": str(arguments.get("seq_length", "")), "TOTAL_ITERS": str(ctx.total_steps)}
    return {"env": env, "workdir": megatron_root(ctx), "run_lines": lines, "command": display, "files": [],
            "directories": [], "trains_model": ctx.selection.model, "script_candidates": [],
            "megatron_argv": argv}


def megatron_root(ctx: Context) -> str:
    """The Megatron-LM checkout in the image: config.megatron_root (the suite's key), else the ROCm images'."""
    root = ctx.config.get("megatron_root", WORKDIR)
    if not isinstance(root, str) or not root.startswith("/") or any(ch.isspace() for ch in root):
        raise ConfigError("config.megatron_root", "an absolute path in the image without spaces", show(root))
    return root.rstrip("/") or "/"
