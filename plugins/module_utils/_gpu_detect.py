# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Node side of the GPU arch detection (plugins/modules/training_gpus.py): ask the node's GPU tools, through the
probe's own parsing (_probe.gpu_report), until one lists GPUs. Never raises: a node where no tool tells is a
report of None with the reason of each tool, which the plan turns into an error naming the node."""
from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _probe

# The tools preflight asks (roles/preflight/defaults/main.yml, preflight_gpu_tools), in the same order, and
# rocminfo.
DEFAULT_TOOLS: List[Dict[str, Any]] = [
    {"path": "/opt/rocm/bin/amd-smi", "args": ["static", "--asic"]},
    {"path": "/usr/bin/amd-smi", "args": ["static", "--asic"]},
    {"path": "/opt/rocm/bin/rocm-smi", "args": ["--showproductname", "--json"]},
    # in every ROCm runtime install, where the SMI tools may be missing
    {"path": "/opt/rocm/bin/rocminfo", "args": []},
    {"path": "/usr/bin/nvidia-smi", "args": ["--query-gpu=index,name,driver_version,memory.total", "--format=csv"]},
    {"path": "/opt/aws/neuron/bin/neuron-ls", "args": []},
]


class ToolFailed(subprocess.SubprocessError):
    pass


def checked(run: _probe.Runner) -> _probe.Runner:
    """A runner that raises when the tool exits non-zero (nvidia-smi without its driver prints its complaint on
    stdout, which must not read as a GPU)."""
    def run_checked(argv: Sequence[str]) -> "subprocess.CompletedProcess[str]":
        proc = run(argv)
        if proc.returncode != 0:
            said = ((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()
            raise ToolFailed("exit %d%s" % (proc.returncode, ": " + said[0][:200] if said else ""))
        return proc
    return run_checked


def detect(tools: Sequence[Mapping[str, Any]], arch_map: Mapping[str, str],
           run: _probe.Runner = _probe.run_command) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """(the first report that lists GPUs, why each tool before it told nothing). A tool that is missing, fails
    or lists no GPU gives way to the next (a node with a broken amd-smi may still have rocm-smi)."""
    tried: List[str] = []
    run = checked(run)
    for tool in tools:
        path = str(tool.get("path", ""))
        if not os.access(path, os.X_OK):
            tried.append("%s: not on the node" % path)
            continue
        try:
            report = _probe.gpu_report(tool, arch_map, run)
        except (OSError, subprocess.SubprocessError) as exc:
            tried.append("%s failed: %s" % (path, exc))
            continue
        report.pop("output", None)
        if not report.get("count"):
            tried.append("%s lists no GPU" % path)
            continue
        return report, tried
    return None, tried
