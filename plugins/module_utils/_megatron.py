# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Megatron-LM (ROCm images): the example script, its environment and the launch line."""
from __future__ import annotations

import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._config import to_bool, to_int, to_str
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

WORKDIR = "/workspace/Megatron-LM"
DEFAULT_MASTER_PORT = 6000
SCRIPTS = {
    "llama3": "examples/llama/train_llama3.sh",
    "llama2": "examples/llama/train_llama2.sh",
}
LAYERS_BY_SIZE = {8: 32, 70: 80}
# TE_* are the seed configs' labels; FP8 and BF16 the versioned format's.
PRECISIONS = {"TE_FP8": "1", "TE_BF16": "0", "TE_FP16": "0", "FP8": "1", "BF16": "0"}


class MegatronSettings(NamedTuple):
    env: Dict[str, str]
    script: str
    warnings: List[str]


def script_for_model(model: str, path: str) -> str:
    family = model.lower().replace("_", "").replace("-", "").replace(".", "")
    for prefix, script in SCRIPTS.items():
        if family.startswith(prefix):
            return script
    raise ConfigError(path, "a model of a family with a Megatron-LM example script (%s)" % ", ".join(SCRIPTS),
                      show(model))


def precision_env(value: Any, path: str) -> Tuple[str, List[str]]:
    label = to_str(value, path).strip().upper()
    if label not in PRECISIONS:
        raise ConfigError(path, "one of %s" % ", ".join(PRECISIONS), show(value))
    warnings = []
    if label == "TE_FP16":
        warnings.append("%s: TE_FP16 runs BF16 (TE_FP8=0): the Megatron-LM example scripts have no FP16 mode"
                        % path)
    return PRECISIONS[label], warnings


def model_env(model: str, params: Mapping[str, Any], path: str) -> MegatronSettings:
    """Environment read by examples/llama/train_llama*.sh for the model, parallelism and precision."""
    def at(key: str) -> str:
        return join_path(path, key)

    size = to_int(params.get("model_size"), at("model_size"))
    if size not in LAYERS_BY_SIZE:
        raise ConfigError(at("model_size"), "8 or 70 (the sizes the Megatron-LM llama scripts support)", show(size))
    te_fp8, warnings = precision_env(params.get("precision", "TE_BF16"), at("precision"))
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
        "TE_FP8": te_fp8,
    }
    if recompute:
        env["RECOMPUTE_NUM_LAYERS"] = str(LAYERS_BY_SIZE[size])
    return MegatronSettings(env, script_for_model(model, path), warnings)


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
