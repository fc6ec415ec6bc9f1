# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU vendors and architectures: the configs' arch keys, and what a node's GPU tool says about its GPUs.

A leaf module (standard library only): the planner reads the vendor facts, the node-side probe parses the
tools' output with it. Real samples of every format: tests/fixtures/real-logs/node_health_real.txt.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Pattern, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _neuron, _tpu

AMD = "amd"
NVIDIA = "nvidia"
TPU = "tpu"
TRAINIUM = _neuron.TRAINIUM
VENDORS = (AMD, NVIDIA, TPU, TRAINIUM)
# Google's TPU generations: the arch keys of a config's model_params (more TPU facts in _tpu.py).
TPU_ARCHS = ("v4", "v5e", "v5p", "v6e")

# GPU model name fragment -> arch key (longest match wins): the validation suite's MI300X -> mi300x,
# MI325X -> mi325, MI350X -> mi350, MI355X -> mi355; NVIDIA's names as nvidia-smi prints them.
MODEL_ARCHS: Dict[str, str] = {
    "MI355X": "mi355", "MI350X": "mi350", "MI325X": "mi325", "MI300X": "mi300x", "MI300A": "mi300a",
    "MI250X": "mi250x", "MI250": "mi250", "MI210": "mi210", "MI200": "mi200", "MI100": "mi100",
    "GB200": "gb200", "GB300": "gb300", "B200": "b200", "B300": "b300", "H200": "h200", "H100": "h100",
    "H800": "h800", "A100": "a100", "L40S": "l40s", "L40": "l40",
}
# gfx target (amd-smi TARGET_GRAPHICS_VERSION, rocm-smi "GFX Version") -> the arch keys built on it.
GFX_ARCHS: Dict[str, Tuple[str, ...]] = {
    "gfx950": ("mi350", "mi355"),
    "gfx942": ("mi300x", "mi300a", "mi325"),
    "gfx90a": ("mi210", "mi250", "mi250x"),
    "gfx908": ("mi100",),
}
AMD_ARCH = re.compile(r"^mi(\d{3})([a-z]?)$")
GFX = re.compile(r"(?:TARGET_GRAPHICS_VERSION:\s*|\"GFX Version\":\s*\")(gfx[0-9a-f]+)"
                 r"|^\s*Name:\s*(gfx[0-9a-f]+)\s*$", re.I | re.M)   # amd-smi, rocm-smi --json; rocminfo's agents
CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9][0-9.]*)")
DRIVER_VERSION = re.compile(r"(?:DRIVER version\s*:|Driver Version:)\s*([0-9][0-9.]*)")
CSV_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")


def arch_key(value: Any) -> str:
    """The canonical form of an arch key or model name: ``MI325X``, ``mi325x`` and ``mi325`` are ``mi325``
    (the suite's keys drop the X from MI325X on); ``MI300X`` is ``mi300x``; ``H100`` is ``h100``."""
    text = str(value or "").strip().lower()
    match = AMD_ARCH.match(text)
    if match and match.group(1) not in ("300", "250"):
        return "mi" + match.group(1)
    return text


def vendor_of_arch(value: Any) -> Optional[str]:
    key = arch_key(value)
    if AMD_ARCH.match(key):
        return AMD
    if key in TPU_ARCHS:
        return TPU
    if key in _neuron.ARCHS:
        return TRAINIUM
    if key in {arch_key(a) for a in MODEL_ARCHS.values()}:
        return NVIDIA
    return None


def vendor_of_image(image: str) -> Optional[str]:
    """The vendor an image reference names: NGC (nvcr.io/nvidia/...), NVIDIA's JAX-Toolbox (ghcr.io/nvidia/...),
    CUDA images -> nvidia; rocm/... -> amd; AWS's Neuron images (public.ecr.aws/neuron/..., ...-neuronx) ->
    trainium; anything else (the simulator, a private registry) -> None."""
    repository = image.split("@", 1)[0].lower()
    if "/neuron/" in repository or "neuronx" in repository:
        return TRAINIUM
    if repository.startswith(("nvcr.io/nvidia/", "nvidia/", "ghcr.io/nvidia/")) or "/cuda" in repository:
        return NVIDIA
    if repository.startswith(("rocm/", "docker.io/rocm/")) or "/rocm/" in repository:
        return AMD
    return None


