# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The validation suite's versioned format (``schema_version: 1``) in the engine's shape.

A versioned config names one framework (``jaxmaxtext``, ``megatron_single``, ``megatron_distributed``),
its paths, its container and a list of sweeps (runs with their own settings). One sweep is planned
per run: ``to_engine`` turns the config and that sweep into the legacy shape (``config`` and
``model_params.<mode>.<model>.<gpu_arch>``), so both formats go through the same planner, and
``origin`` maps the engine's JSON paths back to the config's, so errors name what the user wrote.
docs/config.md ("The suite's versioned format") lists every key and where it goes.
"""
from __future__ import annotations

import operator
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._config import (
    is_documentation_key, require_dict, to_bool, type_name, without_documentation)
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._stacks import MAXTEXT, MEGATRON, TORCHTITAN

SCHEMA_VERSION = 1
FRAMEWORKS = {"jaxmaxtext": MAXTEXT, "megatron_single": MEGATRON, "megatron_distributed": MEGATRON,
              "torchtitan_single": TORCHTITAN, "torchtitan_distributed": TORCHTITAN}
# A combination's batch and precision -> the engine's model_params keys, per stack.
COMBINATION_KEYS = {MEGATRON: {"micro_batch_size": "micro_batch_size", "global_batch_size": "batch_size",
                               "precision": "precision"},
                    TORCHTITAN: {"micro_batch_size": "micro_batch_size", "global_batch_size": "global_batch_size",
                                 "precision": "precision"}}
PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.\-]+)\}")
USER_ID = "user-id"
# config keys of the engine for the suite's nccl block (cvs exports only the first four; tc, sl and
# gid_index are RCCL settings all the same).
NCCL_KEYS = {"ib_hca_list": "nccl_ib_hca_list", "ib_hca": "nccl_ib_hca", "socket_ifname": "nccl_socket_ifname",
             "gloo_socket_ifname": "gloo_socket_ifname", "ib_tc": "nccl_ib_tc", "ib_sl": "nccl_ib_sl",
             "ib_gid_index": "nccl_ib_gid_index"}
JAX_TIMEOUTS = {"initialization_timeout_seconds": "JAX_DISTRIBUTED_INITIALIZATION_TIMEOUT_SECONDS",
                "heartbeat_timeout_seconds": "JAX_DISTRIBUTED_HEARTBEAT_TIMEOUT_SECONDS"}
# The engine derives these from the hosts; the suite writes "auto".
AUTO = "auto"
# What the suite's keys that the engine does not use mean for the run.
IGNORED = {
    "training.convergence": "the verdict judges convergence by the loss over the run, and the threshold "
                            "file by final_loss and loss_decreased",
    "training.checkpoint_resume": "enabled is false: the suite skips its checkpoint save-and-resume test too",
    "training.error_patterns": "clusterval.training's failure signatures apply (docs/failures.md)",
    "training.verify_dmesg": "preflight checks the nodes",
    "training.tokenizer.hf_model_id": "tokenizers are not downloaded; tokenizer_path is passed to MaxText",
    "model.precision": "the sweep's settings decide the precision",
    "container.runtime.name": "the container runs with Docker",
}
# __maxtext_version<=26.3__train_script: the train script of the images whose MaxText version satisfies it.
VERSIONED_SCRIPT = re.compile(r"^__maxtext_version(<=|>=|==|<|>)([0-9]+(?:\.[0-9]+)*)__train_script$")
IMAGE_VERSION = re.compile(r"maxtext-v([0-9]+(?:\.[0-9]+)*)")
VERSION_TESTS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt}
RUNTIME_ARGS = ("network", "ipc", "privileged", "shm-size", "ulimit", "volumes", "devices")


class Versioned(NamedTuple):
    """A versioned config in the engine's shape, and what the planner needs beyond it."""
    document: Dict[str, Any]
    sweep: str
    cell: str
    gpus_per_node: Optional[int]
    enforce_thresholds: bool
    threshold_json: Optional[str]
    scaling_baseline: Optional[Dict[str, float]]
    origins: List[Tuple[str, str]]
    warnings: List[str]
    loss_curve: Optional[Dict[str, Any]] = None


