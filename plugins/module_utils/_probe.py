# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Node checks before a run: one call looks at everything and returns one verdict per check.

Each check is a dict ``{check, ok, detail}``. Nothing here raises on a bad node: a missing
device or an unreachable daemon is a failed check, so that every node reports every problem.
"""
from __future__ import annotations

import grp
import importlib
import os
import pwd
import re
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _gpus, _health
from ansible_collections.clusterval.training.plugins.module_utils._docker import DockerError, Engine

Check = Dict[str, Any]
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

DOCKER_PID_FILES = ("/var/run/docker.pid", "/run/docker.pid")
MARKER_POLL_S = 0.1
# The daemon's answers to preflight's questions (its version, whether it has the image).
PROBE_TIMEOUT_S = 10.0
# Docker's sizes (`--shm-size 64G`): binary units, an optional trailing b or ib, any case.
SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def check(name: str, ok: bool, detail: str) -> Check:
    return {"check": name, "ok": bool(ok), "detail": detail}


def run_command(argv: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)


def sudo_check(user: str, run: Runner = run_command) -> Optional[Check]:
    """Whether the user may become root without a password (``sudo -n true``, what Ansible's become runs) to read
    the kernel log; None when it may."""
    try:
        proc = run(["sudo", "-n", "true"])
        refused = proc.returncode != 0
        reason = (proc.stderr or "").strip().splitlines()[-1:] or ["exit status %d" % proc.returncode]
    except (OSError, subprocess.SubprocessError) as exc:
        refused, reason = True, [str(exc)]
    if not refused:
        return None
    return check("gpu_errors", False, "reading the kernel log needs sudo, and %s has none (%s; set "
                                      "preflight_kernel_log: skip to go on without it)" % (user, reason[0]))


def host_path(device: str) -> str:
    """The host side of a Docker device or volume spec (`host[:container[:options]]`)."""
    return device.split(":", 1)[0]


def paths_check(name: str, paths: Sequence[str], what: str) -> Check:
    wanted = [host_path(path) for path in paths]
    missing = [path for path in wanted if not os.path.exists(path)]
    if missing:
        return check(name, False, "missing %s: %s" % (what, ", ".join(missing)))
    return check(name, True, "present: %s" % (", ".join(wanted) or "none needed"))


def docker_access(socket_path: str) -> Optional[str]:
    """What keeps this user from the Docker socket (its group, as the docker group owns it), or None."""
    try:
        stat = os.stat(socket_path)
    except OSError:
        return None  # no daemon there: docker_check says so
    if os.access(socket_path, os.R_OK | os.W_OK):
        return None
    user, group = account_name(os.geteuid()), group_name(stat.st_gid)
    if stat.st_gid in os.getgroups():
        reason = "mode %o, owner %s:%s" % (stat.st_mode & 0o777, account_name(stat.st_uid), group)
    elif user in group_members(stat.st_gid):
        reason = "added to group %s after this login: log in again" % group
    else:
        reason = "not in group %s" % group
    return "user %s cannot reach the Docker socket %s (%s)" % (user, socket_path, reason)


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def group_members(gid: int) -> List[str]:
    try:
        return list(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return []


def docker_check(socket_path: str) -> Check:
    refused = docker_access(socket_path)
    if refused:
        return check("docker", False, refused)
    try:
        version = Engine(socket_path, PROBE_TIMEOUT_S).version()
    except (OSError, ValueError) as exc:
        return check("docker", False, "Docker daemon not reachable at %s: %s" % (socket_path, exc))
    return check("docker", True, "Docker %s reachable at %s" % (version, socket_path))


def image_present(socket_path: str, image: str) -> Optional[bool]:
    """Whether the daemon has the image already; None when it cannot tell."""
    try:
        return Engine(socket_path, PROBE_TIMEOUT_S).image(image) is not None
    except (OSError, ValueError, DockerError):
        return None


def token_check(token_file: str) -> Check:
    """The HF token file must exist and hold something; its content is never returned."""
    try:
        size = os.path.getsize(token_file)
    except OSError:
        return check("hf_token", False, "%s missing (the config does not use mock data)" % token_file)
    if size == 0:
        return check("hf_token", False, "%s is empty" % token_file)
    return check("hf_token", True, "%s present" % token_file)


def python_modules_check(names: Sequence[str]) -> Check:
    """Whether the interpreter running this (the node's, as for every module) imports each of `names`.

    community.docker's modules run with that interpreter and need ``requests`` there.
    """
    found, missing = [], []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # a broken install fails the check, never the probe
            missing.append("%s (%s: %s)" % (name, type(exc).__name__, exc))
        else:
            found.append(("%s %s" % (name, getattr(module, "__version__", ""))).strip())
    if missing:
        return check("python_modules", False, "%s cannot import %s (community.docker's modules need requests on "
                                              "the node: python3-requests, or pip install requests)"
                     % (sys.executable, ", ".join(missing)))
    return check("python_modules", True, "%s imports %s" % (sys.executable, ", ".join(found)))


def gpu_check(tools: Sequence[Mapping[str, Any]], arch_map: Mapping[str, str], expected: str,
              run: Runner = run_command) -> Check:
    return gpu_checks(tools, arch_map, expected, None, run)[0]


def tool_vendor(tool: Mapping[str, Any]) -> str:
    """A tool entry's vendor: its `vendor`, else nvidia for nvidia-smi and amd for the others."""
    vendor = str(tool.get("vendor") or "")
    if vendor in _gpus.VENDORS:
        return vendor
    name = os.path.basename(str(tool.get("path", "")))
    return {"neuron-ls": _gpus.TRAINIUM, "tpu-info": _gpus.TPU}.get(
        name, _gpus.NVIDIA if name.startswith("nvidia-smi") else _gpus.AMD)


def gpu_report(tool: Mapping[str, Any], arch_map: Mapping[str, str], run: Runner = run_command) -> Dict[str, Any]:
    """What the node's GPU tool says: vendor, count, models, arch (and gfx targets on AMD; driver and CUDA
    version on NVIDIA, from ``nvidia-smi --version``). Raises OSError/SubprocessError when the tool fails."""
    argv = [str(tool["path"])] + [str(arg) for arg in tool.get("args", [])]
    output = run(argv).stdout
    if tool_vendor(tool) == _gpus.NVIDIA:
        version_args = tool.get("version_args", _gpus.NVIDIA_VERSION)
        version = run([argv[0]] + [str(arg) for arg in version_args]).stdout if version_args else ""
        report = _gpus.nvidia_report(output, version)
    elif tool_vendor(tool) == _gpus.TRAINIUM:
        report = _gpus.trainium_report(output)
    elif tool_vendor(tool) == _gpus.TPU:
        report = _gpus.tpu_report(output)
    else:
        count, models = _health.gpu_inventory(argv[0], output)
        report = _gpus.amd_report(models, count, output, arch_map or None)
        if report["arch"] is None and not report["arch_candidates"]:
            report["arch"] = detect_arch(output, arch_map)
    report.update(tool=argv[0], output=output)
    return report


def gpu_checks(tools: Sequence[Mapping[str, Any]], arch_map: Mapping[str, str], expected: str,
               expected_count: Optional[int], run: Runner = run_command,
               vendor: Optional[str] = None) -> List[Check]:
    return gpu_probe(tools, arch_map, expected, expected_count, run, vendor)[0]


def gpu_probe(tools: Sequence[Mapping[str, Any]], arch_map: Mapping[str, str], expected: str,
              expected_count: Optional[int], run: Runner = run_command,
              vendor: Optional[str] = None) -> Tuple[List[Check], Optional[Dict[str, Any]]]:
    """The node's GPUs from one tool run (the first tool present): the vendor and the arch against the plan's
    (arch keys compared in canonical form: MI325X, mi325x and mi325 are one arch), and with `expected_count`
    the number of GPUs. Returns the checks and the tool's report (None without a tool)."""
    tool = next((t for t in tools if os.access(str(t.get("path", "")), os.X_OK)), None)
    if tool is None:
        return [no_tool_check(tools, expected, expected_count)], None
    try:
        report = gpu_report(tool, arch_map, run)
    except (OSError, subprocess.SubprocessError) as exc:
        return [check("gpu_arch", False, "%s failed: %s" % (tool.get("path"), exc))], None
    name = report["tool"]
    counted = [_health.gpu_count_check(name, report.pop("output"), expected_count)] if expected_count else []
    checks = [vendor_check(name, report, vendor)] if vendor else []
    arch = [arch_check(name, report, expected, vendor)] if expected else []
    return checks + arch + counted, report


def no_tool_check(tools: Sequence[Mapping[str, Any]], expected: Optional[str], expected_count: Optional[int]) -> Check:
    """No GPU tool on the node: the GPUs cannot be counted, which fails the count (a node whose tools live
    elsewhere is named with the paths tried); with no count asked, the arch is the config's."""
    tried = ", ".join(str(t.get("path", "")) for t in tools) or "none (preflight_gpu_tools is empty)"
    if expected_count:
        return check("gpu_count", False, "no GPU tool found, so the plan's %d GPUs cannot be counted: tried %s "
                                         "(preflight_gpu_tools names the node's tools; preflight_gpu_count: 0 skips "
                                         "the count)" % (expected_count, tried))
    return check("gpu_arch", True, "no GPU tool found (tried %s): GPU arch %s taken from the config or "
                                   "training_gpu_arch" % (tried, expected))


def vendor_check(tool: str, report: Mapping[str, Any], vendor: str) -> Check:
    if report["vendor"] != vendor:
        return check("gpu_vendor", False, "%s lists %s GPUs (%s) but the run is planned for %s GPUs (the inventory's "
                                          "training_gpu_vendor, config.gpu_vendor or the image; here: set "
                                          "training_gpu_vendor: %s for this node's group, with a %s image)"
                     % (tool, report["vendor"], _gpus.describe(report), vendor, report["vendor"], report["vendor"]))
    return check("gpu_vendor", True, "%s: %s GPUs" % (tool, vendor))


def arch_check(tool: str, report: Mapping[str, Any], expected: str, vendor: Optional[str]) -> Check:
    planned_vendor = _gpus.vendor_of_arch(expected)
    if planned_vendor and vendor and planned_vendor != vendor:
        # the config has no block for this vendor's GPUs: the run uses another arch's parameters (the plan warns)
        return check("gpu_arch", True, "%s: %s; the config's parameters are those of its %s block"
                     % (tool, _gpus.describe(report), expected))
    matches = _gpus.arch_matches(expected, report)
    if matches is None:
        return check("gpu_arch", False, "%s reported no known GPU model (%s)" % (tool, _gpus.describe(report)))
    if not matches:
        found = report.get("arch") or " or ".join(report.get("arch_candidates") or [])
        return check("gpu_arch", False, "%s found %s but the run is planned for %s (%s; training_gpu_arch picks "
                                        "the config's block)" % (tool, found, expected, _gpus.describe(report)))
    return check("gpu_arch", True, "%s: %s" % (tool, _gpus.describe(report)))


def detect_arch(output: str, arch_map: Mapping[str, str]) -> Optional[str]:
    """The arch key (canonical form) of the longest GPU model name found in a tool's output."""
    text = output.upper()
    for model in sorted(arch_map, key=len, reverse=True):
        if model.upper() in text:
            return _gpus.arch_key(arch_map[model])
    return None


def disk_check(path: str, min_free_mib: int, expected_log_mib: int = 0) -> Check:
    """Free space below `path`: `min_free_mib` plus the log the run is expected to write there."""
    existing = deepest_existing(path)
    stats = os.statvfs(existing)
    free_mib = stats.f_bavail * stats.f_frsize // (1024 * 1024)
    need = min_free_mib + expected_log_mib
    if expected_log_mib:
        detail = "%d MiB free on %s (need %d: the expected log %d MiB + %d MiB to spare)" % (
            free_mib, existing, need, expected_log_mib, min_free_mib)
    else:
        detail = "%d MiB free on %s (need %d)" % (free_mib, existing, need)
    if free_mib < need:
        detail += ": the run's logs would fill the disk (ENOSPC) on this node"
    return check("disk", free_mib >= need, detail)


def size_bytes(size: str) -> Optional[int]:
    """Bytes of a Docker size such as ``64G`` or ``512mb``; None when it is not one."""
    match = SIZE.match(size)
    if not match:
        return None
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).lower()])