def arch_of_models(models: Sequence[str], arch_map: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The arch key of the longest model fragment of `arch_map` (default MODEL_ARCHS) in the model names."""
    table = dict(MODEL_ARCHS if arch_map is None else arch_map)
    text = " ".join(models).upper()
    for fragment in sorted(table, key=len, reverse=True):
        if fragment.upper() in text:
            return arch_key(table[fragment])
    return None


def gfx_targets(output: str) -> List[str]:
    return sorted(set((smi or rocminfo).lower() for smi, rocminfo in GFX.findall(output)))


def nvidia_csv(output: str) -> List[Dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=... --format=csv`` (with its header line: ``name, driver_version,
    memory.total [MiB]``; units dropped from the keys). Without a header (``csv,noheader``) the columns are
    ``index, name, driver_version`` when the first is a number, else ``name, driver_version``."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    first = [CSV_UNIT.sub("", cell).strip() for cell in lines[0].split(",")]
    if "name" in first:
        header, rows = first, lines[1:]
    elif first[0].isdigit():
        header, rows = ["index", "name", "driver_version"], lines
    else:
        header, rows = ["name", "driver_version"], lines
    return [dict(zip(header, (cell.strip() for cell in row.split(",")))) for row in rows]


# What the probe asks nvidia-smi: one line per GPU, then its version (the CUDA version the driver supports).
NVIDIA_QUERY = ["--query-gpu=index,name,driver_version,memory.total", "--format=csv"]
NVIDIA_VERSION = ["--version"]


def nvidia_report(query_output: str, version_output: str = "") -> Dict[str, Any]:
    """{vendor, count, models, driver, cuda, arch} from nvidia-smi's CSV query and ``--version`` (or its table
    header, which carries ``Driver Version: ... CUDA Version: ...`` too)."""
    rows = nvidia_csv(query_output)
    models = [row.get("name", "") for row in rows]
    drivers = sorted(set(row.get("driver_version", "") for row in rows if row.get("driver_version")))
    if not drivers:
        found = DRIVER_VERSION.search(version_output)
        drivers = [found.group(1)] if found else []
    cuda = CUDA_VERSION.search(version_output)
    return {"vendor": NVIDIA, "count": len(rows), "models": models, "driver": ", ".join(drivers) or None,
            "cuda": cuda.group(1) if cuda else None, "arch": arch_of_models(models),
            "arch_candidates": []}


def amd_report(models: Sequence[str], count: Optional[int], output: str,
               arch_map: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """{vendor, count, models, gfx, arch, arch_candidates}: the arch from the model name, else from the gfx
    target when only one arch key is built on it (gfx942 alone says MI300X or MI325X: both candidates)."""
    targets = gfx_targets(output)
    arch = arch_of_models(models, arch_map)
    candidates: List[str] = []
    for target in targets:
        candidates.extend(a for a in GFX_ARCHS.get(target, ()) if a not in candidates)
    if arch is None and len(candidates) == 1:
        arch = candidates[0]
    return {"vendor": AMD, "count": count, "models": list(models), "gfx": targets, "arch": arch,
            "arch_candidates": candidates, "driver": None, "cuda": None}


def trainium_report(output: str) -> Dict[str, Any]:
    """{vendor, count, models, arch, ...} from neuron-ls's table: its devices and the instance type (trn1, trn2)."""
    found = _neuron.parse_neuron_ls(output)
    model = "AWS Trainium%s" % ("2" if found["arch"] == "trn2" else "") if found["count"] else ""
    return {"vendor": TRAINIUM, "count": found["count"], "models": [model] * found["count"], "arch": found["arch"],
            "arch_candidates": [], "driver": None, "cuda": None, "instance_type": found["instance_type"],
            "neuron_cores": found["logical_cores"]}


def tpu_report(output: str) -> Dict[str, Any]:
    """{vendor, count, models, arch, ...} from tpu-info's chip table."""
    found = _tpu.parse_tpu_info(output)
    return {"vendor": TPU, "count": found["count"], "models": found["models"], "arch": found["arch"],
            "arch_candidates": [], "driver": None, "cuda": None}


def arch_matches(expected: str, report: Mapping[str, Any]) -> Optional[bool]:
    """Whether the node's GPUs are of the expected arch key; None when the report cannot tell."""
    wanted = arch_key(expected)
    if report.get("arch"):
        return arch_key(report["arch"]) == wanted
    candidates = [arch_key(a) for a in report.get("arch_candidates") or []]
    if candidates:
        return wanted in candidates
    return None


def describe(report: Mapping[str, Any]) -> str:
    """``8 x NVIDIA H100 80GB HBM3 (h100), driver 535.129.03, CUDA 12.2`` or ``8 x AMD Instinct MI300X (mi300x,
    gfx942)``."""
    models = sorted(set(m for m in report.get("models") or [] if m)) or ["no model named"]
    arch = report.get("arch") or ("/".join(report.get("arch_candidates") or []) or "arch unknown")
    extra = [arch] + list(report.get("gfx") or [])
    text = "%s x %s (%s)" % (report.get("count"), "; ".join(models), ", ".join(extra))
    if report.get("driver"):
        text += ", driver %s" % report["driver"]
    if report.get("cuda"):
        text += ", CUDA %s" % report["cuda"]
    return text


