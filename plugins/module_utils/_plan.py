# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The per-host plan: from a training config and an ordered list of hosts, everything each node needs.

The plan's shape is fixed in docs/architecture.md ("The plan"). This is the full form (`plan_run`); its
compact form and a node's view of either are ``_plan_form``'s.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import re
import secrets
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _arch, _env_catalogue, _gpus, _threshold_file
from ansible_collections.clusterval.training.plugins.module_utils import _stack_maxtext, _stack_megatron, _stack_primus
from ansible_collections.clusterval.training.plugins.module_utils import _nxdt, _stack_nxdt, _stack_torchtitan
from ansible_collections.clusterval.training.plugins.module_utils._config import (
    CHANGEME,
    Selection,
    deep_merge,
    find_changeme,
    is_documentation_key,
    is_unset,
    refuse_non_booleans,
    resolve_user,
    select_model_params,
    to_bool,
    to_float,
    to_int,
    to_str,
    type_name,
    validate_sections,
    walk,
    without_documentation,
)
from ansible_collections.clusterval.training.plugins.module_utils._errors import (
    ConfigError,
    Problem,
    join_path,
    show,
)
from ansible_collections.clusterval.training.plugins.module_utils._run_records import megatron_sizes
from ansible_collections.clusterval.training.plugins.module_utils._run_ship import (
    HF_TOKEN_MOUNT, handed_token_path, launch_script)
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import LOWER, direction_of
from ansible_collections.clusterval.training.plugins.module_utils._launch_docker import (
    container_config, container_labels, container_parts, is_simulator, output_mounts, realism)
from ansible_collections.clusterval.training.plugins.module_utils._models import effective_model
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import (
    ENV_LIKE_KEY, Context, Host, Job, PlanOptions)
# node_view: also for the readers that still import it from here (the integration tests)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import (  # pylint: disable=unused-import
    FULL_FORM, node_view)
from ansible_collections.clusterval.training.plugins.module_utils._stacks import (
    MAXTEXT, MEGATRON, NXDT, PLANNED, PRIMUS, STACKS, TORCHTITAN)
from ansible_collections.clusterval.training.plugins.module_utils._rdma import rdma_setup
from ansible_collections.clusterval.training.plugins.module_utils._versioned import (
    Versioned, cell_as_written, is_versioned, origin, run_labels, to_engine)
from ansible_collections.clusterval.training.plugins.module_utils import _tpu

FRAMEWORKS = PLANNED
DEFAULT_JAX_PORT = 1234
MASTER_PORTS = {MEGATRON: _stack_megatron.DEFAULT_MASTER_PORT, PRIMUS: _stack_primus.DEFAULT_MASTER_PORT,
                NXDT: _nxdt.DEFAULT_MASTER_PORT, TORCHTITAN: _stack_torchtitan.DEFAULT_MASTER_PORT}
