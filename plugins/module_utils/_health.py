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
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _gpus, _neuron, _tpu

Check = Dict[str, Any]
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

# NVIDIA XIDs that say the node's GPU is broken (NHC-style lists; NVIDIA's XID catalogue names them). Every other
# XID is reported, not failed: 13, 31, 43 and 45 are a program's faults, and a node keeps them in its kernel log
# until it reboots.
CRITICAL_XIDS: Dict[int, str] = {
    48: "double-bit ECC error", 56: "display engine error", 57: "error programming video memory interface",
    58: "unstable video memory interface", 62: "internal micro-controller halt", 63: "ECC page retirement or row "
    "remapping recording event", 64: "ECC page retirement or row remapper recording failure",
    65: "video processor exception", 68: "NVDEC0 exception", 69: "graphics engine class error",
    73: "NVENC2 error", 74: "NVLink error", 79: "GPU has fallen off the bus", 80: "corrupted data sent to GPU",
    81: "VGA subsystem error", 92: "high single-bit ECC error rate", 95: "uncontained ECC error",
    119: "GSP RPC timeout", 120: "GSP error",
}
REPORTED_XIDS: Dict[int, str] = {
    13: "graphics engine exception: an application's fault", 31: "GPU memory page fault: an application's fault",
    43: "GPU stopped processing: an application's fault", 45: "preemptive cleanup, after an earlier error",
    94: "contained ECC error: the application was stopped, the GPU goes on",
}
XID = re.compile(r"NVRM: Xid \(PCI:[^)]*\): (\d+)")
# amdgpu's messages (drivers/gpu/drm/amd/amdgpu; real lines in tests/fixtures/real-logs/node_health_real.txt):
# (pattern, meaning, critical). Critical: the GPU is lost or its memory is bad. Reported: a job's hang or bad
# address, which the driver recovers from by resetting a ring or the GPU.
AMDGPU_MESSAGES: List[Tuple[str, str, bool]] = [
    (r"amdgpu.*GPU reset\(\d+\) failed", "GPU reset failed", True),
    (r"amdgpu.*GPU reset end with ret = -\d+", "GPU reset failed", True),
    (r"amdgpu.*device lost from bus", "GPU has fallen off the bus", True),
    (r"amdgpu.*[Uu]ncorrectable hardware error", "uncorrectable memory or hardware error (RAS)", True),
    (r"amdgpu.*[Pp]oison consumption", "poisoned memory consumed (RAS)", True),
    (r"amdgpu.*ring \S+ timeout", "ring timeout: a job hung the GPU", False),
    (r"amdgpu.*GPU reset begin", "GPU reset by the driver", False),
    (r"amdgpu.*reset failed", "ring reset failed: the driver resets the GPU", False),
    (r"amdgpu.*MES(?:\(\d+\))? failed", "MES firmware did not answer: the driver resets the GPU", False),
    (r"amdgpu.*(?:page fault|VM fault|retry fault)", "GPU page fault: an application's bad address", False),
    (r"amdgpu.*\*ERROR\*", "amdgpu error", False),
]
FALLEN_OFF = (re.compile(r"NVRM: .*fallen off the bus"), "GPU has fallen off the bus")
# The patterns of GPU error lines (users add theirs: preflight_gpu_error_patterns, each a critical one).
GPU_ERROR_PATTERNS: List[str] = [pattern for pattern, _meaning, _critical in AMDGPU_MESSAGES] + [
    XID.pattern, FALLEN_OFF[0].pattern]
# A kernel log line's time, seconds since boot (dmesg; journalctl -k -o short-monotonic).
MONOTONIC = re.compile(r"^\s*\[\s*(\d+\.\d+)\]")
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
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
    --query-gpu=... --format=csv`` (a header line, then one line each; ``_gpus.nvidia_csv``); ``tpu-info`` (its
    chip table, one row per TPU chip; ``_tpu.parse_tpu_info``).
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
    if name == _tpu.TOOL:
        found = _tpu.parse_tpu_info(output)
        return found["count"], found["models"]
    return None, []


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def gpu_count_check(tool: str, output: str, expected: int) -> Check:
    if os.path.basename(tool) == _neuron.TOOL:
        return neuron_core_check(tool, output, expected)
    count, models = gpu_inventory(tool, output)
    if count is None:
        return check("gpu_count", False, "%s: output not in a format known to count GPUs in" % tool)
    listed = "; ".join(sorted(set(m for m in models if m))) or "no model named"
    detail = "%s lists %d GPU%s (%s), the plan needs %d" % (tool, count, "" if count == 1 else "s", listed, expected)
    return check("gpu_count", count == expected, detail)


def neuron_core_check(tool: str, output: str, expected: int) -> Check:
    """A Trainium node runs one process per logical NeuronCore it uses: the plan's processes must fit in the
    cores neuron-ls lists (a run may use fewer, as seed 003's 32 processes on a trn2's 64)."""
    found = _neuron.parse_neuron_ls(output)
    detail = "%s lists %d Neuron device%s, %d logical NeuronCores (%s); the plan runs %d processes" % (
        tool, found["count"], "" if found["count"] == 1 else "s", found["logical_cores"],
        found["instance_type"] or found["arch"] or "instance type not printed", expected)
    return check("gpu_count", found["count"] > 0 and found["logical_cores"] >= expected, detail)


