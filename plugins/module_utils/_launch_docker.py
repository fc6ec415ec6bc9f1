# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Docker launcher's part of the plan, on the controller: what the planner decides about a node's container
(name, image, GPU access, devices, volumes, labels, the simulator's images), and a node's container spec from the
plan, with the user's overrides, the HF token's mount and the extra volumes, and the run's files that must be on
the node before the container starts. A second launcher (Slurm) is a module beside it."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils import _gpus
from ansible_collections.clusterval.training.plugins.module_utils._config import (
    is_documentation_key, is_unset, to_str, type_name)
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Context
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.module_utils._rdma import (
    foreign_provider_mounts, provider_of, rdma_lib_copy)
from ansible_collections.clusterval.training.plugins.module_utils._xla import version_from_image

SIMULATOR_REPOSITORY = "clusterval/simulator"
# The real-framework image of the simulated cluster (simulator/real/): real MaxText, JAX and XLA on CPU.
REAL_FRAMEWORK_REPOSITORY = "clusterval/jax-maxtext"
CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
SHM_SIZE = re.compile(r"^[0-9]+(?:\.[0-9]+)?[bkmgtpBKMGTP]?(?:[iI]?[bB])?$")
DEVICE_PERMISSIONS = re.compile(r"^[rwm]{1,3}$")


def container_spec(plan: Mapping[str, Any], host: str, overrides: Mapping[str, Any],
                   command: Optional[Sequence[str]] = None, extra_volumes: Sequence[str] = (),
                   token_file: Optional[str] = None, token_present: bool = True) -> Dict[str, Any]:
    """The plan's container for ``host`` with ``overrides`` merged over it (``env`` key by key, every value a
    string, as Docker wants). The HF token reaches the container as a read-only bind mount, never through its
    environment; a bind mount fails on a missing file instead of creating a directory there."""
    node = node_view(plan, host)
    spec = dict(node.get("container") or {})
    env = dict(spec.get("env") or {})
    env.update((overrides or {}).get("env") or {})
    spec.update(overrides or {})
    spec["env"] = {str(key): str(value) for key, value in env.items()}
    if command:
        spec["command"] = list(command)
    spec["volumes"] = list(spec.get("volumes") or []) + list(extra_volumes)
    token = node.get("hf_token_file") if token_file is None else token_file
    spec["mounts"] = [{"type": "bind", "source": token, "target": node["launch"]["hf_token_path"],
                       "read_only": True}] if token and token_present else []
    return spec


def node_files(plan: Mapping[str, Any], host: str) -> Dict[str, List[Any]]:
    """The directories and files (launch script, framework config) the plan puts on ``host``."""
    node = node_view(plan, host)
    return {"directories": list(node.get("directories") or []), "files": list(node.get("files") or [])}


# -- the planner's container decisions (were _plan's) ----------------------------------------------

def container_config(ctx: Context) -> Dict[str, Any]:
    container = ctx.config.get("container_config", {})
    if not isinstance(container, dict):
        raise ConfigError("config.container_config", "an object", type_name(container))
    return container


def container_parts(ctx: Context) -> Dict[str, Any]:
    container = container_config(ctx)
    name = to_str(ctx.config.get("container_name", ""), "config.container_name")
    if not CONTAINER_NAME.match(name):
        raise ConfigError("config.container_name", "a Docker container name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)",
                          show(name))
    image = to_str(ctx.config.get("container_image", ""), "config.container_image").strip()
    if not image or any(ch.isspace() for ch in image):
        raise ConfigError("config.container_image", "a Docker image reference", show(image))
    shm_size = to_str(ctx.config.get("shm_size", "64G"), "config.shm_size").strip()
    if not SHM_SIZE.match(shm_size):
        raise ConfigError("config.shm_size", "a size such as 256G", show(shm_size))
    image_vendor = _gpus.vendor_of_image(image)
    if image_vendor and image_vendor != ctx.gpu_vendor:
        wanted = ("an image for %s GPUs (%s from %s: training_container_image or config.container_images.%s names "
                  "one, e.g. NGC PyTorch with Megatron-LM or NVIDIA's JAX/MaxText image on NVIDIA nodes)"
                  % (ctx.gpu_vendor, ctx.gpu_vendor, ctx.gpu_vendor_source, ctx.gpu_vendor))
        raise ConfigError("config.container_image", wanted, "%s, an image for %s GPUs" % (show(image), image_vendor))
    return {
        "name": name,
        "image": image,
        **gpu_access(ctx, devices(container.get("device_list", []))),
        "volumes": with_mounts(nic_volumes(ctx, volumes(container.get("volume_dict", {}))),
                               rdma_lib_copy(ctx.config.get("rdma_lib"))[0] + ["%s:%s" % (ctx.run_dir, ctx.run_dir)]),
        "shm_size": shm_size,
        "network_mode": "host",
        "ipc_mode": "host",
        "privileged": False,
        "capabilities": ["IPC_LOCK", "SYS_PTRACE"],
        "security_opts": ["seccomp=unconfined"],
        "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"],
    }


def nic_volumes(ctx: Context, configured: List[str]) -> List[str]:
    """The config's volumes less another NIC's RDMA provider library: config.nic_type names the NIC (cx7:
    mlx5), else the vendor's usual one (NVIDIA nodes: ConnectX, mlx5); a warning names what is not mounted."""
    nic_type = ctx.config.get("nic_type")
    provider = provider_of(nic_type) if isinstance(nic_type, str) and not is_unset(nic_type) else \
        _gpus.VENDOR_FACTS[ctx.gpu_vendor].hca_provider
    dropped = foreign_provider_mounts(configured, provider)
    if dropped:
        ctx.warnings.append("config.container_config.volume_dict: %s not mounted: the nodes' HCAs are %s's (%s)"
                            % (", ".join(dropped), provider, "config.nic_type %s" % nic_type
                               if isinstance(nic_type, str) else "%s nodes" % ctx.gpu_vendor))
    return [volume for volume in configured if volume not in dropped]


