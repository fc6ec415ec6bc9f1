# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""TPU hosts: their arch keys, what a TPU container needs, the environment of JAX's TPU discovery, and
MaxText's mesh checked the TPU way.

A leaf module (standard library and _errors only). Facts from Google's TPU documentation and measured with
jax 0.12.0.1 and libtpu 0.0.50.1 on CPU (REFERENCE.md section 7): a TPU VM host runs one process that holds
/tmp/libtpu_lockfile; its container is privileged, on the host's network, with the host's TPU device nodes;
JAX finds the slice's other hosts from TPU_WORKER_HOSTNAMES and TPU_WORKER_ID (its coordinator on the first
host, port 8482), and the slices of a multislice job from MEGASCALE_*.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

TPU = "tpu"


class TpuArch(NamedTuple):
    key: str                  # the arch key of a config's model_params block
    type_prefix: str          # the accelerator type's name (TPU_ACCELERATOR_TYPE: v5p-16, v5litepod-16)
    cores_per_chip: int       # the accelerator type counts TensorCores (v4, v5p: 2 a chip) or chips
    device_globs: Tuple[str, ...]   # the host's TPU device nodes


ARCHS: Dict[str, TpuArch] = {
    "v4": TpuArch("v4", "v4", 2, ("/dev/accel*",)),
    "v5e": TpuArch("v5e", "v5litepod", 1, ("/dev/vfio/*",)),
    "v5p": TpuArch("v5p", "v5p", 2, ("/dev/vfio/*",)),
    "v6e": TpuArch("v6e", "v6e", 1, ("/dev/vfio/*",)),
}
CHIPS_PER_HOST = 4            # a multi-host slice's hosts hold 4 chips each (v4, v5e, v5p, v6e)
PROCESSES_PER_HOST = 1        # libtpu's /tmp/libtpu_lockfile: one process per host opens the chips
DISCOVERY_PORT = 8482         # JAX's TPU discovery: the coordinator on the slice's first worker
# Google's tpu-info (pip package tpu-info): its chip table has one row per chip, "│ /dev/vfio/0 │ TPU v6e chip │ ...".
TOOL = "tpu-info"
CHIP_ROW = re.compile(r"^\s*\u2502\s*(/dev/\S+)\s*\u2502\s*TPU (\w+) chip\s*\u2502", re.M)
# MaxText's settings for TPU hosts (base.yml's hardware key; its GPU settings do not apply).
MAXTEXT_SETTINGS = {"hardware": "tpu"}


def arch_key(value: Any) -> str:
    """``v5p``, ``V5P`` -> ``v5p``; ``v5litepod`` -> ``v5e``; anything else comes back lowercased."""
    text = str(value or "").strip().lower()
    return "v5e" if text in ("v5litepod", "v5lite") else text


def parse_tpu_info(output: str) -> Dict[str, Any]:
    """The chips of tpu-info's table: their device paths, models and arch (None unless all are one arch)."""
    chips = CHIP_ROW.findall(output)
    archs = sorted({arch_key(name) for dummy, name in chips})
    return {"count": len(chips), "devices": [path for path, dummy in chips],
            "models": ["TPU %s chip" % name for dummy, name in chips], "arch": archs[0] if len(archs) == 1 else None}


def is_tpu_arch(value: Any) -> bool:
    return arch_key(value) in ARCHS


def accelerator_type(arch: str, hosts_per_slice: int, chips_per_host: int = CHIPS_PER_HOST) -> str:
    """TPU_ACCELERATOR_TYPE of one slice: ``v5p-16`` is 2 hosts of 4 chips, 2 TensorCores each."""
    facts = ARCHS[arch_key(arch)]
    return "%s-%d" % (facts.type_prefix, hosts_per_slice * chips_per_host * facts.cores_per_chip)


def slice_count(params: Mapping[str, Any], path: str) -> int:
    """MaxText's num_slices (-1 or absent: one slice)."""
    value = params.get("num_slices", 1)
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not re.match(r"^-?[0-9]+$", text) or int(text) == 0 or int(text) < -1:
        raise ConfigError(join_path(path, "num_slices"), "a positive number of TPU slices (or -1: one)", show(value))
    return max(int(text), 1)