def is_versioned(data: Any) -> bool:
    return isinstance(data, dict) and "schema_version" in data


def check_version(data: Mapping[str, Any]) -> str:
    """The engine's framework of a versioned config; anything else is refused by its path."""
    if data["schema_version"] != SCHEMA_VERSION or isinstance(data["schema_version"], bool):
        raise ConfigError("schema_version", "1 (the versions clusterval.training reads)", show(data["schema_version"]))
    framework = data.get("framework")
    if framework not in FRAMEWORKS:
        raise ConfigError("framework", "one of %s for schema_version 1" % ", ".join(FRAMEWORKS), show(framework))
    needed = ("paths", "training", "container", "model") if FRAMEWORKS[framework] == MAXTEXT else \
        ("config", "model_params", "container", "sweep")
    for name in needed:
        require_dict(data, name, "")
    return FRAMEWORKS[framework]


def to_engine(data: Mapping[str, Any], sweep: Optional[str] = None) -> Versioned:
    """The config with ``sweep`` (default: the first enabled one) in the engine's shape."""
    framework = check_version(data)
    resolved = resolve_paths(data)
    if framework == MAXTEXT:
        return maxtext_document(resolved, sweep)
    return sweep_document(resolved, sweep, framework)


def origin(path: str, origins: Sequence[Tuple[str, str]]) -> str:
    """The config's path for an engine path (longest matching prefix)."""
    for engine, written in sorted(origins, key=lambda pair: -len(pair[0])):
        if path == engine or path.startswith(engine + ".") or path.startswith(engine + "["):
            return written + path[len(engine):]
    return path


# -- placeholders -------------------------------------------------------------------------------

def resolve_paths(data: Mapping[str, Any]) -> Dict[str, Any]:
    """``{name}`` inside ``paths`` refers to another path; ``{paths.name}`` anywhere to a path.

    ``{user-id}`` stays for the engine, which knows the remote user. A reference to no path is an error
    (the suite leaves it in the string).
    """
    paths = {key: value for key, value in require_dict(data, "paths", "", {}).items() if not is_documentation_key(key)}
    for key, value in paths.items():
        if not isinstance(value, str):
            raise ConfigError(join_path("paths", key), "a path (a string)", type_name(value))
    for dummy in range(len(paths) + 1):
        expanded = {key: expand(value, paths, join_path("paths", key), bare=True) for key, value in paths.items()}
        if expanded == paths:
            break
        paths = expanded
    else:
        raise ConfigError("paths", "paths that do not refer to each other in a loop", show(sorted(paths)))
    document = expand_everywhere(dict(data), paths, "")
    if "paths" in document:
        document["paths"] = dict(document["paths"], **paths)
    return document


def expand(value: str, paths: Mapping[str, str], path: str, bare: bool) -> str:
    def replace(match: "re.Match[str]") -> str:
        name = match.group(1)
        if name == USER_ID:
            return match.group(0)
        key = name[len("paths."):] if name.startswith("paths.") else name if bare else None
        if key is None:
            return match.group(0)
        if key not in paths:
            raise ConfigError(path, "a reference to one of paths.%s" % ", paths.".join(sorted(paths)),
                              show(match.group(0)))
        return paths[key]
    return PLACEHOLDER.sub(replace, value)


