# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Node health before a run: the GPUs the node's tool lists, GPU errors since boot, RDMA ports, log space.

Every check returns ``{check, ok, detail}`` (as `_probe.check`); a failed one quotes the evidence: the tool's
line, the kernel log line, the sysfs file and its content. Nothing here raises on a bad node.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _gpus

Check = Dict[str, Any]
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

# Kernel log lines that say a GPU failed since boot (amdgpu and NVIDIA's XID); users add theirs.
# Sources of real examples: tests/fixtures/real-logs/kernel_real.txt.
GPU_ERROR_PATTERNS: List[str] = [
    r"amdgpu.*GPU reset begin",
    r"amdgpu.*ring \S+ timeout",
    r"amdgpu.*reset failed",
    r"amdgpu.*\*ERROR\*",
    r"amdgpu.*page fault",
    r"amdgpu.*MES(?:\(\d+\))? failed",
    r"amdgpu.*(?:[Uu]ncorrectable|poison)",
    r"NVRM: Xid \(PCI:[^)]*\): \d+",
    r"NVRM: .*fallen off the bus",
]
EVIDENCE_LINES = 3
AMD_SMI_GPU = re.compile(r"^GPU: (\d+)\s*$", re.M)
AMD_SMI_MODEL = re.compile(r"^\s*MARKET_NAME: (.+?)\s*$", re.M)
ROCM_SMI_CARD = re.compile(r"^(card\d+)\b", re.M)
ROCM_SMI_GPU = re.compile(r"^GPU\[(\d+)\]", re.M)
ROCMINFO_AGENT = re.compile(r"^Agent \d+\s*$", re.M)
ROCMINFO_GPU = re.compile(r"^\s*Device Type:\s*GPU\s*$", re.M)
ROCMINFO_MODEL = re.compile(r"^\s*Marketing Name:\s*(.+?)\s*$", re.M)
SYSFS_RATE = re.compile(r"^\s*([0-9.]+)\s*Gb/sec")
RAS_UE = re.compile(r"^ue:\s*(\d+)", re.M)


def check(name: str, ok: bool, detail: str) -> Check:
    return {"check": name, "ok": bool(ok), "detail": detail}


# ------------------------------------------------------------------ GPUs
def gpu_inventory(tool: str, output: str) -> Tuple[Optional[int], List[str]]:
    """(number of GPUs, model names) in a GPU tool's output; count None when the format is not one we know.

    Formats (real samples in tests/fixtures/real-logs/gpu_tools_real.txt): ``amd-smi static --asic`` (text: one
    ``GPU: N`` block each, ``MARKET_NAME:``) or ``--json`` (a list); ``rocm-smi --showproductname`` ``--json``
    (``card0``... keys), ``--csv`` (``card0,...`` rows) or text (``GPU[0]`` lines); ``rocminfo`` (the GPU
    agents: ``Device Type: GPU``, ``Marketing Name:``); ``nvidia-smi
    --query-gpu=... --format=csv`` (a header line, then one line each; ``_gpus.nvidia_csv``).
    """
    name = os.path.basename(tool)
    parsed = _json(output)
    if name.startswith("amd-smi"):
        if isinstance(parsed, list):
            return len(parsed), [str((g.get("asic") or {}).get("market_name", "")) for g in parsed
                                 if isinstance(g, dict)]
        gpus = AMD_SMI_GPU.findall(output)
        return (len(gpus) if gpus else None), AMD_SMI_MODEL.findall(output)
    if name.startswith("rocm-smi"):
        if isinstance(parsed, dict):
            cards = [key for key in parsed if key.startswith("card")]
            return len(cards), [str(parsed[c].get("Card Series") or parsed[c].get("Card series", "")) for c in cards
                                if isinstance(parsed[c], dict)]
        cards = ROCM_SMI_CARD.findall(output)
        if cards:
            return len(set(cards)), []
        gpus = ROCM_SMI_GPU.findall(output)
        return (len(set(gpus)) if gpus else None), []
    if name.startswith("rocminfo"):
        # one block per HSA agent (CPUs too): the GPU agents and their marketing names
        agents = ROCMINFO_AGENT.split(output)[1:]
        gpus = [agent for agent in agents if ROCMINFO_GPU.search(agent)]
        models = [found.group(1) for found in map(ROCMINFO_MODEL.search, gpus) if found]
        return (len(gpus) if agents else None), models
    if name.startswith("nvidia-smi"):
        models = [row.get("name", "") for row in _gpus.nvidia_csv(output)]
        return len(models), models
    return None, []


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def gpu_count_check(tool: str, output: str, expected: int) -> Check:
    count, models = gpu_inventory(tool, output)
    if count is None:
        return check("gpu_count", False, "%s: output not in a format known to count GPUs in" % tool)
    listed = "; ".join(sorted(set(m for m in models if m))) or "no model named"
    detail = "%s lists %d GPU%s (%s), the plan needs %d" % (tool, count, "" if count == 1 else "s", listed, expected)
    return check("gpu_count", count == expected, detail)