def gpu_access(ctx: Context, configured: List[str]) -> Dict[str, Any]:
    """How the container gets its GPUs. AMD: the config's devices (/dev/kfd, /dev/dri) and the video and render
    groups. NVIDIA: Docker's device request (config.gpu_access device_request, the default, or cdi; config.gpu_ids
    for some GPUs only), no group, and none of AMD's device nodes (dropped with a warning)."""
    vendor = _gpus.VENDOR_FACTS[ctx.gpu_vendor]
    others = [facts for name, facts in _gpus.VENDOR_FACTS.items() if name != vendor.name]
    dropped = [device for device in configured if any(_gpus.is_gpu_device(device, other) for other in others)]
    if dropped:
        ctx.warnings.append("config.container_config.device_list: %s not given to the container on %s GPUs"
                            % (", ".join(dropped), ctx.gpu_vendor))
    access = to_str(ctx.config.get("gpu_access", "device_request"), "config.gpu_access")
    if access not in _gpus.GPU_ACCESS:
        raise ConfigError("config.gpu_access", "one of %s" % ", ".join(_gpus.GPU_ACCESS), show(access))
    ids = ctx.config.get("gpu_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) and i.strip() for i in ids)):
        raise ConfigError("config.gpu_ids", "a list of GPU indexes or UUIDs as strings", show(ids))
    parts: Dict[str, Any] = {"devices": [device for device in configured if device not in dropped],
                             "groups": list(vendor.groups)}
    requests = _gpus.device_requests(vendor.name, access, ids)
    if requests:
        parts["device_requests"] = requests
    return parts


def devices(values: Any) -> List[str]:
    path = "config.container_config.device_list"
    if not isinstance(values, list):
        raise ConfigError(path, "a list of devices", type_name(values))
    checked = []
    for index, value in enumerate(values):
        item_path = join_path(path, index)
        parts = value.split(":") if isinstance(value, str) else []
        paths_ok = 1 <= len(parts) <= 3 and all(part.startswith("/") for part in parts[:2])
        perms_ok = len(parts) < 3 or DEVICE_PERMISSIONS.match(parts[2])
        if not paths_ok or not perms_ok or any(ch.isspace() for ch in value):
            raise ConfigError(item_path, "host[:container[:permissions]] with absolute paths and rwm",
                              show(value))
        checked.append(value)
    return checked


def volumes(values: Any) -> List[str]:
    path = "config.container_config.volume_dict"
    if not isinstance(values, dict):
        raise ConfigError(path, "an object of host paths to container paths", type_name(values))
    checked = []
    for source, target in values.items():
        if is_documentation_key(source):
            continue
        item_path = join_path(path, source)
        if not isinstance(target, str) or not target.startswith("/") or ":" in target or ":" in source \
                or not source:
            raise ConfigError(item_path, "a host path mapped to an absolute container path (no ':')",
                              show(target))
        if not source.startswith("/"):
            raise ConfigError(item_path, "an absolute host path as the key (Docker would take a relative one "
                              "for a named volume)", show(source))
        checked.append("%s:%s" % (source, target))
    return checked


def with_mounts(configured: List[str], needed: List[str]) -> List[str]:
    """The config's volumes and the needed ones whose container path the config does not mount already."""
    targets = {volume.split(":")[1] for volume in configured}
    return configured + [volume for volume in needed if volume.split(":")[1] not in targets]


def output_mounts(ctx: Context, workdir: str) -> List[str]:
    """Host directories mounted under the framework's working directory: its outputs; they must exist."""
    values = container_config(ctx).get("volume_dict", {})
    values = values if isinstance(values, dict) else {}
    return [source for source, target in values.items()
            if isinstance(target, str) and target.startswith(workdir + "/") and source.startswith("/")]


def image_repository(image: str) -> str:
    repository = image.split("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return repository


def is_repository(image: str, wanted: str) -> bool:
    repository = image_repository(image)
    return repository == wanted or repository.endswith("/" + wanted)


def is_simulator(image: str) -> bool:
    return is_repository(image, SIMULATOR_REPOSITORY)


def realism(image: str) -> Optional[Dict[str, List[str]]]:
    """What is real and what is simulated in a run of the real-framework image (None for any other image:
    a real image on real nodes is real, and the simulator says SIMULATED)."""
    if not is_repository(image, REAL_FRAMEWORK_REPOSITORY):
        return None
    tag = image.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
    maxtext = re.search(r"maxtext-([0-9][0-9.]*[0-9])", tag)
    jaxlib = version_from_image(image)
    return {
        "real": ["MaxText's own train.py%s" % (" (maxtext %s from PyPI)" % maxtext.group(1) if maxtext else ""),
                 "JAX and XLA%s on CPU, parsing the rendered XLA_FLAGS" % (" (jaxlib %s)" % jaxlib if jaxlib else ""),
                 "jax.distributed and gloo collectives between the nodes, over their network"],
        "simulated": ["the GPUs: JAX trains on the nodes' CPUs, so throughput says nothing about GPUs",
                      "RDMA: the nodes talk TCP (network namespaces on one machine)"],
    }


def container_labels(run_id: str, job: str, run_dir: str, data_cache_dir: str) -> Dict[str, str]:
    """What `playbooks/teardown.yml` and the busy check find a run's containers, run dir and marker by."""
    return {"clusterval.run_id": run_id, "clusterval.job": job, "clusterval.run_dir": run_dir,
            "clusterval.managed_by": "clusterval.training", "clusterval.data_cache_dir": data_cache_dir}