DEFAULT_GPUS_PER_NODE = 8
STEPS_KEY = {name: STACKS[name].steps_key for name in PLANNED}
COORDINATOR_KEY = {name: STACKS[name].coordinator_key for name in PLANNED}
SINGLE_NODE_NCCL = {"NCCL_IB_DISABLE": "1", "NCCL_SHM_DISABLE": "0", "NCCL_P2P_DISABLE": "0"}

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Far beyond any validation run (the suite's run tens to a few thousand steps).
MAX_STEPS = 1000000
# Environment names that hold a secret: refused in env_dict (hf_token_file is the way).
SECRET_NAME = re.compile(r"(?i)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)")
# The shapes of config.container_config, checked before anything else reads it.
CONTAINER_CONFIG_SHAPES = {"env_dict": (dict, "an object of variable names to values"),
                           "volume_dict": (dict, "an object of host paths to container paths"),
                           "device_list": (list, "a list of devices")}
# The config keys the planner reads (besides the environment-like ones, xla_* flags and _documentation);
# distributed_training and dataset_source are the suite's, their meaning derived (model_params mode, mock_data).
CONFIG_KEYS = frozenset((
    "container_config", "container_image", "container_images", "container_name", "coordinator_ip", "coordinator_port",
    "data_cache_dir", "dataset_source", "distributed_training", "enable_checkpointing", "env_vars", "framework",
    "gpu_access", "gpu_ids", "gpu_vendor", "hf_token_file", "jaxlib_version", "maxtext_root",
    "ld_library_path", "log_dir", "master_address", "master_port", "megatron_arguments", "megatron_root", "mock_data",
    "nic_type", "nnodes", "primus_root", "max_steps", "nxdt", "nxdt_root", "torchtitan_root", "use_generated_config",
    "rdma_lib", "shm_size", "train_script_paths", "training_iterations", "training_steps", "xla_flags",
))
# What a key of the suite that the planner does not use means for the run.
IGNORED_KEY_NOTES = {
    "training_scripts": "the run uses the framework's own training script",
    "hca_id_pattern": "NCCL_IB_HCA comes from nccl_ib_hca / nccl_ib_hca_list",
}
# Values the planner derives from the hosts, so `<changeme>` there is not an error.
DERIVED_PATHS = frozenset((
    "config.nnodes",
    "config.coordinator_ip",
    "config.master_address",
    "config.container_config.env_dict.JAX_COORDINATOR_IP",
    "config.container_config.env_dict.NNODES",
))
HINTS = {
    "config.nccl_ib_hca": "the RDMA devices for NCCL_IB_HCA (set nccl_ib_hca or nccl_ib_hca_list)",
    "config.nccl_ib_hca_list": "the RDMA devices for NCCL_IB_HCA (set nccl_ib_hca_list or nccl_ib_hca)",
    "config.nccl_socket_ifname": "the network interface NCCL bootstraps over",
    "config.gloo_socket_ifname": "the network interface Gloo uses",
    "config.nccl_ib_gid_index": "the RoCE GID index of the RDMA devices",
    "config.training_iterations": "an iteration count (overrides, the action's iterations or -e training_iterations)",
    "config.training_steps": "a step count (overrides, the action's iterations or -e training_iterations)",
}


# -- entry point ----------------------------------------------------------------------------------

def plan_run(raw_config: Mapping[str, Any], hosts: Sequence[Host], options: PlanOptions) -> Dict[str, Any]:
    """The plan of a config in either format; errors name the paths of the config as written."""
    hosts = check_hosts(hosts)
    if not is_versioned(raw_config):
        configured = _stack_nxdt.devices_of(raw_config.get("config") or {}) if isinstance(raw_config, dict) else None
        return plan_document(raw_config, hosts, with_gpus(options, configured), None)
    validate_sections(raw_config)
    written, engine = split_overrides(raw_config, options.overrides)
    options = dataclasses.replace(options, overrides=engine)
    as_written = deep_merge(raw_config, written)
    refuse_non_booleans(as_written)
    versioned = cell_as_written(raw_config, to_engine(as_written, options.sweep))
    try:
        plan = plan_document(versioned.document, hosts, with_gpus(options, versioned.gpus_per_node), versioned)
    except ConfigError as exc:
        raise ConfigError.many(Problem(origin(p.path, versioned.origins), p.expected, p.found)
                               for p in exc.problems) from None
    plan["warnings"] = versioned.warnings + [written_paths(w, versioned) for w in plan["warnings"]]
    return plan


def split_overrides(raw_config: Mapping[str, Any], overrides: Any) -> Tuple[Dict[str, Any], Any]:
    """A versioned config's overrides: at the paths the config has (``training.nccl.ib_hca_list``, which
    errors name) merged over the config as written; at the engine's paths (``config.nccl_ib_hca_list``,
    ``model_params.multi_node...``) over the engine's document."""
    if not isinstance(overrides, dict):
        return {}, overrides
    written: Dict[str, Any] = {}
    engine: Dict[str, Any] = {}
    for key, value in overrides.items():
        in_engine_shape = key == "model_params" and isinstance(value, dict) and \
            bool(set(value) & {"single_node", "multi_node"})
        # config: the engine's settings, a superset of the Megatron-LM format's own config section
        target = written if key in raw_config and key != "config" and not in_engine_shape else engine
        target[key] = value
    return written, engine


def with_gpus(options: PlanOptions, configured: Optional[int]) -> PlanOptions:
    gpus = options.gpus_per_node or configured or DEFAULT_GPUS_PER_NODE
    return dataclasses.replace(options, gpus_per_node=to_int(gpus, "gpus_per_node", minimum=1))


def written_paths(warning: str, versioned: Versioned) -> str:
    """A warning about an engine path, about the config's path instead."""
    path, sep, rest = warning.partition(": ")
    return origin(path, versioned.origins) + sep + rest if sep and " " not in path else warning


def plan_document(raw_config: Mapping[str, Any], hosts: List[Host], options: PlanOptions,
                  versioned: Optional[Versioned]) -> Dict[str, Any]:
    ctx = prepare(raw_config, hosts, options)
    ctx.versioned = versioned
    jobs = make_jobs(ctx, hosts)
    ctx.nnodes = jobs[0].nnodes
    check_parallelism(ctx, jobs[0].nnodes)
    common = common_node_parts(ctx)
    nodes: Dict[str, Any] = {}
    for job in jobs:
        job_parts = job_node_parts(ctx, job, common)
        for rank, host in enumerate(job.hosts):
            nodes[host.name] = node_plan(ctx, job, rank, host, common, job_parts)
    return {
        "form": FULL_FORM,
        "framework": ctx.framework,
        "simulated": common["simulated"],
        **({"realism": common["realism"]} if common["realism"] else {}),
        "config_path": options.config_path,
        "config_name": config_name(options.config_path),
        "run_id": ctx.run_id,
        "mode": ctx.selection.mode,
        "model": ctx.selection.model,
        "gpu_arch": ctx.selection.gpu_arch,
        "gpu_arch_source": ctx.gpu_arch_source,
        **({"gpu_arch_detected": ctx.gpu_arch_detected.as_dict()} if ctx.gpu_arch_detected else {}),
        "gpu_vendor": ctx.gpu_vendor,
        "gpu_vendor_source": ctx.gpu_vendor_source,
        "trains_model": common["trains_model"],
        "effective_model": effective_model(common["trains_model"], ctx.params),
        "remote_user": options.remote_user,
        "data_cache_dir": absolute_path(ctx.config, "data_cache_dir"),
        "mock_data": to_bool(ctx.config.get("mock_data", "True"), "config.mock_data"),
        "final_step": common["log"]["final_step"],
        "total_steps": ctx.total_steps,
        "warmup_steps": common["log"]["warmup_steps"],
        "jobs": [job_summary(job) for job in jobs],
        "gpus_per_node": options.gpus_per_node,
        **judged_against(ctx, jobs[0].nnodes),
        **({"xla_flags_checked": ctx.xla_checked} if ctx.xla_checked else {}),
        **({"nxdt": common["nxdt"]} if "nxdt" in common else {}),
        "warnings": ctx.warnings,
        "nodes": nodes,
    }


def check_hosts(hosts: Sequence[Any]) -> List[Host]:
    if not hosts:
        raise ConfigError("hosts", "at least one host", "an empty list")
    checked: List[Host] = []
    seen = set()
    for index, host in enumerate(hosts):
        path = join_path("hosts", index)
        if not isinstance(host, Host):
            raise ConfigError(path, "a host with a name and an address", show(host))
        if not host.name or host.name in seen:
            raise ConfigError(path, "a unique host name", show(host.name))
        if not host.address or any(ch.isspace() or ch == "\0" for ch in host.address):
            raise ConfigError(join_path(path, "address"), "a host name or IP address", show(host.address))
        seen.add(host.name)
        checked.append(host)
    refuse_shared_addresses(checked)
    return checked


def refuse_shared_addresses(hosts: Sequence[Host]) -> None:
    """Two inventory names for one machine would run two ranks there and blame healthy nodes."""
    first: Dict[str, str] = {}
    for index, host in enumerate(hosts):
        other = first.setdefault(host.address, host.name)
        if other != host.name:
            raise ConfigError(join_path(join_path("hosts", index), "address"),
                              "an address no other host has (%s already has %s)" % (other, host.address),
                              "%s for %s" % (host.address, host.name))


def config_name(config_path: str) -> str:
    base = os.path.basename(config_path or "config")
    return base[:-5] if base.endswith(".json") else base


# -- preparing the config -------------------------------------------------------------------------

def prepare(raw_config: Mapping[str, Any], hosts: Sequence[Host], options: PlanOptions) -> Context:
    validate_sections(raw_config)
    merged = deep_merge(raw_config, options.overrides)
    validate_sections(merged)
    refuse_non_booleans(merged)
    framework = detect_framework(merged, options.framework)
    if options.iterations is not None:
        steps = to_int(options.iterations, "iterations", minimum=1)
        merged["config"][STEPS_KEY[framework]] = str(steps)
    data = resolve_user(merged, options.remote_user)
    gpu_arch, detected = _arch.choose(data, [host.name for host in hosts], options.model, options.gpu_arch,
                                      options.mode, options.gpus_found)
    selection = select_model_params(data, options.model, gpu_arch, options.mode, len(hosts))
    config = data["config"]
    refuse_unset(config, selection)
    refuse_unsafe_strings(config, selection)
    refuse_wrong_container_shapes(config)
    steps_path = join_path("config", STEPS_KEY[framework])
    if STEPS_KEY[framework] not in config:
        raise ConfigError(steps_path, "a step count", "missing")
    total = to_int(config[STEPS_KEY[framework]], steps_path, minimum=1)
    if total > MAX_STEPS:
        raise ConfigError(steps_path, "at most %d steps (a validation run is tens to thousands of steps; the "
                          "run's deadline would end it first)" % MAX_STEPS, show(config[STEPS_KEY[framework]]))
    run_id = make_run_id(options)
    log_dir = absolute_path(config, "log_dir")
    ctx = Context(framework, selection, config, without_documentation(selection.params), options, total,
                  run_id, "%s/clusterval/%s" % (log_dir.rstrip("/"), run_id))
    ctx.gpu_arch_source, ctx.gpu_arch_detected = _arch.arch_source(options.gpu_arch, detected), detected
    choose_vendor(ctx, hosts)
    warn_about_nnodes(ctx, len(hosts))
    warn_about_unused_keys(ctx)
    return ctx


def choose_vendor(ctx: Context, hosts: Sequence[Host]) -> None:
    """The run's GPU vendor and image: the hosts' training_gpu_vendor (inventory or -e), else config.gpu_vendor,
    else the vendor the image names, else AMD. One run, one vendor (NCCL and RCCL ranks cannot form one job):
    hosts that say otherwise are refused, naming them. The image: training_container_image, else
    config.container_images[vendor], else config.container_image."""
    if ctx.options.container_image is not None:
        ctx.config["container_image"] = to_str(ctx.options.container_image, "container_image")
    given = [(index, host) for index, host in enumerate(hosts) if host.gpu_vendor]
    if given:
        index, first = given[0]
        vendor, source = checked_vendor(first.gpu_vendor, join_path(join_path("hosts", index), "gpu_vendor")), \
            "the inventory's training_gpu_vendor"
        for index, host in given[1:]:
            if host.gpu_vendor != vendor:
                raise ConfigError(join_path(join_path("hosts", index), "gpu_vendor"),
                                  "%s like %s (one run, one GPU vendor: run each vendor's nodes as their own "
                                  "group, -e training_hosts=<group>)" % (vendor, first.name),
                                  "%s for %s" % (show(host.gpu_vendor), host.name))
    elif ctx.config.get("gpu_vendor") is not None and not is_unset(ctx.config["gpu_vendor"]):
        vendor, source = checked_vendor(ctx.config["gpu_vendor"], "config.gpu_vendor"), "config.gpu_vendor"
    else:
        named = _gpus.vendor_of_image(str(ctx.config.get("container_image", "")))
        vendor, source = (named, "the image") if named else (_gpus.AMD, "the default")
    vendor, source = detected_vendor(ctx, hosts, vendor, source)
    ctx.gpu_vendor, ctx.gpu_vendor_source = vendor, source
    images = ctx.config.get("container_images")
    if images is not None and not isinstance(images, dict):
        raise ConfigError("config.container_images", "an object of GPU vendor (%s) to image"
                          % ", ".join(_gpus.VENDORS), type_name(images))
    if ctx.options.container_image is None and images and vendor in images and not is_unset(images[vendor]):
        ctx.config["container_image"] = to_str(images[vendor], join_path("config.container_images", vendor))
    arch_vendor = _gpus.vendor_of_arch(ctx.selection.gpu_arch)
    if arch_vendor and arch_vendor != vendor:
        ctx.warnings.append("%s: the parameters of the config's %s block run on %s GPUs (the config has no block for "
                            "them); its result_dict targets are %s's, reported and not judged"
                            % (ctx.selection.path, ctx.selection.gpu_arch, vendor, ctx.selection.gpu_arch))


def detected_vendor(ctx: Context, hosts: Sequence[Host], vendor: str, source: str) -> Tuple[str, str]:
    """With the nodes' GPUs detected: their vendor, unless the inventory or config.gpu_vendor names one, which
    must then be theirs (the image's vendor is checked against the run's with the container spec)."""
    detected = ctx.gpu_arch_detected
    if detected is None or detected.vendor not in _gpus.VENDORS or detected.vendor == vendor:
        return vendor, source
    if source in ("the default", "the image"):
        return detected.vendor, "detected on the nodes by %s" % ", ".join(detected.tools)
    index = next((i for i, host in enumerate(hosts) if host.gpu_vendor), 0)
    raise ConfigError("config.gpu_vendor" if source == "config.gpu_vendor" else
                      join_path(join_path("hosts", index), "gpu_vendor"),
                      "the vendor of the nodes' GPUs, %s (%s)" % (detected.vendor, detected.text),
                      "%s (%s)" % (vendor, source))


def checked_vendor(value: Any, path: str) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in _gpus.VENDORS:
        raise ConfigError(path, "a GPU vendor (%s)" % ", ".join(_gpus.VENDORS), show(value))
    return text


def warn_about_unused_keys(ctx: Context) -> None:
    for key in ctx.config:
        if is_documentation_key(key) or key in CONFIG_KEYS or ENV_LIKE_KEY.match(key) or key.startswith("xla_"):
            continue
        note = IGNORED_KEY_NOTES.get(key, "clusterval.training does not use it")
        ctx.warnings.append("%s: ignored (%s)" % (join_path("config", key), note))


def refuse_wrong_container_shapes(config: Mapping[str, Any]) -> None:
    container = config.get("container_config", {})
    if not isinstance(container, dict):
        raise ConfigError("config.container_config", "an object", type_name(container))
    for key, (kind, expected) in CONTAINER_CONFIG_SHAPES.items():
        if key in container and not isinstance(container[key], kind):
            raise ConfigError(join_path("config.container_config", key), expected, type_name(container[key]))


def detect_framework(data: Mapping[str, Any], wanted: Optional[str]) -> str:
    config = data["config"]
    if wanted is None:
        wanted = config.get("framework") if isinstance(config.get("framework"), str) else None
    if wanted is not None:
        if wanted not in FRAMEWORKS:
            raise ConfigError("framework", "one of %s" % ", ".join(FRAMEWORKS), show(wanted))
        return wanted
    if "torchtitan_root" in config:
        return TORCHTITAN
    if "training_steps" in config or "coordinator_ip" in config:
        return MAXTEXT
    if "training_iterations" in config or "master_address" in config:
        return MEGATRON
    image = str(config.get("container_image", "")).lower()
    if "megatron" in image:
        return MEGATRON
    if "jax" in image or "maxtext" in image:
        return MAXTEXT
    raise ConfigError("config", "training_steps (MaxText) or training_iterations (Megatron-LM)",
                      "neither; set framework")


def refuse_unset(config: Mapping[str, Any], selection: Selection) -> None:
    """Every `<changeme>` the planner cannot derive is listed at once."""
    derived = set(DERIVED_PATHS)
    for pair in (("nccl_ib_hca", "nccl_ib_hca_list"), ("nccl_ib_hca_list", "nccl_ib_hca")):
        if pair[0] in config and not is_unset(config[pair[0]]):
            derived.add(join_path("config", pair[1]))
    params = {key: value for key, value in selection.params.items() if key != "result_dict"}
    paths = [path for path in find_changeme(config, "config") if path not in derived]
    paths += find_changeme(params, selection.path)
    if paths:
        raise ConfigError.many(
            Problem(path, HINTS.get(path, "a value set in the config or through overrides"), CHANGEME)
            for path in paths)


def refuse_unsafe_strings(config: Mapping[str, Any], selection: Selection) -> None:
    for root, path in ((config, "config"), (selection.params, selection.path)):
        for found, value in walk(root, path):
            if isinstance(value, str) and ("\n" in value or "\0" in value or "\r" in value):
                raise ConfigError(found, "a single-line value without NUL", show(value))
        if isinstance(root, dict):
            for key in iter_keys(root):
                if "\n" in key or "\0" in key:
                    raise ConfigError(path, "keys without newline or NUL", show(key))


def iter_keys(value: Any):
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from iter_keys(item)


def make_run_id(options: PlanOptions) -> str:
    if options.run_id is not None:
        if not isinstance(options.run_id, str) or not RUN_ID.match(options.run_id):
            raise ConfigError("run_id", "letters, digits, '_', '.', '-' (starting with a letter or digit)",
                              show(options.run_id))
        return options.run_id
    now = options.now or datetime.datetime.now(datetime.timezone.utc)
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", config_name(options.config_path))
    # Two runs started in the same second never share an id (nor run dirs, watch state, reports).
    return "%s-%s-%s" % (now.strftime("%Y%m%dT%H%M%SZ"), secrets.token_hex(3), name)


def absolute_path(config: Mapping[str, Any], key: str) -> str:
    path = join_path("config", key)
    value = to_str(config.get(key, ""), path)
    if not value.startswith("/"):
        raise ConfigError(path, "an absolute path", "missing" if key not in config else show(value))
    return value


def warn_about_nnodes(ctx: Context, nhosts: int) -> None:
    value = ctx.config.get("nnodes")
    if value is None or is_unset(value):
        return
    declared = to_int(value, "config.nnodes", minimum=1)
    if declared != nhosts:
        ctx.warnings.append("config.nnodes says %d but the plan has %d hosts; the hosts win" % (declared, nhosts))


# -- jobs -----------------------------------------------------------------------------------------

def make_jobs(ctx: Context, hosts: Sequence[Host]) -> List[Job]:
    tpu = ctx.gpu_vendor == _tpu.TPU   # JAX's TPU discovery: the first worker, on its own port
    port = _tpu.DISCOVERY_PORT if tpu else coordinator_port(ctx)
    if ctx.selection.mode == "single_node":
        return [Job("job-%d" % index, [host], "localhost", port) for index, host in enumerate(hosts)]
    return [Job("job-0", list(hosts), hosts[0].address if tpu else coordinator_address(ctx, hosts), port)]


def coordinator_address(ctx: Context, hosts: Sequence[Host]) -> str:
    key = COORDINATOR_KEY[ctx.framework]
    value = ctx.config.get(key)
    if value is None or is_unset(value) or str(value).strip() in ("", "localhost", "127.0.0.1"):
        return hosts[0].address
    address = to_str(value, join_path("config", key)).strip()
    if address not in {host.address for host in hosts}:
        ctx.warnings.append("config.%s %s is not the address of any planned host; every node will "
                            "connect to it" % (key, address))
    return address


def coordinator_port(ctx: Context) -> int:
    if ctx.framework in MASTER_PORTS:
        value = ctx.config.get("master_port", MASTER_PORTS[ctx.framework])
        return to_int(value, "config.master_port", minimum=1)
    env = container_config(ctx).get("env_dict") or {}
    path = "config.container_config.env_dict.JAX_COORDINATOR_PORT"
    value = env.get("JAX_COORDINATOR_PORT", ctx.config.get("coordinator_port", DEFAULT_JAX_PORT))
    port = to_int(value, path, minimum=1)
    if port > 65535:
        raise ConfigError(path, "a TCP port (1-65535)", show(value))
    return port


def check_parallelism(ctx: Context, nnodes: int) -> None:
    gpus = to_int(ctx.options.gpus_per_node, "gpus_per_node", minimum=1)
    if ctx.gpu_vendor == _tpu.TPU:
        _tpu.check_job(ctx.framework, ctx.selection.gpu_arch, ctx.selection.path)
    if ctx.framework == MAXTEXT:
        _stack_maxtext.check_parallelism(ctx.params, gpus, nnodes, ctx.selection.path, ctx.gpu_vendor)
        return
    if ctx.framework == NXDT:
        _stack_nxdt.check_parallelism(ctx, nnodes, gpus)
        return
    if ctx.framework == TORCHTITAN:
        _stack_torchtitan.check_parallelism(ctx, nnodes, gpus)
        return
    path = ctx.selection.path
    tp = to_int(ctx.params.get("tensor_parallelism", "1"), join_path(path, "tensor_parallelism"), minimum=1)
    pp = to_int(ctx.params.get("pipeline_parallelism", "1"), join_path(path, "pipeline_parallelism"), minimum=1)
    if (gpus * nnodes) % (tp * pp):
        raise ConfigError(path, "tensor_parallelism x pipeline_parallelism dividing the %d GPUs of the job"
                          % (gpus * nnodes), "%d x %d" % (tp, pp))
    check_megatron_batch(ctx.params, path, gpus * nnodes // (tp * pp))


def check_megatron_batch(params: Mapping[str, Any], path: str, data_parallel: int) -> None:
    """Megatron-LM asserts global batch % (micro batch x data-parallel size) == 0 at start-up."""
    micro = to_int(params.get("micro_batch_size"), join_path(path, "micro_batch_size"), minimum=1)
    batch = to_int(params.get("batch_size"), join_path(path, "batch_size"), minimum=1)
    if batch % (micro * data_parallel):
        raise ConfigError(join_path(path, "batch_size"),
                          "a multiple of micro_batch_size x data-parallel size = %d x %d = %d (Megatron-LM refuses "
                          "other global batch sizes)" % (micro, data_parallel, micro * data_parallel), show(batch))


def job_summary(job: Job) -> Dict[str, Any]:
    return {"name": job.name, "hosts": [host.name for host in job.hosts], "nnodes": job.nnodes,
            "coordinator_address": job.coordinator_address, "coordinator_port": job.coordinator_port}


def warmup_steps(ctx: Context) -> int:
    default = STACKS[ctx.framework].default_warmup
    value = ctx.options.warmup_steps
    steps = default if value is None else to_int(value, "warmup_steps", minimum=0)
    if steps >= ctx.total_steps and "warmup" not in " ".join(ctx.warnings):
        ctx.warnings.append("warmup_steps %d leaves no step of the %d to judge" % (steps, ctx.total_steps))
    return steps


# -- thresholds -----------------------------------------------------------------------------------

def judged_against(ctx: Context, nnodes: int) -> Dict[str, Any]:
    """The plan's thresholds: the config's result_dict, or the versioned format's threshold file."""
    if ctx.versioned is None:
        return {"thresholds": thresholds(ctx)}
    versioned = ctx.versioned
    labels = dict(run_labels(ctx.framework, ctx.params), NNODES=nnodes, STEPS=ctx.total_steps)
    if ctx.framework == MAXTEXT:
        batch = _stack_maxtext.typed(labels.get("BATCH"), join_path(ctx.selection.path, "per_device_batch_size"))
        labels["GBS"] = batch * nnodes * ctx.options.gpus_per_node if isinstance(batch, (int, float)) else None
    path = _threshold_file.find(ctx.options.config_path, versioned.threshold_json)
    source = {"sweep": versioned.sweep, "run_settings": labels, "scaling_baseline": versioned.scaling_baseline}
    if path is None:
        ctx.warnings.append("threshold_json: no threshold file beside the config; the metrics are reported, "
                            "not judged")
        return dict(source, thresholds=loss_curve_threshold(versioned), threshold_file=None)
    choice = _threshold_file.choose(_threshold_file.load(path), labels, versioned.cell, versioned.enforce_thresholds,
                                    os.path.basename(path))
    if choice.name is None or choice.differences:
        ctx.warnings.append(choice.note)
    for threshold in choice.thresholds:
        if threshold["metric"] == "scaling_efficiency_pct" and versioned.scaling_baseline is None:
            threshold.update(set=False, unset_reason="no scaling baseline (scaling_baseline.tokens_per_sec_total "
                                                     "is 0 or missing)")
    return dict(source, thresholds=choice.thresholds + loss_curve_threshold(versioned),
                threshold_file={"path": path, "cell": choice.name, "note": choice.note,
                                "differences": choice.differences,
                                "differences_text": [_threshold_file.difference_text(d) for d in choice.differences]})


def loss_curve_threshold(versioned: Versioned) -> List[Dict[str, Any]]:
    """The suite's loss-curve check as a threshold on the run's loss slope (_versioned.loss_curve)."""
    curve = versioned.loss_curve
    if curve is None:
        return []
    return [{"metric": "loss_slope", "kind": "max", "value": curve["max_slope"], "direction": "lower", "set": True,
             "source": curve["source"], "enforce": curve["enforce"]}]


def thresholds(ctx: Context) -> List[Dict[str, Any]]:
    path = join_path(ctx.selection.path, "result_dict")
    results = ctx.selection.params.get("result_dict", {})
    if not isinstance(results, dict):
        raise ConfigError(path, "an object of metric names to per-GPU targets", type_name(results))
    checks = []
    for metric, value in results.items():
        if is_documentation_key(metric):
            continue
        lower = direction_of(metric) == LOWER
        unset = is_unset(value)
        if unset:
            ctx.warnings.append("%s: no threshold set (<changeme>); the metric is reported, not judged"
                                % join_path(path, metric))
        checks.append({
            "metric": metric,
            "kind": "max" if lower else "min",
            "value": None if unset else to_float(value, join_path(path, metric)),
            "direction": "lower" if lower else "higher",
            "set": not unset,
            "path": join_path(path, metric),
        })
        if not unset and _gpus.vendor_of_arch(ctx.selection.gpu_arch) not in (None, ctx.gpu_vendor):
            # hook (issue 28): another vendor's target says nothing of these GPUs
            checks[-1].update(set=False, value=None, unset_reason="%s %s of %s, not judged on %s GPUs" % (
                metric, value, ctx.selection.gpu_arch, ctx.gpu_vendor))
    if not checks:
        ctx.warnings.append("%s: no thresholds; only completion and convergence are judged" % path)
    return checks


# -- environment ----------------------------------------------------------------------------------

def checked_env(name: str, value: Any, path: str) -> Tuple[str, str]:
    if not isinstance(name, str) or not ENV_NAME.match(name):
        raise ConfigError(path, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", show(name))
    if isinstance(value, bool):
        text = "1" if value else "0"
    else:
        text = to_str(value, path)
    if "\n" in text or "\0" in text:
        raise ConfigError(path, "a single-line value without NUL", show(text))
    return name, text


def config_env(ctx: Context) -> Dict[str, str]:
    """Lowercase environment settings of the config, as the upper-case variables they stand for."""
    env: Dict[str, str] = {}
    for key, value in ctx.config.items():
        if not isinstance(key, str) or not ENV_LIKE_KEY.match(key) or is_unset(value):
            continue
        name = "NCCL_IB_HCA" if key == "nccl_ib_hca_list" else key.upper()
        if key == "nccl_ib_hca_list" and "NCCL_IB_HCA" in env:
            continue
        env.update([checked_env(name, value, join_path("config", key))])
    ctx.warnings.extend(_env_catalogue.unread_variables(
        {join_path("config", key): key.upper() for key in ctx.config
         if isinstance(key, str) and ENV_LIKE_KEY.match(key) and key != "nccl_ib_hca_list"}, as_config_keys=True))
    first = ctx.config.get("nccl_ib_hca")
    second = ctx.config.get("nccl_ib_hca_list")
    if first and second and not is_unset(first) and not is_unset(second) and first != second:
        ctx.warnings.append("config.nccl_ib_hca and config.nccl_ib_hca_list differ; NCCL_IB_HCA=%s" % first)
    return env


def env_vars(ctx: Context) -> Dict[str, str]:
    """``config.env_vars``, the environment of the validation suite's current JAX configs."""
    return read_env_section(ctx, ctx.config.get("env_vars", {}), "config.env_vars")


def env_dict(ctx: Context) -> Dict[str, str]:
    return read_env_section(ctx, container_config(ctx).get("env_dict", {}), "config.container_config.env_dict")


def read_env_section(ctx: Context, values: Any, path: str) -> Dict[str, str]:
    env = env_section(values, path)
    ctx.warnings.extend(_env_catalogue.unread_variables({join_path(path, name): name for name in env},
                                                        as_config_keys=False))
    return env


def env_section(values: Any, path: str) -> Dict[str, str]:
    if not isinstance(values, dict):
        raise ConfigError(path, "an object of variable names to values", type_name(values))
    refuse_secrets(values, path)
    return dict(checked_env(name, value, join_path(path, name)) for name, value in values.items()
                if not is_documentation_key(name) and not is_unset(value))


def refuse_secrets(values: Mapping[str, Any], path: str) -> None:
    """A token in the environment would be in the plan, plan.json, the output and docker inspect."""
    for name in values:
        if isinstance(name, str) and SECRET_NAME.search(name) and not is_unset(values[name]):
            raise ConfigError(join_path(path, name), "no secret in env_dict: put the token in a file and set "
                              "config.hf_token_file to its path (mounted read-only, never in the plan)",
                              "a value (not shown)")


# -- per-node parts -------------------------------------------------------------------------------

def common_node_parts(ctx: Context) -> Dict[str, Any]:
    """What is the same on every node of every job, computed once."""
    data_cache_dir = absolute_path(ctx.config, "data_cache_dir")
    env = {"HF_HOME": data_cache_dir}
    ld_library_path = ctx.config.get("ld_library_path", _gpus.VENDOR_FACTS[ctx.gpu_vendor].ld_library_path)
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = to_str(ld_library_path, "config.ld_library_path")
    env.update(config_env(ctx))
    framework = STACK_PARTS[ctx.framework](ctx, data_cache_dir)
    env.update(framework["env"])
    if ctx.selection.mode == "single_node":
        # the suite's single-node defaults, exported before the config's own: a value the config sets wins
        env.update(SINGLE_NODE_NCCL)
    env.update(env_vars(ctx))
    env.update(env_dict(ctx))
    env = vendor_env(ctx, env)
    container = container_parts(ctx)
    directories = unique([ctx.run_dir, absolute_path(ctx.config, "log_dir"), data_cache_dir]
                         + framework["directories"] + output_mounts(ctx, framework["workdir"]))
    hf_token_file = handed_token_path(ctx.run_dir) if ctx.options.hf_token_handed else ctx.config.get("hf_token_file")
    return {**framework, "env": env, "container": container, "directories": directories,
            "simulated": is_simulator(container["image"]),
            "realism": realism(container["image"], ctx.gpu_vendor == _tpu.TPU),
            "hf_token_file": hf_token_file if isinstance(hf_token_file, str) else None,
            "log": run_log(ctx)}


def run_log(ctx: Context) -> Dict[str, Any]:
    """How the run reads every node's log, decided once by the stack: the run asks no stack question."""
    stack = STACKS[ctx.framework]
    return {"format": stack.parser, "final_step": stack.final_step(ctx.total_steps), "warmup_steps": warmup_steps(ctx)}


def node_log(common: Mapping[str, Any], node: Mapping[str, Any], stack: str) -> Dict[str, Any]:
    """The node's ``log`` block: the run's, with the sizes its parser needs for tokens per GPU."""
    return {**common["log"], **(megatron_sizes(node) if STACKS[stack].sized_log else {})}


def vendor_env(ctx: Context, env: Dict[str, str]) -> Dict[str, str]:
    """The environment less the other vendor's stack (on NVIDIA: HSA_*, HIP_*, RCCL_*, NVTE_CK_*...), with a
    warning naming what was left out; and on NVIDIA, a warning when NCCL_IB_HCA names no ConnectX HCA."""
    vendor = _gpus.VENDOR_FACTS[ctx.gpu_vendor]
    foreign = sorted(name for name in env if vendor.foreign_env.match(name))
    if foreign:
        ctx.warnings.append("not set on %s GPUs (the other vendor's stack reads them): %s"
                            % (ctx.gpu_vendor, ", ".join(foreign)))
    hcas = [hca for hca in env.get("NCCL_IB_HCA", "").lstrip("=^").split(",") if hca.strip()]
    provider = vendor.hca_provider
    if provider and hcas and not any(hca.strip().startswith(provider) for hca in hcas) \
            and not isinstance(ctx.config.get("nic_type"), str):
        ctx.warnings.append("NCCL_IB_HCA names %s: %s nodes usually have %s HCAs (set config.nic_type to say "
                            "which NIC the nodes have)" % (", ".join(hcas), ctx.gpu_vendor, provider))
    return {name: value for name, value in env.items() if name not in foreign}


STACK_PARTS = {MAXTEXT: _stack_maxtext.maxtext_parts, MEGATRON: _stack_megatron.megatron_parts,
               PRIMUS: _stack_primus.primus_parts, NXDT: _stack_nxdt.nxdt_parts,
               TORCHTITAN: _stack_torchtitan.torchtitan_parts}


def unique(values: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(values))


def job_node_parts(ctx: Context, job: Job, common: Mapping[str, Any]) -> Dict[str, Any]:
    log_path = "%s/training.log" % ctx.run_dir
    exit_path = "%s/training.exit" % ctx.run_dir
    script_path = "%s/launch.sh" % ctx.run_dir
    rdma = rdma_setup(ctx.config, common["container"]["volumes"], common["env"], job.nnodes > 1, log_path)
    ctx.warnings.extend(w for w in rdma["warnings"] if w not in ctx.warnings)
    script = launch_script(ctx.run_id, common["workdir"], common["run_lines"], exit_path, rdma["prelude"])
    files = [{"path": script_path, "mode": "0755", "content": script}]
    files.extend(common["files"])
    labels = container_labels(ctx.run_id, job.name, ctx.run_dir, absolute_path(ctx.config, "data_cache_dir"))
    return {"log_path": log_path, "exit_path": exit_path, "files": files, "labels": labels,
            "launch": {"argv": ["sh", script_path], "workdir": common["workdir"], "command": common["command"],
                       "hf_token_path": HF_TOKEN_MOUNT,
                       "script_candidates": common["script_candidates"]}}


def node_env(ctx: Context, job: Job, rank: int, common: Mapping[str, Any]) -> Dict[str, str]:
    env = dict(common["env"])
    env["NNODES"] = str(job.nnodes)
    env["NODE_RANK"] = str(rank)
    if ctx.gpu_vendor == _tpu.TPU:
        # JAX's TPU discovery joins the hosts (its coordinator: the first worker, port 8482)
        env.update(_tpu.worker_env(ctx.selection.gpu_arch, [host.address for host in job.hosts], rank,
                                   _tpu.slice_count(ctx.params, ctx.selection.path), ctx.options.gpus_per_node))
    elif ctx.framework == MAXTEXT:
        env["JAX_COORDINATOR_IP"] = job.coordinator_address
        env["JAX_COORDINATOR_PORT"] = str(job.coordinator_port)
        env["JAX_COORDINATOR_ADDRESS"] = "%s:%d" % (job.coordinator_address, job.coordinator_port)
        env["JAX_PROCESS_INDEX"] = str(rank)
        env["JAX_PROCESS_COUNT"] = str(job.nnodes)
    else:
        env["MASTER_ADDR"] = job.coordinator_address
        env["MASTER_PORT"] = str(job.coordinator_port)
    return env


def node_plan(ctx: Context, job: Job, rank: int, host: Host, common: Mapping[str, Any],
              job_parts: Mapping[str, Any]) -> Dict[str, Any]:
    container = dict(common["container"])
    container["command"] = job_parts["launch"]["argv"]
    container["env"] = node_env(ctx, job, rank, common)
    container["labels"] = job_parts["labels"]
    launch = job_parts["launch"]
    if ctx.framework == NXDT:
        launch = dict(launch, torchrun=_stack_nxdt.node_torchrun(ctx.options.gpus_per_node, job.nnodes, rank,
                                                                 job.coordinator_address, job.coordinator_port,
                                                                 ctx.run_dir))
    node = {
        "host": host.name,
        "address": host.address,
        "job": job.name,
        "node_rank": rank,
        "nnodes": job.nnodes,
        "coordinator_address": job.coordinator_address,
        "coordinator_port": job.coordinator_port,
        "gpus": ctx.options.gpus_per_node,
        "prints_steps": STACKS[ctx.framework].prints_steps(rank, job.nnodes),
        "run_dir": ctx.run_dir,
        "log_path": job_parts["log_path"],
        "exit_code_path": job_parts["exit_path"],
        "hf_token_file": common["hf_token_file"],
        "directories": common["directories"],
        "files": job_parts["files"],
        "container": container,
        "launch": launch,
    }
    node["log"] = node_log(common, node, ctx.framework)
    return node
