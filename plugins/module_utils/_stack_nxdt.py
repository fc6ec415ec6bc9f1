# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Neuronx Distributed Training stack: what the planner runs on each node for an NxDT YAML.

The YAML comes in the engine's shape (``_nxdt.to_engine``: config.nxdt holds it whole); this module checks it for
the run's nodes and NeuronCores, writes the YAML the run uses beside its log, and launches NxDT's entry point
under torchrun on every node (``_nxdt``). The environment NxDT derives from the YAML is shown in the plan, not
exported: NxDT sets it itself, appending to NEURON_CC_FLAGS.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ansible_collections.clusterval.training.plugins.module_utils import _neuron, _nxdt
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, show
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Context

ROOT_KEY = "nxdt_root"
NEURON_ENV_NOTE = ("set by NxDT's training_orchestrator.py from the YAML when the node starts (a value already "
                   "in the environment wins; NEURON_CC_FLAGS is appended to)")


def document(config: Mapping[str, Any]) -> Dict[str, Any]:
    value = config.get("nxdt")
    if not isinstance(value, dict):
        raise ConfigError("config.nxdt", "the NxDT YAML (a .yaml training config)", show(value))
    return value


def devices_of(config: Mapping[str, Any]) -> Optional[int]:
    """trainer.devices of the YAML: the processes per node, unless gpus_per_node says otherwise."""
    value = _nxdt.lookup(config.get("nxdt") or {}, "trainer.devices")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check(config: Mapping[str, Any], arch: str, nnodes: int, devices: int, steps: int,
          log_dir: Optional[str] = None) -> _nxdt.NxdtJob:
    """The YAML checked for ``nnodes`` nodes of ``devices`` processes each, on ``arch``'s NeuronCores."""
    yaml = document(config)
    job = _nxdt.plan_job(yaml, nnodes, devices=devices, steps=steps, log_dir=log_dir)
    facts = _neuron.ARCHS.get(arch)
    lnc = _nxdt.lookup(yaml, "trainer.lnc")
    if facts is not None:
        cores = facts.logical_cores(lnc if isinstance(lnc, int) and lnc > 0 else None)
        if devices > cores:
            raise ConfigError("trainer.devices", "at most %d processes per node (a %s node's %d logical NeuronCores: "
                              "%d devices x %d cores / lnc %d)" % (cores, arch, cores, facts.devices,
                                                                   facts.cores_per_device, lnc or facts.default_lnc),
                              show(devices))
    return job


def launch_env(nnodes: int) -> Dict[str, str]:
    """NxDT's examples/train_setup.sh: EFA for the collectives across nodes, the allocator's arenas, Hydra."""
    env = dict(_nxdt.LAUNCH_ENV)
    if nnodes == 1:
        for name in ("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE"):
            env.pop(name)
    return env


def root(config: Mapping[str, Any]) -> str:
    value = config.get(ROOT_KEY, _nxdt.WORKDIR)
    if not isinstance(value, str) or not value.startswith("/") or any(ch.isspace() for ch in value):
        raise ConfigError("config." + ROOT_KEY, "NxDT's examples directory in the image (an absolute path without "
                          "spaces)", show(value))
    return value.rstrip("/") or "/"


def parts(config: Mapping[str, Any], arch: str, run_dir: str, nnodes: int, devices: int,
          steps: int) -> Dict[str, Any]:
    """The stack's part of every node's plan: its environment, files, launch line and what NxDT will derive."""
    config_dir = "%s/nxdt" % run_dir
    job = check(config, arch, nnodes, devices, steps, log_dir="%s/nxdt/logs" % run_dir)
    path = "%s/%s.yaml" % (config_dir, _nxdt.CONFIG_NAME)
    lines, command = _nxdt.run_lines(devices, config_dir, "%s/training.log" % run_dir)
    name = document(config).get("name")
    return {"env": launch_env(nnodes), "workdir": root(config), "run_lines": lines, "command": command,
            "files": [{"path": path, "mode": "0644", "content": _nxdt.render(job.document)}],
            "directories": [config_dir, "%s/logs" % config_dir], "trains_model": name if isinstance(name, str) else None,
            "script_candidates": [],
            "nxdt": {"config_file": path, "parallel": job.parallel, "micro_batch_size": job.micro_batch_size,
                     "global_batch_size": job.global_batch_size, "neuron_env": job.neuron_env,
                     "neuron_env_note": NEURON_ENV_NOTE}}


def nxdt_parts(ctx: Context, _data_cache_dir: str = "") -> Dict[str, Any]:
    """The planner's entry (STACK_PARTS): the run's parts from its context."""
    return parts(ctx.config, ctx.selection.gpu_arch, ctx.run_dir, ctx.nnodes, ctx.options.gpus_per_node,
                 ctx.total_steps)


def check_parallelism(ctx: Context, nnodes: int, gpus: int) -> None:
    check(ctx.config, ctx.selection.gpu_arch, nnodes, gpus, ctx.total_steps)


def node_torchrun(devices: int, nnodes: int, rank: int, address: str, port: int, run_dir: str) -> list:
    """The node's torchrun line as it runs (the launch script reads the same values from the environment)."""
    return _nxdt.torchrun_argv(devices, nnodes, rank, address, port, "%s/nxdt" % run_dir)