# -- what a run on each vendor's nodes needs (the planner picks by vendor, never with `if vendor == ...`) ----

class Vendor(NamedTuple):
    name: str
    label: str
    groups: Tuple[str, ...]              # supplementary groups of the container (AMD: the device nodes' groups)
    gpu_devices: Tuple[str, ...]         # container paths of this vendor's GPU device nodes (config.device_list)
    ld_library_path: Optional[str]       # exported unless config.ld_library_path says otherwise; None: the image's
    foreign_env: Pattern[str]            # environment of the other vendor's stack, never set on these nodes
    maxtext_root: str                    # the MaxText checkout in this vendor's JAX image
    hca_provider: Optional[str]          # the RDMA provider of the vendor's usual NICs (NCCL_IB_HCA names)
    privileged: bool = False             # the container gets every device node of the host (TPU VMs)


ROCM_ONLY_ENV = re.compile(r"^(?:HSA_|HIP_|ROCM_|ROCBLAS_|RCCL_|MIOPEN_|HIPBLASLT_|TENSILE_|AMD_|NVTE_CK_|"
                           r"PYTORCH_ROCM_|GPU_MAX_HW_QUEUES$|TORCH_BLAS_PREFER_HIPBLASLT$)")
NO_ENV = re.compile(r"(?!)")
TPU_DEVICES = ("/dev/vfio", "/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3")
GPU_STACK_ENV = re.compile(r"^(?:NCCL_|TORCH_NCCL_|CUDA_|NVIDIA_|NVTE_|UCX_|HCOLL_)|" + ROCM_ONLY_ENV.pattern[1:])
VENDOR_FACTS: Dict[str, Vendor] = {
    AMD: Vendor(AMD, "AMD Instinct (ROCm)", ("video", "render"), ("/dev/kfd", "/dev/dri"),
                "/opt/rocm/lib:/usr/local/lib:/usr/lib/x86_64-linux-gnu", NO_ENV, "/workspace/maxtext", None),
    # NGC and JAX-Toolbox images set their own LD_LIBRARY_PATH (CUDA, NCCL, HPC-X): never replace it.
    NVIDIA: Vendor(NVIDIA, "NVIDIA (CUDA)", (), (), None, ROCM_ONLY_ENV, "/opt/maxtext", "mlx5"),
    # TPU VMs: a privileged container on the host network, one process per host; /dev/vfio/* on v5e, v5p and
    # v6e, /dev/accel* on v4; no GPU stack, no RDMA (ICI within a slice, DCN across); MaxText's own images
    # keep it in /deps.
    TPU: Vendor(TPU, "Google TPU (libtpu)", (), TPU_DEVICES, None, GPU_STACK_ENV, "/deps", None, True),
    # AWS's Neuron images set their own library path; the containers get every Neuron device and EFA's uverbs.
    TRAINIUM: Vendor(TRAINIUM, "AWS Trainium (Neuron)", (), _neuron.DEVICE_PATHS, None, ROCM_ONLY_ENV,
                     "/workspace/maxtext", "efa"),
}
# How an NVIDIA container gets its GPUs: Docker's device request for the nvidia driver (``--gpus all``: the
# NVIDIA Container Toolkit's runtime hook), or a CDI device request (``--device nvidia.com/gpu=all`` on a
# Docker with CDI: specs under /etc/cdi from ``nvidia-ctk cdi generate``).
GPU_ACCESS = ("device_request", "cdi")


def device_requests(vendor: str, access: str = "device_request",
                    gpu_ids: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Docker's DeviceRequests (community.docker's ``device_requests``) giving a container its GPUs."""
    if vendor != NVIDIA:
        return []
    if access == "cdi":
        names = ["nvidia.com/gpu=%s" % gpu for gpu in gpu_ids] if gpu_ids else ["nvidia.com/gpu=all"]
        return [{"driver": "cdi", "device_ids": names}]
    request: Dict[str, Any] = {"driver": "nvidia", "capabilities": [["gpu"]]}
    if gpu_ids:
        request["device_ids"] = list(gpu_ids)
    else:
        request["count"] = -1
    return [request]


def is_gpu_device(device: str, vendor: Vendor) -> bool:
    """Whether a ``host[:container[:permissions]]`` device is one of `vendor`'s GPU device nodes."""
    parts = device.split(":")
    target = parts[1] if len(parts) > 1 else parts[0]
    return any(target == path or target.startswith(path + "/") for path in vendor.gpu_devices)
