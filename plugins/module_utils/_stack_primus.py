# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Primus (AMD's Megatron-based trainer): its experiment file, its launch and where it writes.

Primus reads an experiment YAML (``EXP=...``): ``modules.pre_trainer`` names the backend (``framework:
megatron``), the module config (``pre_trainer.yaml``), the model file (``llama3.1_8B.yaml``) and
``overrides``, which are Megatron-LM arguments by name. ``examples/run_pretrain.sh`` starts torchrun with
``NNODES``, ``NODE_RANK``, ``GPUS_PER_NODE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the environment and
tees the output to ``TRAIN_LOG``. Its iteration lines are parsed by ``_logs`` (Megatron-style, with
``instant/average`` pairs); its argument dump is Megatron-LM's own (Primus wraps Megatron's
``validate_args``).
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Context

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core on the controller
    yaml = None

WORKDIR = "/workspace/Primus"
LAUNCHER = "examples/run_pretrain.sh"
DEFAULT_MASTER_PORT = 1234
# The model keys of the seed configs -> Primus's model files (primus/configs/models/megatron/).
MODEL_FILES = {"llama3_1_8b": "llama3.1_8B.yaml", "llama3_1_70b": "llama3.1_70B.yaml",
               "llama3_1_405b": "llama3.1_405B.yaml", "llama3_8b": "llama3_8B.yaml", "llama3_70b": "llama3_70B.yaml"}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def model_file(model: str, path: str) -> str:
    key = model.lower().replace("-", "_").replace(".", "_")
    if key not in MODEL_FILES:
        raise ConfigError(path, "a model Primus has a model file for (%s)" % ", ".join(sorted(MODEL_FILES)),
                          show(model))
    return MODEL_FILES[key]


def overrides(params: Mapping[str, Any], config: Mapping[str, Any], total_steps: int, path: str,
              data_cache_dir: str) -> Dict[str, Any]:
    """``modules.pre_trainer.overrides``: the model_params' arguments, mock data unless config.data_path, then
    config.megatron_arguments over them."""
    values = _stack_megatron.params_arguments(params, total_steps, path)
    data = _stack_megatron.data_env(config, data_cache_dir)
    values["mock_data"] = data["MOCK_DATA"] == "1"
    values["data_cache_path"] = data_cache_dir
    if "DATA_PATH" in data:
        values["train_data_path"] = data["DATA_PATH"]
    values.update(_stack_megatron.configured_arguments(config) or {})
    for key in values:
        if not isinstance(key, str) or not _KEY.match(key):
            raise ConfigError(join_path("config.megatron_arguments", str(key)), "a Megatron-LM argument name",
                              show(key))
    return values


def experiment(run_id: str, model: str, values: Mapping[str, Any]) -> Dict[str, Any]:
    return {
        "work_group": "clusterval",
        "user_name": "clusterval",
        "exp_name": run_id,
        "workspace": "./output",
        "modules": {"pre_trainer": {"framework": "megatron", "config": "pre_trainer.yaml", "model": model,
                                    "overrides": dict(values)}},
    }


def render(document: Mapping[str, Any]) -> str:
    if yaml is None:
        raise RuntimeError("PyYAML is needed on the controller to write Primus's experiment file (it comes with "
                           "ansible-core)")
    return "# Primus experiment written by clusterval.training\n" + yaml.safe_dump(
        plain(document), sort_keys=False, default_flow_style=False, width=100000)


def plain(value: Any) -> Any:
    """Builtin types all the way down: values templated by Ansible are tagged subclasses of str, int, float
    (and bool is an int), which PyYAML's safe dumper refuses."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def read_overrides(text: str) -> Dict[str, Any]:
    """The overrides of a rendered experiment file: what Primus is told, read back from the file itself."""
    if yaml is None:
        raise RuntimeError("PyYAML is needed to read a Primus experiment file")
    document = yaml.safe_load(text) or {}
    module = ((document.get("modules") or {}).get("pre_trainer") or {})
    return dict(module.get("overrides") or {})


def run_lines(exp_path: str, train_log: str, gpus_per_node: int, log_path: str) -> Tuple[List[str], str]:
    command = "EXP=%s TRAIN_LOG=%s GPUS_PER_NODE=%d bash %s" % (
        shlex.quote(exp_path), shlex.quote(train_log), gpus_per_node, LAUNCHER)
    return ["%s >>%s 2>&1" % (command, shlex.quote(log_path))], command


# -- the planner's part of the stack (was _plan's) ------------------------------------------------

def primus_parts(ctx: Context, data_cache_dir: str) -> Dict[str, Any]:
    """Primus: the experiment file (model file and Megatron-LM overrides) and examples/run_pretrain.sh."""
    path = ctx.selection.path
    model = model_file(ctx.selection.model, path)
    values = overrides(ctx.params, ctx.config, ctx.total_steps, path, data_cache_dir)
    exp_path = "%s/primus_experiment.yaml" % ctx.run_dir
    content = render(experiment(ctx.run_id, model, values))
    lines, display = run_lines(exp_path, "%s/primus/train.log" % ctx.run_dir, ctx.options.gpus_per_node,
                               "%s/training.log" % ctx.run_dir)
    root = ctx.config.get("primus_root", WORKDIR)
    if not isinstance(root, str) or not root.startswith("/") or any(ch.isspace() for ch in root):
        raise ConfigError("config.primus_root", "an absolute path in the image without spaces", show(root))
    env = {"SEQ_LENGTH": str(values.get("seq_length", "")), "TOTAL_ITERS": str(ctx.total_steps)}
    return {"env": env, "workdir": root.rstrip("/") or "/", "run_lines": lines, "command": display,
            "files": [{"path": exp_path, "mode": "0644", "content": content}],
            "directories": ["%s/primus" % ctx.run_dir], "trains_model": ctx.selection.model,
            "script_candidates": []}
