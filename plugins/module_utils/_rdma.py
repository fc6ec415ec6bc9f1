# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""RDMA inside the training container: the host's provider library in place and the config's HCAs visible.

The launch script runs these lines before the framework (as the validation suite does before training):
the provider library mounted as ``...-rdmav<ABI>.so.host`` (or named by ``config.rdma_lib``) is copied to
where libibverbs looks for it, then ``ibv_devinfo -l`` inside the container must list every HCA that
``NCCL_IB_HCA`` names. A failure prints one ``[clusterval] RDMA failure: ...`` line (a ``network`` failure
of that node) and ends the script with status 1.
"""
from __future__ import annotations

import re
import shlex
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

# libibverbs provider libraries: lib<provider>-rdmav<ABI>.so; the suite mounts the host's as <that>.host.
MOUNTED_PROVIDER = re.compile(r"/lib[a-z0-9_]+-rdmav[0-9]+\.so\.host$")
# config.nic_type -> the provider whose HCAs (name prefix) that NIC has.
NIC_PROVIDERS = {"thor2": "bnxt_re", "thor": "bnxt_re", "bnxt": "bnxt_re", "cx7": "mlx5", "cx6": "mlx5",
                 "connectx": "mlx5", "mlx5": "mlx5", "pollara": "ionic", "ainic": "ionic", "ionic": "ionic"}
RDMA_LIB_KEYS = ("host_source_file", "container_mount_file", "container_dest_file")


def provider_of(nic_type: str) -> Optional[str]:
    key = nic_type.strip().lower()
    return next((provider for name, provider in NIC_PROVIDERS.items() if key.startswith(name)), None)


def hca_names(nccl_ib_hca: str) -> List[str]:
    """The HCAs NCCL_IB_HCA names (``=`` exact match and ``:port`` dropped); none for an exclusion list (``^``)."""
    value = nccl_ib_hca.strip()
    if not value or value.startswith("^"):
        return []
    return [item.split(":")[0].strip() for item in value.lstrip("=").split(",") if item.split(":")[0].strip()]


def rdma_lib_copy(spec: object) -> Tuple[List[str], List[Tuple[str, str]]]:
    """``config.rdma_lib`` as (volumes, [(mounted, destination)])."""
    if spec is None or spec == {}:
        return [], []
    if not isinstance(spec, dict):
        raise ConfigError("config.rdma_lib", "an object with %s" % ", ".join(RDMA_LIB_KEYS), show(spec))
    paths: Dict[str, str] = {}
    for key in RDMA_LIB_KEYS:
        value = spec.get(key)
        if not isinstance(value, str) or not value.startswith("/") or ":" in value:
            raise ConfigError(join_path("config.rdma_lib", key), "an absolute path without ':'", show(value))
        paths[key] = value
    volume = "%s:%s:ro" % (paths["host_source_file"], paths["container_mount_file"])
    return [volume], [(paths["container_mount_file"], paths["container_dest_file"])]


def foreign_provider_mounts(volumes: Sequence[str], provider: Optional[str]) -> List[str]:
    """Volumes mounting another provider's library (``libbnxt_re-rdmav34.so`` on ConnectX nodes, whose HCAs are
    mlx5's): the launch script would copy it over the image's for nothing, and the host may not have it."""
    if provider is None:
        return []
    foreign = []
    for volume in volumes:
        match = MOUNTED_PROVIDER.search(volume.split(":")[1] if ":" in volume else volume)
        name = match.group(0)[len("/lib"):].split("-rdmav")[0] if match else None
        if name is not None and name != provider:
            foreign.append(volume)
    return foreign


def mounted_copies(volumes: Sequence[str]) -> List[Tuple[str, str]]:
    """Provider libraries a volume mounts as ``...-rdmav<ABI>.so.host``: copied to the name without ``.host``."""
    targets = [volume.split(":")[1] for volume in volumes]
    return [(target, target[:-len(".host")]) for target in targets if MOUNTED_PROVIDER.search(target)]


def hca_warnings(hcas: Sequence[str], nic_type: str) -> List[str]:
    """HCAs whose names belong to another provider than config.nic_type's (renamed RoCE HCAs cannot tell)."""
    provider = provider_of(nic_type)
    if provider is None:
        return []
    others = [hca for hca in hcas if any(hca.startswith(p) for p in set(NIC_PROVIDERS.values()) - {provider})]
    if not others:
        return []
    return ["config.nic_type %s has %s HCAs, but NCCL_IB_HCA names %s" % (nic_type, provider, ", ".join(others))]


def prelude_lines(copies: Sequence[Tuple[str, str]], hcas: Sequence[str], log_path: str = "") -> List[str]:
    """POSIX sh lines for the launch script (``finish`` records the exit status), their output appended to
    `log_path` (the training log, where the verdict reads it) when given."""
    lines = []
    for mounted, destination in copies:
        failure = "[clusterval] RDMA failure: cannot put the provider library %s in place as %s" % (
            mounted, destination)
        lines.append("cp -f %s %s || { echo %s; finish 1; }" % (
            shlex.quote(mounted), shlex.quote(destination), shlex.quote(failure)))
        lines.append("echo %s" % shlex.quote("[clusterval] RDMA: provider library %s in place" % destination))
    if hcas:
        wanted = " ".join(shlex.quote(hca) for hca in hcas)
        lines.extend([
            "hcas=$(ibv_devinfo -l 2>&1); listed=$?",
            "hcas=$(printf '%s' \"$hcas\" | tr -s '[:space:]' ' ')",
            'if [ "$listed" -ne 0 ]; then echo "[clusterval] RDMA failure: ibv_devinfo -l failed in the container: '
            '$hcas"; finish 1; fi',
            "for hca in %s; do" % wanted,
            '  case " $hcas " in *" $hca "*) ;; *) echo "[clusterval] RDMA failure: ibv_devinfo in the container '
            'does not list HCA $hca of NCCL_IB_HCA (it found: $hcas)"; finish 1 ;; esac',
            "done",
            "echo %s" % shlex.quote("[clusterval] RDMA: ibv_devinfo in the container lists %s" % " ".join(hcas)),
        ])
    if lines and log_path:
        return ["{"] + ["  " + line for line in lines] + ["} >>%s 2>&1" % shlex.quote(log_path)]
    return lines


def rdma_setup(config: Mapping[str, object], volumes: Sequence[str], env: Mapping[str, str],
               multi_node: bool, log_path: str = "") -> Dict[str, List[str]]:
    """{prelude, warnings} of a job whose container mounts `volumes` (rdma_lib's among them): the launch
    script's lines and the plan's warnings."""
    dummy, copies = rdma_lib_copy(config.get("rdma_lib"))
    copies = copies + [copy for copy in mounted_copies(volumes) if copy[0] not in {c[0] for c in copies}]
    uses_ib = multi_node and env.get("NCCL_IB_DISABLE", "0") != "1"
    hcas = hca_names(env.get("NCCL_IB_HCA", "")) if uses_ib else []
    nic_type = config.get("nic_type")
    warnings = hca_warnings(hcas, nic_type) if isinstance(nic_type, str) else []
    return {"prelude": prelude_lines(copies, hcas, log_path), "warnings": warnings}
