# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""TorchTitan, launched as the validation suite launches it.

The suite (ROCm/cvs, lib/training/torchtitan) writes a TOML job config from the model's parameters
(``use_generated_config``, the default) or names TorchTitan's own one, and starts on every node
``torchrun --nnodes N --node_rank=R --nproc_per_node G --rdzv_id 101 --rdzv_backend c10d --rdzv_endpoint
ADDR:29500 --role rank --tee 3 --module torchtitan.train --job.config_file FILE`` in ``torchtitan_root`` (Primus's
``third_party/torchtitan`` in its images). Every rank prints TorchTitan's metrics line (``step: N  loss: ...
memory: ...GiB(..%)  tps: ...  tflops: ...  mfu: ...%``), which ``_logs`` parses.
"""
from __future__ import annotations

import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._config import to_bool, to_int, to_str
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Context

WORKDIR = "/workspace/Primus/third_party/torchtitan"
DEFAULT_MASTER_PORT = 29500
ENTRY_MODULE = "torchtitan.train"


class Model(NamedTuple):
    module: str        # TorchTitan's model name ([model] name)
    flavor: str        # its flavor ([model] flavor)
    tokenizer: str     # the Hugging Face repository of its tokenizer
    assets: str        # the assets' folder under ./assets/hf/


# The suite's registry (cvs lib/training/torchtitan/model_registry.py): its model names -> TorchTitan's.
MODELS = {
    "llama3_1_8b": Model("llama3", "8B", "meta-llama/Llama-3.1-8B", "llama3"),
    "llama3_1_70b": Model("llama3", "70B", "meta-llama/Llama-3.1-70B", "llama3"),
    "llama3_1_405b": Model("llama3", "405B", "meta-llama/Llama-3.1-405B", "llama3"),
    "llama3_3_70b": Model("llama3", "70B", "meta-llama/Llama-3.3-70B-Instruct", "llama3"),
    "deepseek_v2_lite": Model("deepseek", "LITE", "deepseek-ai/DeepSeek-V2-Lite", "deepseek"),
    "deepseek_v3_16b": Model("deepseek_v3", "16B", "deepseek-ai/DeepSeek-V3", "deepseek"),
    "qwen3_32b": Model("qwen3", "32B", "Qwen/Qwen2.5-32B", "qwen"),
    "mixtral_8x22b": Model("mixtral", "8X22B", "mistralai/Mixtral-8x22B-v0.1", "mixtral"),
}
# precision -> float8 training ([quantize.linear.float8]); the weights stay bfloat16 either way.
PRECISIONS = {"bf16": False, "fp8": True}
DEFAULTS = {"lr": "3e-4", "warmup_steps": "200", "activation_checkpointing": "selective", "compile": "false",
            "dataset": "c4", "sequence_length": "8192", "data_parallel_shard_degree": "-1",
            "tensor_parallel_degree": "1", "pipeline_parallel_degree": "1", "context_parallel_degree": "1",
            "expert_parallel_degree": "1", "enable_async_tensor_parallel": "false",
            "precompute_float8_dynamic_scale_for_fsdp": "false"}
PARALLEL = ("data_parallel_shard_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
            "context_parallel_degree", "expert_parallel_degree")
# What the suite exports before torchrun (ROCm's fine-grained PCIe memory, the allocator's segments).
ENV = {"HSA_FORCE_FINE_GRAIN_PCIE": "1", "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"}


def model_of(name: str, path: str) -> Model:
    key = name.lower().replace("-", "_").replace(".", "_")
    if key not in MODELS:
        raise ConfigError(path, "a model the suite's TorchTitan registry knows (%s); the suite itself would train "
                          "llama3_3_70b in place of %s" % (", ".join(MODELS), name), show(name))
    return MODELS[key]


def precision_of(params: Mapping[str, Any], path: str) -> bool:
    """The sweep's precision; the legacy layout's enable_float8 where it names none."""
    if "precision" not in params and "enable_float8" in params:
        return to_bool(params["enable_float8"], join_path(path, "enable_float8"))
    value = to_str(params.get("precision", "bf16"), join_path(path, "precision")).strip().lower()
    if value not in PRECISIONS:
        raise ConfigError(join_path(path, "precision"), "bf16 or fp8 (the precisions TorchTitan's float8 training "
                          "offers; MXFP formats are Megatron-LM's)", show(params.get("precision")))
    return PRECISIONS[value]


def settings(params: Mapping[str, Any], path: str) -> Dict[str, Any]:
    """The model parameters with the suite's defaults, each checked."""
    values = {key: params.get(key, default) for key, default in DEFAULTS.items()}
    checked: Dict[str, Any] = {}
    for key in PARALLEL:
        checked[key] = to_int(values[key], join_path(path, key), minimum=-1)
    for key in ("compile", "enable_async_tensor_parallel", "precompute_float8_dynamic_scale_for_fsdp"):
        checked[key] = to_bool(values[key], join_path(path, key))
    checked["sequence_length"] = to_int(values["sequence_length"], join_path(path, "sequence_length"), minimum=1)
    checked["warmup_steps"] = to_int(values["warmup_steps"], join_path(path, "warmup_steps"), minimum=0)
    checked["lr"] = float(to_str(values["lr"], join_path(path, "lr")))
    for key in ("dataset", "activation_checkpointing"):
        checked[key] = to_str(values[key], join_path(path, key))
    checked["micro_batch_size"] = to_int(params.get("micro_batch_size", "1"), join_path(path, "micro_batch_size"),
                                         minimum=1)
    checked["global_batch_size"] = to_int(params.get("global_batch_size", "32"),
                                          join_path(path, "global_batch_size"), minimum=1)
    return checked