def check_slices(nnodes: int, slices: int, path: str) -> int:
    """The hosts of each slice; the job's hosts split evenly into its slices."""
    if nnodes % slices:
        raise ConfigError(join_path(path, "num_slices"), "a number of TPU slices dividing the %d hosts of the job"
                          % nnodes, str(slices))
    return nnodes // slices


def mesh_totals(params: Mapping[str, Any], chips_per_host: int, nnodes: int,
                path: str) -> Tuple[Tuple[int, str], Tuple[int, str]]:
    """The TPU way: MaxText's ici_* axes multiply to the chips of one slice, its dcn_* axes to the slices
    (each with what it counts, for the error)."""
    slices = slice_count(params, path)
    hosts_per_slice = check_slices(nnodes, slices, path)
    chips = "chips in a slice (%d hosts x %d chips)" % (hosts_per_slice, chips_per_host)
    return (hosts_per_slice * chips_per_host, chips), (slices, "TPU slices (num_slices)")


def worker_env(arch: str, addresses: Sequence[str], rank: int, slices: int,
               chips_per_host: int = CHIPS_PER_HOST) -> Dict[str, str]:
    """The environment of the host of `rank` among the job's `addresses`: its slice's workers, its id there,
    the slice's accelerator type, and for several hosts the MEGASCALE_* settings. JAX's TPU discovery reads
    those from the environment before it asks the TPU VM's metadata server, which a container on GKE or a
    simulated node does not have; with one slice they name slice 0 of 1 and its first host, JAX's coordinator
    anyway (measured, jax 0.12.0.1: two hosts joined, one CPU device each)."""
    per_slice = len(addresses) // slices
    slice_id, worker_id = divmod(rank, per_slice)
    workers = addresses[slice_id * per_slice:(slice_id + 1) * per_slice]
    env = {"TPU_WORKER_HOSTNAMES": ",".join(workers), "TPU_WORKER_ID": str(worker_id),
           "TPU_ACCELERATOR_TYPE": accelerator_type(arch, per_slice, chips_per_host),
           "TPU_SKIP_MDS_QUERY": "1"}
    if len(addresses) > 1:
        env.update({"MEGASCALE_COORDINATOR_ADDRESS": addresses[0], "MEGASCALE_NUM_SLICES": str(slices),
                    "MEGASCALE_SLICE_ID": str(slice_id)})
    return env


def check_job(framework: str, arch: str, path: str) -> None:
    """A TPU job: MaxText (JAX) on a TPU generation's block."""
    if framework != "maxtext":
        raise ConfigError(path, "a MaxText config on TPU nodes (libtpu runs JAX; %s needs GPUs)" % framework,
                          framework)
    if not is_tpu_arch(arch):
        raise ConfigError(path, "a TPU generation's block (%s) on TPU nodes" % ", ".join(ARCHS), show(arch))


def maxtext_values(values: Mapping[str, Any], path: str) -> Dict[str, Any]:
    """MaxText's settings on TPU hosts: `hardware: tpu` (a block that says otherwise is refused)."""
    checked = dict(values)
    for key, wanted in MAXTEXT_SETTINGS.items():
        if key in checked and str(checked[key]).strip().lower() != wanted:
            raise ConfigError(join_path(path, key), "%s on TPU nodes" % wanted, show(checked[key]))
        checked[key] = wanted
    return checked


def realism(maxtext: Optional[str], jaxlib: Optional[str]) -> Dict[str, List[str]]:
    """What is real and what is simulated in a run of the real-framework image on TPU-like simulated nodes."""
    return {
        "real": ["MaxText's own train.py%s with hardware: tpu"
                 % (" (maxtext %s from PyPI)" % maxtext if maxtext else ""),
                 "libtpu (as jax[tpu] pins it) parsing the rendered LIBTPU_INIT_ARGS; a flag it refuses ends the run",
                 "JAX's TPU discovery joining the hosts from TPU_WORKER_HOSTNAMES and TPU_WORKER_ID (port %d), and "
                 "XLA%s parsing XLA_FLAGS" % (DISCOVERY_PORT, " (jaxlib %s)" % jaxlib if jaxlib else "")],
        "simulated": ["the TPU chips: JAX_FORCE_TPU_INIT=1 and an empty JAX_PLATFORMS load libtpu without a chip; it "
                      "fails its topology and JAX trains on the nodes' CPUs, so throughput says nothing about TPUs",
                      "ICI and DCN: the hosts talk TCP (network namespaces on one machine)"],
    }
