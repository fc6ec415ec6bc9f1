# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The preflight probe's arguments for one node, from the plan and the role's settings, on the controller.

Computed here once per node instead of through a chain of role variables: every Jinja expression a task
evaluates is compiled again in each host's worker, and at hundreds of nodes that is most of the controller's
cost of a run."""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Sequence

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.clusterval.training.plugins.module_utils._docker import DEFAULT_HOST
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._health import window_seconds
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view

MARKER_PREFIX = ".clusterval-preflight-"
# preflight_kernel_log -> how the probe reads it: with become (a task of its own, as root: kernel.dmesg_restrict=1
# hides the kernel log from other users), as the SSH user (a member of adm or systemd-journal, with journalctl -k),
# or not at all.
KERNEL_LOG_MODES = {"become": "become", "user": "none", "skip": "skip"}
# The preflight role's settings (its variables without the prefix), as settings_from reads them.
SETTINGS = ("controller", "lock_take", "takeover", "lock_stale_s", "check_coordinator_port", "docker_socket",
            "hf_token_file", "hf_token_source", "mock_data", "gpu_arch", "gpu_tools", "gpu_arch_map", "gpu_count",
            "check_gpu_errors", "kernel_log", "kernel_log_command", "kernel_log_since", "gpu_error_patterns", "ras_root", "rdma", "rdma_ports",
            "rdma_sysfs", "rdma_rate_gbps", "min_free_mib", "log_base_mib", "log_kib_per_step", "check_shared_cache",
            "data_cache_dir", "shared_wait")


def marker_writer(plan: Mapping[str, Any]) -> str:
    """The first node of the plan writes the shared-cache marker (stable, unlike the play's hosts after a
    failure)."""
    return str(next(iter(plan["nodes"])))


def setting(settings: Mapping[str, Any], key: str, derived: Any) -> Any:
    """The role's setting, or what the plan gives when it is unset (None)."""
    value = settings.get(key)
    return derived if value is None else value


def flag(settings: Mapping[str, Any], key: str, derived: Any) -> bool:
    """A yes/no setting, as Ansible reads one (``-e`` gives strings: ``false``, ``no``, ``0``)."""
    return boolean(setting(settings, key, derived), strict=False)