def check_parallel(values: Mapping[str, Any], world: int, path: str) -> None:
    """TorchTitan's ParallelDims: dp_shard x cp x tp x pp is the world (dp_shard -1: what is left)."""
    product = 1
    for key in PARALLEL[1:4]:
        product *= values[key]
    shard = values["data_parallel_shard_degree"]
    if shard == -1:
        if world % product:
            raise ConfigError(join_path(path, "tensor_parallel_degree"), "tp x pp x cp dividing the run's %d GPUs"
                              % world, str(product))
        return
    if shard * product != world:
        raise ConfigError(join_path(path, "data_parallel_shard_degree"),
                          "dp_shard x tp x pp x cp = the run's %d GPUs (TorchTitan's parallel dims)" % world,
                          "%d x %d = %d" % (shard, product, shard * product))


def check_parallelism(ctx: Context, nnodes: int, gpus: int) -> None:
    """The planner's check of a job of ``nnodes`` nodes (each job of a run is checked before anything runs)."""
    model_of(ctx.selection.model, ctx.selection.path)
    check_parallel(settings(ctx.params, ctx.selection.path), nnodes * gpus, ctx.selection.path)


def toml(model: Model, values: Mapping[str, Any], fp8: bool, steps: int) -> str:
    """The job config the suite generates, section by section."""
    def boolean(value: bool) -> str:
        return "true" if value else "false"

    sections = [
        ("model", [("name", '"%s"' % model.module), ("flavor", '"%s"' % model.flavor),
                   ("hf_assets_path", '"./assets/hf/%s/%s"' % (model.assets, model.tokenizer.split("/")[-1]))]),
        ("training", [("dataset", '"%s"' % values["dataset"]), ("local_batch_size", values["micro_batch_size"]),
                      ("global_batch_size", values["global_batch_size"]), ("seq_len", values["sequence_length"]),
                      ("steps", steps), ("dtype", '"bfloat16"')]),
        ("optimizer", [("lr", values["lr"])]),
        ("lr_scheduler", [("warmup_steps", values["warmup_steps"])]),
        ("parallelism", [(key, values[key]) for key in PARALLEL]
         + [("enable_async_tensor_parallel", boolean(values["enable_async_tensor_parallel"]))]),
        ("activation_checkpoint", [("mode", '"%s"' % values["activation_checkpointing"])]),
        ("compile", [("enable", boolean(values["compile"]))]),
        ("quantize.linear.float8", [("enable_fsdp_float8_all_gather", boolean(fp8)),
                                    ("precompute_float8_dynamic_scale_for_fsdp",
                                     boolean(values["precompute_float8_dynamic_scale_for_fsdp"])),
                                    ("filter_fqns", '["output"]')]),
        ("comm", [("init_timeout_seconds", 3600)]),
    ]
    return "".join("[%s]\n%s\n" % (name, "".join("%s = %s\n" % pair for pair in pairs)) for name, pairs in sections)


def root(config: Mapping[str, Any]) -> str:
    value = config.get("torchtitan_root", WORKDIR)
    if not isinstance(value, str) or not value.startswith("/") or any(ch.isspace() for ch in value):
        raise ConfigError("config.torchtitan_root", "TorchTitan's checkout in the image (an absolute path without "
                          "spaces)", show(value))
    return value.rstrip("/") or "/"


def torchrun_argv(gpus: int, nnodes: Any, rank: Any, endpoint: str, config_file: str) -> List[str]:
    return ["torchrun", "--nnodes", str(nnodes), "--node_rank=%s" % rank, "--nproc_per_node", str(gpus),
            "--rdzv_id", "101", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--role", "rank",
            "--tee", "3", "--module", ENTRY_MODULE, "--job.config_file", config_file]


def run_lines(gpus: int, config_file: str, extra: List[str], log_path: str) -> Tuple[List[str], str]:
    """The node's line: NNODES, NODE_RANK, MASTER_ADDR and MASTER_PORT come from the container's environment."""
    argv = torchrun_argv(gpus, "$NNODES", "$NODE_RANK", "$MASTER_ADDR:$MASTER_PORT", config_file) + extra
    command = " ".join('"%s"' % arg if "$" in arg else shlex.quote(arg) for arg in argv)
    return ["%s >>%s 2>&1" % (command, shlex.quote(log_path))], command


def torchtitan_parts(ctx: Context, _data_cache_dir: str = "") -> Dict[str, Any]:
    """The planner's entry (STACK_PARTS): the job config and the torchrun line of every node."""
    path = ctx.selection.path
    model = model_of(ctx.selection.model, path)
    fp8 = precision_of(ctx.params, path)
    values = settings(ctx.params, path)
    workdir = root(ctx.config)
    files, extra = [], []
    if to_bool(ctx.config.get("use_generated_config", "True"), "config.use_generated_config"):
        config_file = "%s/torchtitan/run_config.toml" % ctx.run_dir
        files.append({"path": config_file, "mode": "0644", "content": toml(model, values, fp8, ctx.total_steps)})
    else:
        # TorchTitan's own file, as the suite names it; the step count the run judges on the command line
        config_file = "./train_configs/%s_%s.toml" % (model.module, model.flavor)
        extra = ["--training.steps", str(ctx.total_steps)]
    lines, command = run_lines(ctx.options.gpus_per_node, config_file, extra, "%s/training.log" % ctx.run_dir)
    env = dict(ENV, PYTHONPATH=workdir)
    return {"env": env, "workdir": workdir, "run_lines": lines, "command": command, "files": files,
            "directories": ["%s/torchtitan" % ctx.run_dir], "trains_model": ctx.selection.model,
            "script_candidates": [],
            "torchtitan": {"config_file": config_file, "model": model.module, "flavor": model.flavor,
                           "float8": fp8, "parallel": {key: values[key] for key in PARALLEL}}}