def memory_total(meminfo: str = "/proc/meminfo") -> Optional[int]:
    try:
        with open(meminfo, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def shm_check(shm_size: str, meminfo: str = "/proc/meminfo") -> Check:
    """The container's shared memory (config.shm_size) must fit in the node's memory."""
    wanted, total = size_bytes(shm_size), memory_total(meminfo)
    if wanted is None:
        return check("shm_size", False, "config.shm_size %r is not a size such as 256G" % shm_size)
    if total is None:
        return check("shm_size", False, "cannot read MemTotal from %s to compare config.shm_size %s with"
                     % (meminfo, shm_size))
    detail = "config.shm_size %s (%s) in %s of memory" % (shm_size, gib(wanted), gib(total))
    if wanted > total:
        return check("shm_size", False, detail.replace(" in ", " exceeds the node's ", 1))
    return check("shm_size", True, detail)


def gib(size: int) -> str:
    return "%.1f GiB" % (size / float(1 << 30))


def deepest_existing(path: str) -> str:
    current = os.path.abspath(path or "/")
    while not os.path.exists(current):
        current = os.path.dirname(current)
    return current


def rdma_checks(run: Runner = run_command) -> List[Check]:
    return [hca_check(run), memlock_check()]


def hca_check(run: Runner = run_command) -> Check:
    if not os.path.exists("/dev/infiniband"):
        return check("rdma", False, "/dev/infiniband missing")
    try:
        output = run(["ibv_devinfo", "-l"]).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return check("rdma", False, "ibv_devinfo -l failed: %s" % exc)
    hcas = [line.strip() for line in output.splitlines() if line.strip() and "HCA" not in line]
    if not hcas:
        return check("rdma", False, "ibv_devinfo -l lists no HCA")
    return check("rdma", True, "HCAs: %s" % ", ".join(hcas))


def memlock_check() -> Check:
    limit = dockerd_memlock()
    if limit is None:
        return check("dockerd_memlock", False, "could not read dockerd's limits (RDMA needs LimitMEMLOCK=infinity)")
    ok = limit == "unlimited"
    return check("dockerd_memlock", ok, "dockerd max locked memory: %s%s"
                 % (limit, "" if ok else " (RDMA needs LimitMEMLOCK=infinity)"))


def dockerd_memlock() -> Optional[str]:
    for pid_file in DOCKER_PID_FILES:
        try:
            with open(pid_file, encoding="ascii") as handle:
                pid = handle.read().strip()
            with open("/proc/%s/limits" % pid, encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("Max locked memory"):
                        return line.split()[3]
        except (OSError, IndexError):
            continue
    return None


def write_marker(path: str, token: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="ascii") as handle:
        handle.write(token)


def remove_marker(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_marker(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except OSError:
        return None


def shared_check(path: str, token: str, writer: str, wait_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Check:
    """Whether the marker the writer node put into `path` reads back here, polling for up to `wait_s`."""
    directory = os.path.dirname(path)
    deadline = clock() + wait_s
    while read_marker(path) != token:
        if clock() >= deadline:
            return check("shared_cache", False, "%s is not the directory %s wrote its marker into "
                                                "(missing, not shared, or not writable there; waited %gs)"
                         % (directory, writer, wait_s))
        sleep(MARKER_POLL_S)
    return check("shared_cache", True, "%s is shared with %s" % (directory, writer))


def report_lines(host: str, checks: Sequence[Check]) -> List[str]:
    return ["%s preflight %s %s: %s" % (host, "OK  " if c["ok"] else "FAIL", c["check"], c["detail"])
            for c in checks]
