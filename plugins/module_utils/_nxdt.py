# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Neuronx Distributed Training (NxDT) from its own YAML: read, checked, rendered and launched.

NxDT's entry point (``examples/training_orchestrator.py``) composes the YAML with Hydra, derives the Neuron
environment from it (``process_config``) and trains with PyTorch Lightning under ``torchrun``. This module
checks what NxDT would refuse or train wrongly before any node is touched, renders the YAML the run uses
(steps, nodes and devices set), the environment NxDT derives, and one ``torchrun`` line per node.
Facts and their sources: docs/config.md ("Neuronx Distributed Training").
"""
from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, Problem, show

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core on the controller
    yaml = None

WORKDIR = "/workspace/neuronx-distributed-training/examples"
ENTRY_POINT = "training_orchestrator.py"
CONFIG_NAME = "clusterval_nxdt"
DEFAULT_MASTER_PORT = 41000  # examples/train_setup.sh
# The top-level keys every NxDT config has (docs/general/config_overview.rst): what makes a YAML an NxDT one.
SIGNATURE_KEYS = ("trainer", "exp_manager", "distributed_strategy", "data", "model", "precision")
# examples/train_setup.sh exports these for multi-node runs (EFA) and for every run (MALLOC_ARENA_MAX...).
LAUNCH_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1",
              "MALLOC_ARENA_MAX": "128", "XLA_DISABLE_FUNCTIONALIZATION": "0", "HYDRA_FULL_ERROR": "1"}
MIXED_ACCUMULATION = "--enable-mixed-precision-accumulation"
# training_orchestrator.process_config: precision.type -> (XLA_USE_BF16, XLA_DOWNCAST_BF16,
# NEURON_RT_STOCHASTIC_ROUNDING_EN or None when left alone, what it appends to NEURON_CC_FLAGS).
PRECISIONS: Dict[str, Tuple[str, str, Optional[str], str]] = {
    "bf16SR": ("1", "0", "1", MIXED_ACCUMULATION),
    "mixed_precision": ("0", "1", "0", MIXED_ACCUMULATION),
    "mixed_precision_SR": ("0", "1", "1", MIXED_ACCUMULATION),
    "fp32": ("0", "0", None, "--auto-cast none"),
    "autocast": ("0", "0", "0", MIXED_ACCUMULATION + " --auto-cast none"),
}
MANUAL = "manual"
MANUAL_KEYS = (("XLA_USE_BF16", "xla_use_bf16"), ("XLA_DOWNCAST_BF16", "xla_downcast_bf16"),
               ("NEURON_RT_STOCHASTIC_ROUNDING_EN", "neuron_rt_stochastic_rounding_en"))
# NxDT's documentation and the comment in its example YAMLs list this spelling; its own code checks
# mixed_precision_SR and raises "Invalid option given for precision type" on this one.
DOCUMENTED_ONLY = {"mixed_precisionSR": "mixed_precision_SR"}
# The scalar settings training_orchestrator.process_config turns into environment variables.
DERIVED_ENV = (("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "aync_exec_max_inflight_requests"),
               ("BUCKET_CAP_MB", "bucket_size_collectives"), ("NEURON_COMPILE_CACHE_URL", "compiler_cache_url"),
               ("NEURON_RT_EXEC_TIMEOUT", "neuron_rt_exec_timeout"))
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_.]*)\}$")
# The engine's settings of a run from an NxDT YAML (docs/config.md, "Neuronx Distributed Training"); the
# YAML itself says nothing of the cluster, so these are overridden like any config's (training_overrides).
IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.7.0-neuronx-py310-sdk2.26.0-ubuntu22.04"
LOG_DIR = "/var/tmp/clusterval-logs"
DATA_DIR = "/var/tmp/clusterval-data"
# EFA devices of the largest instances: trn1.32xlarge 8, trn1n.32xlarge and trn2.48xlarge 16.
EFA_DEVICES = {"trn1": 8, "trn2": 16}


class NxdtJob(NamedTuple):
    """What the planner needs of an NxDT YAML."""
    document: Dict[str, Any]        # the YAML as the run uses it (steps, nodes, devices set)
    devices: int                    # processes (logical NeuronCores) per node
    nnodes: int
    steps: int
    parallel: Dict[str, int]        # tp, pp, cp, dp
    micro_batch_size: int
    global_batch_size: int
    seq_length: Optional[int]
    neuron_env: Dict[str, str]      # what NxDT derives from the YAML


def is_nxdt(data: Any) -> bool:
    """An NxDT YAML: a mapping with NxDT's own sections, and neither the seed format's nor the suite's."""
    return (isinstance(data, dict) and "config" not in data and "schema_version" not in data
            and all(isinstance(data.get(key), dict) for key in ("trainer", "distributed_strategy", "data"))
            and sum(key in data for key in SIGNATURE_KEYS) >= 5)