def data_cache_dir(plan: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    return str(setting(settings, "data_cache_dir", plan.get("data_cache_dir") or ""))


def marker_path(plan: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    return "%s/%s%s" % (data_cache_dir(plan, settings), MARKER_PREFIX, plan["run_id"])


def checks_shared_cache(plan: Mapping[str, Any], settings: Mapping[str, Any], play_hosts: int) -> bool:
    return bool(flag(settings, "check_shared_cache", True) and data_cache_dir(plan, settings)
                and plan.get("mode") == "multi_node" and play_hosts > 1)


def expected_log_mib(plan: Mapping[str, Any], settings: Mapping[str, Any]) -> int:
    steps = int(plan.get("total_steps") or 0)
    return int(math.ceil(float(settings.get("log_base_mib", 64)) + steps * float(settings.get("log_kib_per_step", 4))
                         / 1024.0))


def uses_rdma(plan: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    paths = list(container.get("devices") or []) + list(container.get("volumes") or [])
    return plan.get("mode") == "multi_node" and any("/dev/infiniband" in path for path in paths)


def probe_args(plan: Mapping[str, Any], host: str, settings: Mapping[str, Any], play_hosts: int,
               check_mode: bool) -> Dict[str, Any]:
    """The training_probe module's arguments for ``host``. ``settings`` holds the role's knobs (the preflight
    role's variables without their prefix)."""
    node = node_view(plan, host)
    container = node.get("container") or {}
    rdma = flag(settings, "rdma", uses_rdma(plan, container))
    args: Dict[str, Any] = {
        "node": host,
        "lock": {"run_id": plan["run_id"], "run_dir": node["run_dir"], "data_cache_dir": data_cache_dir(plan, settings),
                 "controller": settings.get("controller") or "?", "address": settings.get("address") or host,
                 "take": flag(settings, "lock_take", not check_mode),
                 "takeover": flag(settings, "takeover", False),
                 "stale_after": float(settings.get("lock_stale_s", 1800))},
        "docker_host": settings.get("docker_socket") or DEFAULT_HOST,
        "image": container.get("image"),
        "devices": list(container.get("devices") or []),
        "mounts": [volume.split(":")[0] for volume in container.get("volumes") or []
                   if volume.split(":")[0] not in (node.get("directories") or [])],
        "token_required": not flag(settings, "mock_data", plan.get("mock_data", True)),
        # training_gpu_arch=auto: the arch the plan detected
        "gpu_arch": (settings.get("gpu_arch") if str(settings.get("gpu_arch") or "").lower() != "auto" else None)
        or plan.get("gpu_arch"),
        "gpu_tools": list(settings.get("gpu_tools") or []),
        "gpu_arch_map": dict(settings.get("gpu_arch_map") or {}),
        "disk_path": node["run_dir"],
        "min_free_mib": int(settings.get("min_free_mib", 1024)),
        "expected_log_mib": expected_log_mib(plan, settings),
        "shm_size": container.get("shm_size"),
        "rdma": rdma,
    }
    if plan.get("gpu_vendor"):
        args["gpu_vendor"] = plan["gpu_vendor"]
    gpu_count = int(setting(settings, "gpu_count", plan.get("gpus_per_node") or 0))
    if gpu_count > 0:
        args["gpu_count"] = gpu_count
    token = settings.get("hf_token_file") or node.get("hf_token_file")
    # In check mode a handed-over token is not copied, so not looked for.
    if token and not (check_mode and flag(settings, "hf_token_handed", False)):
        args["token_file"] = token
    if flag(settings, "check_gpu_errors", True):
        args["kernel_log"] = kernel_log_args(settings)
        if settings.get("ras_root"):
            args["ras_root"] = settings["ras_root"]
    if flag(settings, "rdma_ports", rdma):
        args["rdma_ports"] = {"sysfs": settings.get("rdma_sysfs") or "/sys/class/infiniband",
                              "min_rate_gbps": float(settings.get("rdma_rate_gbps") or 0)}
    if flag(settings, "check_coordinator_port", True) and int(node.get("node_rank") or 0) == 0 \
            and int(node.get("nnodes") or 1) > 1:
        args["coordinator_port"] = node.get("coordinator_port")
    if checks_shared_cache(plan, settings, play_hosts):
        writer = marker_writer(plan)
        args["shared_marker"] = {"path": marker_path(plan, settings), "token": "%s:%s" % (plan["run_id"], writer),
                                 "writer": writer, "wait": float(setting(settings, "shared_wait", 30)),
                                 "mode": "write" if host == writer else "read"}
    return args


def kernel_log_args(settings: Mapping[str, Any], privilege: str = "") -> Dict[str, Any]:
    """The probe's kernel_log argument; `privilege` "none" in the task that runs with become."""
    mode = str(settings.get("kernel_log") or "become")
    if mode not in KERNEL_LOG_MODES:
        raise ConfigError("preflight_kernel_log", "become, user or skip", mode)
    since = settings.get("kernel_log_since")
    try:
        window_seconds(since)
    except ValueError as exc:
        raise ConfigError("preflight_kernel_log_since", "boot or a duration such as 24h, 7d, 90m or 3600",
                          str(since)) from exc
    return {"command": list(settings.get("kernel_log_command") or ["dmesg"]),
            "patterns": list(settings.get("gpu_error_patterns") or []), "since": str(since or "boot"),
            "privilege": privilege or KERNEL_LOG_MODES[mode], "check_sudo": flag(settings, "check_sudo", True)}


def kernel_log_only_args(host: str, settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The arguments of the probe that reads the kernel log as root (the preflight role's task with become)."""
    return {"node": host, "docker_host": "", "python_modules": [],
            "kernel_log": kernel_log_args(settings, privilege="none")}


def token_dest(plan: Mapping[str, Any], host: str, settings: Mapping[str, Any]) -> str:
    """Where the handed-over HF token goes on ``host``: the role's file, or the plan's."""
    return str(settings.get("hf_token_file") or node_view(plan, host).get("hf_token_file") or "")


def takeover_args(plan: Mapping[str, Any], host: str, settings: Mapping[str, Any],
                  took_over: Mapping[str, Any]) -> Dict[str, Any]:
    """training_cleanup's arguments that tear down the run this one takes over on ``host``."""
    return {"docker_host": "unix://%s" % settings["docker_socket"] if settings.get("docker_socket") else DEFAULT_HOST,
            "run_id": str(took_over["run_id"]), "node": host, "address": settings.get("address") or host,
            "taken_over_by": {"by": plan["run_id"], "controller": settings.get("controller") or "?"}}


def verdict(host: str, checks: Sequence[Mapping[str, Any]], inventory_file: str) -> str:
    """The node's preflight failure, every failed check named, or "" when every check passed. A check's advice
    that says ``-i <inventory>`` names the run's inventory."""
    failed = ["%s: %s" % (check["check"], check["detail"]) for check in checks if not check["ok"]]
    if not failed:
        return ""
    return ("preflight failed on %s: %s" % (host, "; ".join(failed))).replace(
        "-i <inventory>", "-i " + (inventory_file or "<inventory>"))