# ------------------------------------------------------------------ GPU errors since boot
def kernel_log_check(command: Sequence[str], patterns: Sequence[str], run: Runner) -> Check:
    """GPU error lines in the kernel log (since boot: ``dmesg``, or ``journalctl -k -b``)."""
    what = " ".join(command)
    try:
        proc = run(list(command))
    except (OSError, subprocess.SubprocessError) as exc:
        return check("gpu_errors", False, "cannot read the kernel log with %s: %s (preflight_kernel_log_command "
                                          "names another command; preflight_check_gpu_errors: false skips it)"
                     % (what, exc))
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["exit status %d" % proc.returncode]
        return check("gpu_errors", False, "cannot read the kernel log with %s: %s (preflight_kernel_log_command "
                                          "names another command; preflight_check_gpu_errors: false skips it)"
                     % (what, reason[0]))
    found = gpu_error_lines(proc.stdout, patterns)
    if not found:
        return check("gpu_errors", True, "no GPU error in the kernel log since boot (%s)" % what)
    return check("gpu_errors", False, "%d GPU error line%s in the kernel log since boot (%s): %s"
                 % (len(found), "" if len(found) == 1 else "s", what, " | ".join(found[:EVIDENCE_LINES])))


def gpu_error_lines(text: str, patterns: Sequence[str]) -> List[str]:
    compiled = [re.compile(p) for p in patterns]
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in compiled)]


def ras_check(drm_root: str) -> Check:
    """amdgpu's RAS error counters (``<drm>/card*/device/ras/*_err_count``: ``ue: N`` / ``ce: N``)."""
    files = sorted(glob.glob(os.path.join(drm_root, "card*", "device", "ras", "*_err_count")))
    if not files:
        return check("gpu_ras", True, "no amdgpu RAS counters under %s" % drm_root)
    bad = []
    for path in files:
        text = _read(path)
        match = RAS_UE.search(text or "")
        if text is None or match is None:
            bad.append("%s unreadable" % path)
        elif int(match.group(1)) > 0:
            bad.append("%s: %s" % (path, " ".join(text.split())))
    if bad:
        return check("gpu_ras", False, "uncorrectable GPU errors counted since boot: %s" % "; ".join(bad))
    return check("gpu_ras", True, "%d RAS counters under %s, no uncorrectable error" % (len(files), drm_root))


# ------------------------------------------------------------------ RDMA ports
def rdma_ports_check(sysfs_root: str, min_rate_gbps: float = 0.0) -> Check:
    """Every port under ``<root>/<device>/ports/<n>/``: ``state`` ACTIVE, ``rate`` at least the expected Gb/s."""
    ports = sorted(glob.glob(os.path.join(sysfs_root, "*", "ports", "*")))
    if not ports:
        return check("rdma_ports", False, "no RDMA port under %s" % sysfs_root)
    bad, good = [], []
    for port in ports:
        device, number = port.split(os.sep)[-3], port.split(os.sep)[-1]
        name = "%s port %s" % (device, number)
        state = (_read(os.path.join(port, "state")) or "?").strip()
        rate = (_read(os.path.join(port, "rate")) or "?").strip()
        if "ACTIVE" not in state.upper():
            bad.append("%s state %r (%s/state), expected ACTIVE" % (name, state, port))
            continue
        speed = SYSFS_RATE.match(rate)
        if min_rate_gbps and (speed is None or float(speed.group(1)) < min_rate_gbps):
            bad.append("%s rate %r (%s/rate), expected at least %g Gb/sec" % (name, rate, port, min_rate_gbps))
            continue
        good.append("%s %s" % (name, rate))
    if bad:
        return check("rdma_ports", False, "; ".join(bad))
    return check("rdma_ports", True, "ACTIVE: %s" % ", ".join(good))


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