def arch_of(document: Mapping[str, Any]) -> str:
    """trainer.lnc is a Trainium2 setting (trn1 knows only one physical core per logical one): trn2 with it."""
    trainer = document.get("trainer")
    return "trn2" if isinstance(trainer, Mapping) and trainer.get("lnc") is not None else "trn1"


def to_engine(document: Mapping[str, Any]) -> Dict[str, Any]:
    """The engine's shape of an NxDT YAML: one multi-node job of model ``name`` on its Trainium arch, the YAML
    kept whole in config.nxdt for the stack to render (_stack_nxdt)."""
    arch = arch_of(document)
    steps = lookup(document, "trainer.max_steps")
    train_dir = lookup(document, "data.train_dir")
    devices = ["/dev/neuron%d" % index for index in range(16)] + \
        ["/dev/infiniband/uverbs%d" % index for index in range(EFA_DEVICES[arch])]
    config = {
        "framework": "nxdt",
        "gpu_vendor": "trainium",
        "container_image": IMAGE,
        "container_name": "clusterval-nxdt",
        "log_dir": LOG_DIR,
        "data_cache_dir": os.path.dirname(train_dir) if isinstance(train_dir, str) and train_dir.startswith("/")
        and os.path.dirname(train_dir) != "/" else DATA_DIR,
        # no host volume: the YAML's paths are the image's or the cluster's to mount (config.container_config)
        "container_config": {"device_list": devices, "volume_dict": {}},
        "nxdt": copy_document(document),
    }
    if steps is not None:
        config["max_steps"] = str(steps)
    name = document.get("name") if isinstance(document.get("name"), str) and document.get("name") else "nxdt"
    return {"config": config, "model_params": {"multi_node": {name: {arch: {}}}}}