# ------------------------------------------------------------------ GPU errors in the kernel log
class Finding(NamedTuple):
    line: str
    meaning: str
    critical: bool


def classify(line: str, extra: Sequence["re.Pattern[str]"] = ()) -> Optional[Finding]:
    """What a kernel log line says about a GPU: an XID by its code, an amdgpu message by its kind, a line of
    `extra` (the user's patterns) as critical; None for any other line."""
    text = line.strip()
    xid = XID.search(text)
    if xid:
        code = int(xid.group(1))
        if code in CRITICAL_XIDS:
            return Finding(text, "XID %d (%s)" % (code, CRITICAL_XIDS[code]), True)
        return Finding(text, "XID %d (%s)" % (code, REPORTED_XIDS.get(code, "not a critical XID")), False)
    if FALLEN_OFF[0].search(text):
        return Finding(text, FALLEN_OFF[1], True)
    for pattern, meaning, critical in AMDGPU_MESSAGES:
        if re.search(pattern, text):
            return Finding(text, meaning, critical)
    if any(pattern.search(text) for pattern in extra):
        return Finding(text, "matches preflight_gpu_error_patterns", True)
    return None


def window_seconds(since: Any) -> Optional[float]:
    """Seconds of a kernel-log window (``24h``, ``7d``, ``90m``, ``3600``); None for ``boot`` (or nothing): since
    boot. Raises ValueError for anything else."""
    if since is None or str(since).strip().lower() in ("", "boot"):
        return None
    match = DURATION.match(str(since))
    if not match:
        raise ValueError("expected boot or a duration such as 24h, 7d, 90m or 3600 (seconds), found %r" % since)
    return float(match.group(1)) * DURATION_UNITS[match.group(2)]


def window_label(since_s: Optional[float]) -> str:
    if since_s is None:
        return "since boot"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if since_s >= size and since_s % size == 0:
            return "in the last %d%s" % (since_s // size, unit)
    return "in the last %gs" % since_s


def in_window(text: str, since_s: Optional[float], uptime_s: Optional[float]) -> List[str]:
    """The lines of the last `since_s` seconds (by their ``[seconds since boot]`` stamp; a line without one goes
    with the line before it); every line without a window or without the node's uptime."""
    lines = text.splitlines()
    if since_s is None or uptime_s is None:
        return lines
    start, kept, keep = uptime_s - since_s, [], True
    for line in lines:
        stamp = MONOTONIC.match(line)
        if stamp:
            keep = float(stamp.group(1)) >= start
        if keep:
            kept.append(line)
    return kept


def uptime(path: str = "/proc/uptime") -> Optional[float]:
    text = _read(path)
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def kernel_log_check(command: Sequence[str], run: Runner, extra_patterns: Sequence[str] = (),
                     since_s: Optional[float] = None, uptime_s: Optional[float] = None, how: str = "") -> Check:
    """GPU errors in the kernel log (``dmesg``, or ``journalctl -k -b -o short-monotonic``) of the window: a
    critical one fails the check, the others are reported in its detail."""
    what = " ".join(command) + (", %s" % how if how else "")
    window = window_label(since_s)
    try:
        proc = run(list(command))
    except (OSError, subprocess.SubprocessError) as exc:
        return check("gpu_errors", False, cannot_read(what, str(exc)))
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["exit status %d" % proc.returncode]
        return check("gpu_errors", False, cannot_read(what, reason[0]))
    extra = [re.compile(pattern) for pattern in extra_patterns]
    found = [f for f in (classify(line, extra) for line in in_window(proc.stdout, since_s, uptime_s)) if f]
    critical = [f for f in found if f.critical]
    reported = [f for f in found if not f.critical]
    note = ("; reported, not failed: %s" % quoted(reported)) if reported else ""
    if critical:
        return check("gpu_errors", False, "%d critical GPU error%s in the kernel log %s (%s): %s%s"
                     % (len(critical), "" if len(critical) == 1 else "s", window, what, quoted(critical), note))
    if reported:
        return check("gpu_errors", True, "no critical GPU error in the kernel log %s (%s)%s" % (window, what, note))
    return check("gpu_errors", True, "no GPU error in the kernel log %s (%s)" % (window, what))


def cannot_read(what: str, reason: str) -> str:
    return ("cannot read the kernel log with %s: %s (preflight_kernel_log_command names another command; "
            "preflight_kernel_log: skip goes on without it)" % (what, reason))


def quoted(findings: Sequence[Finding]) -> str:
    shown = " | ".join("%s: %s" % (f.meaning, f.line) for f in findings[:EVIDENCE_LINES])
    more = len(findings) - EVIDENCE_LINES
    return shown + (" (and %d more)" % more if more > 0 else "")


def gpu_error_lines(text: str, patterns: Sequence[str] = ()) -> List[str]:
    """Every GPU error line of the kernel log, critical or not."""
    extra = [re.compile(pattern) for pattern in patterns]
    return [f.line for f in (classify(line, extra) for line in text.splitlines()) if f]


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