def expand_everywhere(value: Any, paths: Mapping[str, str], path: str) -> Any:
    if isinstance(value, dict):
        return {key: expand_everywhere(item, paths, join_path(path, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_everywhere(item, paths, join_path(path, index)) for index, item in enumerate(value)]
    if isinstance(value, str) and "{paths." in value:
        return expand(value, paths, path, bare=False)
    return value


# -- sweeps -------------------------------------------------------------------------------------

def choose(names: Sequence[str], enabled: Sequence[str], wanted: Optional[str], path: str,
           warnings: List[str]) -> str:
    if wanted is not None:
        if wanted not in names:
            raise ConfigError(path, "a sweep of the config (%s)" % ", ".join(names), "%s (-e training_sweep)" % show(wanted))
        return wanted
    if not enabled:
        raise ConfigError(path, "at least one sweep", "none enabled")
    if len(enabled) > 1:
        warnings.append("%s: %d sweeps enabled, this run is %s; run the others with -e training_sweep=<name> "
                        "(%s)" % (path, len(enabled), enabled[0], ", ".join(enabled[1:])))
    return enabled[0]


def enabled_names(names: List[str], listed: Any, path: str) -> List[str]:
    if listed is None or listed == []:
        return names
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        raise ConfigError(path, "a list of sweep names", type_name(listed))
    unknown = [name for name in listed if name not in names]
    if unknown:
        raise ConfigError(path, "names of sweeps of the config (%s)" % ", ".join(names), show(unknown))
    return list(listed)


# -- container ----------------------------------------------------------------------------------

def container_settings(container: Mapping[str, Any], origins: List[Tuple[str, str]],
                       warnings: List[str]) -> Dict[str, Any]:
    """container.name/image/runtime.args as the engine's config keys."""
    lifetime = container.get("lifetime", "per_run")
    if lifetime != "per_run":
        warnings.append("container.lifetime: %s ignored: every run starts its own containers and removes them "
                        "(per_run)" % show(lifetime))
    runtime = require_dict(container, "runtime", "container", {})
    if runtime.get("name", "docker") != "docker":
        warnings.append("container.runtime.name: %s ignored (%s)" % (show(runtime["name"]),
                                                                     IGNORED["container.runtime.name"]))
    args = require_dict(runtime, "args", "container.runtime", {})
    settings: Dict[str, Any] = {"container_image": container.get("image"), "container_name": container.get("name")}
    origins += [("config.container_image", "container.image"), ("config.container_name", "container.name"),
                ("config.shm_size", 'container.runtime.args["shm-size"]')]
    if "shm-size" in args:
        settings["shm_size"] = args["shm-size"]
    container_config: Dict[str, Any] = {"volume_dict": volume_dict(args.get("volumes", []))}
    origins.append(("config.container_config.volume_dict", "container.runtime.args.volumes"))
    if "devices" in args:
        container_config["device_list"] = args["devices"]
        origins.append(("config.container_config.device_list", "container.runtime.args.devices"))
    settings["container_config"] = container_config
    for key in sorted(args):
        note = runtime_arg_note(key, args[key])
        if note:
            warnings.append("%s: ignored (%s)" % (join_path("container.runtime.args", key), note))
    return settings


def runtime_arg_note(key: str, value: Any) -> Optional[str]:
    if key in ("network", "ipc") and value != "host":
        return "training containers use the host's %s" % ("network" if key == "network" else "IPC namespace")
    if key == "privileged" and value:
        return "training containers are not privileged: they get the configured devices and the IPC_LOCK " \
               "and SYS_PTRACE capabilities"
    if key == "ulimit":
        return "the container's ulimits are memlock unlimited and stack 64 MiB; set container_spec_overrides.ulimits"
    if key not in RUNTIME_ARGS and not is_documentation_key(key):
        return "clusterval.training does not use it"
    return None


def volume_dict(volumes: Any) -> Dict[str, str]:
    if not isinstance(volumes, list):
        raise ConfigError("container.runtime.args.volumes", "a list of host:container paths", type_name(volumes))
    mapping: Dict[str, str] = {}
    for index, volume in enumerate(volumes):
        parts = volume.split(":") if isinstance(volume, str) else []
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ConfigError(join_path("container.runtime.args.volumes", index),
                              "host:container (volume options are not supported)", show(volume))
        mapping[parts[0]] = parts[1]
    return mapping


# -- MaxText ------------------------------------------------------------------------------------

def maxtext_document(data: Mapping[str, Any], wanted: Optional[str]) -> Versioned:
    warnings: List[str] = []
    origins: List[Tuple[str, str]] = []
    training = require_dict(data, "training", "")
    model = require_dict(data, "model", "")
    if str(model.get("remote", 0)) not in ("0", "False", "false"):
        raise ConfigError("model.remote", "0 (remote models are not supported)", show(model.get("remote")))
    model_id = model.get("id")
    if not isinstance(model_id, str) or not model_id:
        raise ConfigError("model.id", "a model name", show(model_id))
    sweeps = training.get("sweeps") or [{"name": "default", "maxtext_overrides": {}}]
    if not isinstance(sweeps, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in sweeps):
        raise ConfigError("training.sweeps", "a list of sweeps, each with a name", type_name(sweeps))
    names = [s["name"] for s in sweeps]
    enabled = enabled_names(names, training.get("enabled_sweep_list"), "training.enabled_sweep_list")
    name = choose(names, enabled, wanted, "training.sweeps", warnings)
    index = names.index(name)
    overrides = require_dict(sweeps[index], "maxtext_overrides", join_path("training.sweeps", index), {})
    distributed = to_bool(training.get("distributed", True), "training.distributed")
    mode = "multi_node" if distributed else "single_node"
    gpu_arch = str(data.get("gpu_arch") or "gpu")
    params = dict(require_dict(training, "maxtext_config", "training", {}))
    params.update(overrides)
    tokenizer = training.get("tokenizer")
    if isinstance(tokenizer, dict) and tokenizer.get("tokenizer_path"):
        params["tokenizer_path"] = tokenizer["tokenizer_path"]
    params_path = join_path(join_path(join_path("model_params", mode), model_id), gpu_arch)
    origins += [(params_path, "training.maxtext_config")]
    origins += [(join_path(params_path, key), join_path(join_path(join_path("training.sweeps", index),
                                                                  "maxtext_overrides"), key)) for key in overrides]
    config = maxtext_config(data, training, origins, warnings)
    refuse_checkpoint_resume(training)
    warn_unused(data, training, warnings)
    document = {"config": config, "model_params": {mode: {model_id: {gpu_arch: params}}}}
    dataset = str(params.get("dataset_type", "synthetic"))
    config["mock_data"] = "True" if dataset == "synthetic" else "False"
    gpus = training.get("gpus_per_node")
    return Versioned(document, name, name, gpus if isinstance(gpus, int) else None,
                     thresholds_enforced(data), threshold_json(data), scaling_baseline(training, "training"),
                     origins, warnings, loss_curve(training, "training.loss_curve"))


def maxtext_config(data: Mapping[str, Any], training: Mapping[str, Any], origins: List[Tuple[str, str]],
                   warnings: List[str]) -> Dict[str, Any]:
    paths = data["paths"]
    config: Dict[str, Any] = {"framework": MAXTEXT}
    config.update(container_settings(require_dict(data, "container", ""), origins, warnings))
    simple = {"training_steps": ("steps", "30"), "enable_checkpointing": ("enable_checkpointing", False),
              "distributed_training": ("distributed", True), "nic_type": ("nic_type", None),
              "rdma_lib": ("rdma_lib", None), "xla_flags": ("xla_flags", None)}
    for key, (source, default) in simple.items():
        if source in training or default is not None:
            config[key] = training.get(source, default)
            origins.append((join_path("config", key), join_path("training", source)))
    scripts = train_scripts(data, training)
    if scripts:
        config["train_script_paths"] = scripts
        origins.append(("config.train_script_paths", "training.train_script_paths"))
    for key in ("log_dir", "hf_token_file"):
        config[key] = paths.get(key)
        origins.append((join_path("config", key), join_path("paths", key)))
    cache = "data_cache_dir" if "data_cache_dir" in paths else "models_dir"
    config["data_cache_dir"] = paths.get(cache)
    origins.append(("config.data_cache_dir", join_path("paths", cache)))
    env = {key: value for key, value in require_dict(training, "env_vars", "training", {}).items()
           if not (key == "NNODES" and value == AUTO)}
    config["env_vars"] = env
    origins.append(("config.env_vars", "training.env_vars"))
    for key, value in require_dict(training, "nccl", "training", {}).items():
        if key in NCCL_KEYS:
            config[NCCL_KEYS[key]] = value
            origins.append((join_path("config", NCCL_KEYS[key]), join_path("training.nccl", key)))
        elif not is_documentation_key(key):
            warnings.append("%s: ignored (clusterval.training does not use it)" % join_path("training.nccl", key))
    config["container_config"]["env_dict"] = jax_distributed(training, config, origins, warnings)
    return config


def train_scripts(data: Mapping[str, Any], training: Mapping[str, Any]) -> Optional[List[Any]]:
    """``train_script_paths`` after the script of the ``__maxtext_version<op><version>__train_script`` key that
    the image's MaxText version (``maxtext-v26.4`` in its tag) satisfies; with no version in the tag, every
    versioned script after them. The launch script runs the first one the image has."""
    listed = training.get("train_script_paths")
    if listed is not None and not isinstance(listed, list):
        raise ConfigError("training.train_script_paths", "a list of paths in the image", type_name(listed))
    versioned = [(match.group(1), version_tuple(match.group(2)), value) for match, value in
                 ((VERSIONED_SCRIPT.match(key), value) for key, value in data.items()) if match]
    if not versioned:
        return listed
    found = IMAGE_VERSION.search(str(require_dict(data, "container", "").get("image", "")))
    image = version_tuple(found.group(1)) if found else None
    if image is None:
        return list(dict.fromkeys(list(listed or []) + [path for dummy, dummy, path in versioned]))
    chosen = [path for op, version, path in versioned if VERSION_TESTS[op](image, version)]
    return list(dict.fromkeys(chosen + list(listed or [])))


def version_tuple(text: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def jax_distributed(training: Mapping[str, Any], config: Dict[str, Any], origins: List[Tuple[str, str]],
                    warnings: List[str]) -> Dict[str, Any]:
    env: Dict[str, Any] = {}
    for key, value in require_dict(training, "jax_distributed", "training", {}).items():
        path = join_path("training.jax_distributed", key)
        if key == "coordinator_ip":
            if value not in (AUTO, ""):
                config["coordinator_ip"] = value
                origins.append(("config.coordinator_ip", path))
        elif key == "coordinator_port":
            config["coordinator_port"] = value
            origins.append(("config.coordinator_port", path))
        elif key in JAX_TIMEOUTS:
            env[JAX_TIMEOUTS[key]] = value
            origins.append((join_path("config.container_config.env_dict", JAX_TIMEOUTS[key]), path))
        elif not is_documentation_key(key):
            warnings.append("%s: ignored (clusterval.training does not use it)" % path)
    return env


def run_labels(framework: str, params: Mapping[str, Any]) -> Dict[str, Any]:
    """The run's values of the settings a threshold cell's name states, as far as the parameters decide them
    (the planner adds NNODES, STEPS and MaxText's GBS)."""
    if framework == MAXTEXT:
        quantization = str(params.get("quantization") or "").lower()
        return {"BATCH": params.get("per_device_batch_size"), "SEQLEN": params.get("max_target_length"),
                "PRECISION": "FP8" if "fp8" in quantization else quantization.upper() or "BF16"}
    gbs = params.get("global_batch_size") if framework == TORCHTITAN else params.get("batch_size")
    return {"MBS": params.get("micro_batch_size"), "GBS": gbs,
            "PRECISION": params.get("precision"), "SEQLEN": params.get("sequence_length")}


def cell_as_written(data: Mapping[str, Any], versioned: Versioned) -> Versioned:
    """The cell the sweep names in the config as written (overrides of a combination's batch or precision
    do not rename its cell: the differences are named instead)."""
    combination = ((data.get("sweep") or {}).get("combinations") or {}).get(versioned.sweep)
    if data.get("framework") == "jaxmaxtext" or not isinstance(combination, dict):
        return versioned
    return versioned._replace(cell=megatron_cell(combination))


def megatron_cell(combo: Mapping[str, Any]) -> str:
    """The threshold cell a Megatron-LM combination names, as the suite builds it."""
    return "MBS=%s,GBS=%s,PRECISION=%s" % (combo.get("micro_batch_size"), combo.get("global_batch_size"),
                                           combo.get("precision"))


def loss_curve(data: Mapping[str, Any], path: str) -> Optional[Dict[str, Any]]:
    """The suite's loss-curve check (``loss_curve``: the loss's least-squares slope below ``max_slope``), run as
    the threshold ``loss_slope`` max ``max_slope``; ``enforce`` false reports it. The slope is fitted over every
    step (the suite samples every ``sample_every``-th step and its milestones: the same line, more points)."""
    section = data.get("loss_curve")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError(path, "an object with max_slope and enforce", type_name(section))
    slope = section.get("max_slope", 0.0)
    if not isinstance(slope, (int, float)) or isinstance(slope, bool):
        raise ConfigError(join_path(path, "max_slope"), "a number (the loss's slope per step to stay below)",
                          show(slope))
    return {"max_slope": float(slope), "enforce": to_bool(section.get("enforce", True), join_path(path, "enforce")),
            "source": path}


def refuse_checkpoint_resume(training: Mapping[str, Any]) -> None:
    """The suite's opt-in checkpoint save-and-resume test (with its smoke model) trains twice and compares: the
    collection trains once, so an enabled one is refused by name rather than silently skipped."""
    section = training.get("checkpoint_resume")
    if isinstance(section, dict) and to_bool(section.get("enabled", False), "training.checkpoint_resume.enabled"):
        raise ConfigError("training.checkpoint_resume.enabled", "false: the checkpoint save-and-resume test (and "
                          "its smoke_model_overrides) is not run by clusterval.training, which trains once and "
                          "judges that run; run it with the suite", "true")


def warn_unused(data: Mapping[str, Any], training: Mapping[str, Any], warnings: List[str]) -> None:
    used_training = {"steps", "enable_checkpointing", "distributed", "nic_type", "rdma_lib", "xla_flags",
                     "train_script_paths", "env_vars", "nccl", "jax_distributed", "maxtext_config", "sweeps",
                     "enabled_sweep_list", "gpus_per_node", "tokenizer", "scaling_baseline", "loss_curve"}
    for key in training:
        if is_documentation_key(key) or key in used_training:
            continue
        path = join_path("training", key)
        warnings.append("%s: ignored (%s)" % (path, IGNORED.get(path, "clusterval.training does not use it")))
    tokenizer = training.get("tokenizer")
    if isinstance(tokenizer, dict) and tokenizer.get("hf_model_id"):
        warnings.append("training.tokenizer.hf_model_id: ignored (%s)" % IGNORED["training.tokenizer.hf_model_id"])
    if str(data["model"].get("precision") or ""):
        warnings.append("model.precision: ignored (%s)" % IGNORED["model.precision"])
    used_top = {"schema_version", "framework", "gpu_arch", "enforce_thresholds", "threshold_json", "paths", "model",
                "container", "training"}
    warn_unused_top(data, used_top, warnings)


def warn_unused_top(data: Mapping[str, Any], used: set, warnings: List[str]) -> None:
    for key in data:
        if is_documentation_key(key) or key in used:
            continue
        warnings.append("%s: ignored (%s)" % (key, IGNORED.get(key, "clusterval.training does not use it")))


# -- Megatron-LM --------------------------------------------------------------------------------

def sweep_document(data: Mapping[str, Any], wanted: Optional[str], framework: str) -> Versioned:
    """Megatron-LM's and TorchTitan's layout: config, flat model_params, sweep.combinations."""
    warnings: List[str] = []
    origins: List[Tuple[str, str]] = []
    sweep = require_dict(data, "sweep", "")
    combinations = require_dict(sweep, "combinations", "sweep")
    names = [key for key in combinations if not is_documentation_key(key)]
    enabled = enabled_names(names, sweep.get("runs"), "sweep.runs")
    name = choose(names, enabled, wanted, "sweep.combinations", warnings)
    combo_path = join_path("sweep.combinations", name)
    combo = require_dict(combinations, name, "sweep.combinations")
    params = without_documentation(dict(require_dict(data, "model_params", "")))
    model = params.pop("model_name", None)
    if not isinstance(model, str) or not model:
        raise ConfigError("model_params.model_name", "the model's name (it selects the %s model)"
                          % ("Megatron-LM script" if framework == MEGATRON else "TorchTitan"), show(model))
    keys = COMBINATION_KEYS[framework]
    for key, engine_key in keys.items():
        if combo.get(key) not in (None, ""):
            params[engine_key] = combo[key]
    for key in combo:
        if key not in ("name", "micro_batch_size", "global_batch_size", "precision") and not is_documentation_key(key):
            note = "the threshold file judges the run" if key == "result_dict" else "clusterval.training does not use it"
            warnings.append("%s: ignored (%s)" % (join_path(combo_path, key), note))
    distributed = data["framework"].endswith("_distributed")
    mode = "multi_node" if distributed else "single_node"
    gpu_arch = str(data.get("gpu_arch") or "gpu")
    params_path = join_path(join_path(join_path("model_params", mode), model), gpu_arch)
    origins += [(params_path, "model_params")]
    origins += [(join_path(params_path, engine), join_path(combo_path, key)) for key, engine in keys.items()
                if combo.get(key) not in (None, "")]
    config = dict(require_dict(data, "config", ""))
    config.update(container_settings(require_dict(data, "container", ""), origins, warnings))
    config.update(framework=framework, distributed_training=str(distributed))
    warn_unused_top(data, {"schema_version", "framework", "gpu_arch", "enforce_thresholds", "threshold_json",
                           "config", "model_params", "container", "sweep", "scaling_baseline", "loss_curve"}, warnings)
    document = {"config": config, "model_params": {mode: {model: {gpu_arch: params}}}}
    return Versioned(document, name, megatron_cell(combo), None, thresholds_enforced(data), threshold_json(data),
                     scaling_baseline(data, ""), origins, warnings, loss_curve(data, "loss_curve"))


# -- thresholds and scaling ---------------------------------------------------------------------

def thresholds_enforced(data: Mapping[str, Any]) -> bool:
    return to_bool(data.get("enforce_thresholds", True), "enforce_thresholds")


def threshold_json(data: Mapping[str, Any]) -> Optional[str]:
    value = data.get("threshold_json")
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError("threshold_json", "the threshold file's path (relative to the config's directory)",
                          show(value))
    return value


def scaling_baseline(section: Mapping[str, Any], path: str) -> Optional[Dict[str, float]]:
    """``scaling_baseline``: a run's total tokens/s on ``num_nodes`` nodes; 0 disables it."""
    where = join_path(path, "scaling_baseline") if path else "scaling_baseline"
    baseline = section.get("scaling_baseline")
    if baseline is None:
        return None
    if not isinstance(baseline, dict):
        raise ConfigError(where, "an object with tokens_per_sec_total and num_nodes", type_name(baseline))
    total, nodes = baseline.get("tokens_per_sec_total", 0), baseline.get("num_nodes", 1)
    for key, value in (("tokens_per_sec_total", total), ("num_nodes", nodes)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(join_path(where, key), "a number >= 0", show(value))
    if not total or not nodes:
        return None
    return {"tokens_per_sec_total": float(total), "num_nodes": float(nodes), "source": where}