def load_text(text: str, source: str) -> Dict[str, Any]:
    if yaml is None:
        raise RuntimeError("PyYAML is needed on the controller to read an NxDT YAML (it comes with ansible-core)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, "an NxDT YAML", "YAML that does not parse (%s)" % str(exc).splitlines()[0]) \
            from None
    if not isinstance(data, dict):
        raise ConfigError(source, "an NxDT YAML (a mapping of trainer, exp_manager, distributed_strategy, data, "
                          "model, precision, ...)", type(data).__name__)
    return data


def lookup(document: Mapping[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def resolved(document: Mapping[str, Any], path: str, depth: int = 0) -> Any:
    """A value, following a plain ``${a.b}`` reference as OmegaConf would (other interpolations stay text)."""
    value = lookup(document, path)
    match = _REFERENCE.match(value) if isinstance(value, str) else None
    if match and depth < 8:
        return resolved(document, match.group(1), depth + 1)
    return value


def integer(document: Mapping[str, Any], path: str, minimum: int = 1, default: Optional[int] = None) -> int:
    value = resolved(document, path)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(path, "an integer >= %d" % minimum, "missing" if value is None else show(value))
    return value


def check_precision(document: Mapping[str, Any]) -> str:
    kind = resolved(document, "precision.type")
    if kind in PRECISIONS or kind == MANUAL:
        if kind == MANUAL:
            for _name, key in MANUAL_KEYS:
                value = lookup(document, "precision." + key)
                if value is None or str(value) not in ("0", "1"):
                    raise ConfigError("precision." + key, "'0' or '1' (precision.type manual reads it)",
                                      "missing" if value is None else show(value))
        return kind
    accepted = ", ".join(list(PRECISIONS) + [MANUAL])
    if kind in DOCUMENTED_ONLY:
        raise ConfigError("precision.type", "one of %s (NxDT's documentation spells it %s, but its "
                          "training_orchestrator.py checks %s and refuses %s: 'Invalid option given for "
                          "precision type')" % (accepted, kind, DOCUMENTED_ONLY[kind], kind), show(kind))
    raise ConfigError("precision.type", "one of %s" % accepted, "missing" if kind is None else show(kind))


def neuron_env(document: Mapping[str, Any]) -> Dict[str, str]:
    """The environment training_orchestrator.process_config derives from the YAML (a value already in the
    environment wins, and NEURON_CC_FLAGS is appended to)."""
    env: Dict[str, str] = {}
    fusions = lookup(document, "model.fusions")
    if isinstance(fusions, Mapping) and fusions.get("softmax"):
        env["NEURON_FUSE_SOFTMAX"] = "1"
    env["NEURON_EXPERIMENTAL_COMPRESS_RG"] = "1" if lookup(document, "neuron_experimental_compress_rg") is True \
        else "0"
    for name, key in DERIVED_ENV:
        value = resolved(document, key)
        if value is None:
            raise ConfigError(key, "a value (training_orchestrator.py reads it to set %s)" % name, "missing")
        env[name] = str(value)
    flags = [str(resolved(document, "compiler_flags") or "")]
    kind = check_precision(document)
    if kind == MANUAL:
        env.update((name, str(lookup(document, "precision." + key))) for name, key in MANUAL_KEYS)
    else:
        use_bf16, downcast, rounding, cc_flags = PRECISIONS[kind]
        env.update(XLA_USE_BF16=use_bf16, XLA_DOWNCAST_BF16=downcast)
        if rounding is not None:
            env["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = rounding
        flags.append(cc_flags)
    env["NEURON_CC_FLAGS"] = " ".join(flag for flag in flags if flag)
    return env


def parallel_sizes(document: Mapping[str, Any], devices: int, nnodes: int) -> Dict[str, int]:
    """TP, PP, CP from the YAML and the data-parallel size they leave; devices x nodes must divide."""
    sizes = {"tp": integer(document, "distributed_strategy.tensor_model_parallel_size"),
             "pp": integer(document, "distributed_strategy.pipeline_model_parallel_size", default=1),
             "cp": integer(document, "distributed_strategy.context_parallel_size", default=1)}
    model_parallel = sizes["tp"] * sizes["pp"] * sizes["cp"]
    world = devices * nnodes
    if world % model_parallel:
        raise ConfigError("distributed_strategy", "tensor x pipeline x context parallel sizes that divide the "
                          "devices of the run (%d devices x %d nodes = %d)" % (devices, nnodes, world),
                          "%d x %d x %d = %d" % (sizes["tp"], sizes["pp"], sizes["cp"], model_parallel))
    sizes["dp"] = world // model_parallel
    return sizes


def check_batch(document: Mapping[str, Any], data_parallel: int) -> Tuple[int, int]:
    micro = integer(document, "data.micro_batch_size")
    global_batch = integer(document, "data.global_batch_size")
    if global_batch % (micro * data_parallel):
        raise ConfigError("data.global_batch_size", "a multiple of micro_batch_size x data-parallel size "
                          "(%d x %d = %d)" % (micro, data_parallel, micro * data_parallel), show(global_batch))
    return micro, global_batch


def check_logging(document: Mapping[str, Any], watched: bool) -> None:
    """A watched run reads each step's loss and throughput from the progress bar, which NxDT refreshes every
    trainer.log_every_n_steps steps."""
    every = integer(document, "trainer.log_every_n_steps", default=1)
    if watched and every != 1:
        raise ConfigError("trainer.log_every_n_steps", "1 for a watched run (NxDT puts a step's loss and "
                          "throughput on its progress bar every log_every_n_steps steps; the watch judges every "
                          "step)", show(every))


def plan_job(data: Mapping[str, Any], nnodes: int, devices: Optional[int] = None, steps: Optional[int] = None,
             log_dir: Optional[str] = None, watched: bool = True) -> NxdtJob:
    """The YAML checked and rendered for ``nnodes`` nodes: ``devices`` (processes per node) and ``steps``
    replace trainer.devices and trainer.max_steps when given; every problem is named by its YAML path."""
    document = copy_document(data)
    trainer = document.setdefault("trainer", {})
    if devices is not None:
        trainer["devices"] = devices
    if steps is not None:
        trainer["max_steps"] = steps
    trainer["num_nodes"] = nnodes
    if log_dir is not None:
        document.setdefault("exp_manager", {})["explicit_log_dir"] = log_dir
    problems: List[Problem] = []
    result: Dict[str, Any] = {}
    for name, check in (("devices", lambda: integer(document, "trainer.devices")),
                        ("steps", lambda: integer(document, "trainer.max_steps")),
                        ("logging", lambda: check_logging(document, watched)),
                        ("precision", lambda: check_precision(document)),
                        ("env", lambda: neuron_env(document))):
        try:
            result[name] = check()
        except ConfigError as exc:
            problems.extend(problem for problem in exc.problems if problem not in problems)
    if not problems:
        try:
            result["parallel"] = parallel_sizes(document, result["devices"], nnodes)
            result["batch"] = check_batch(document, result["parallel"]["dp"])
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError.many(problems)
    seq = resolved(document, "model.encoder_seq_length")
    return NxdtJob(document, result["devices"], nnodes, result["steps"], result["parallel"], result["batch"][0],
                   result["batch"][1], seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
                   result["env"])


def copy_document(value: Any) -> Any:
    """A deep copy in builtin types (values templated by Ansible are subclasses, which PyYAML's safe dumper
    refuses)."""
    return json.loads(json.dumps(value))


def render(document: Mapping[str, Any]) -> str:
    """The YAML the run's torchrun reads (--config-path, --config-name)."""
    if yaml is None:
        raise RuntimeError("PyYAML is needed on the controller to write the NxDT YAML (it comes with ansible-core)")
    return "# NxDT config written by clusterval.training\n" + yaml.safe_dump(
        copy_document(document), sort_keys=False, default_flow_style=False, width=100000)


def torchrun_argv(devices: Any, nnodes: Any, node_rank: Any, master_addr: str, master_port: Any,
                  config_dir: str, config_name: str = CONFIG_NAME) -> List[str]:
    """One node's launch, as NxDT's examples/train.sh runs it."""
    return ["torchrun", "--nproc_per_node", str(devices), "--nnodes", str(nnodes), "--node_rank", str(node_rank),
            "--master_addr", master_addr, "--master_port", str(master_port), ENTRY_POINT,
            "--config-path", config_dir, "--config-name", config_name]


def run_lines(devices: int, config_dir: str, log_path: str) -> Tuple[List[str], str]:
    """The launch script's line (its node's NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT from the container's
    environment), and the command shown."""
    argv = torchrun_argv(devices, "$NNODES", "$NODE_RANK", "$MASTER_ADDR", "$MASTER_PORT", config_dir)
    command = " ".join('"%s"' % arg if arg.startswith("$") else shlex.quote(arg) for arg in argv)
    return ["%s >>%s 2>&1" % (command, shlex.quote(log_path))], command
