# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The launch script: the training container's command on every node."""
from __future__ import annotations

import shlex
from typing import Sequence

# Where the container sees the node's HF token file (mounted read-only); the launch script exports it.
HF_TOKEN_MOUNT = "/run/clusterval/hf_token"


def launch_script(run_id: str, workdir: str, run_lines: Sequence[str], exit_path: str) -> str:
    """Runs the framework's lines in its working directory, then records their exit status in exit_path."""
    lines = [
        "#!/bin/sh",
        "# clusterval.training launch script for run %s" % run_id,
        "exit_file=%s" % shlex.quote(exit_path),
        'finish() { echo "$1" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; exit "$1"; }',
        'rm -f "$exit_file"',
        "if [ -r %s ]; then HF_TOKEN=$(cat %s) && export HF_TOKEN; fi" % (HF_TOKEN_MOUNT, HF_TOKEN_MOUNT),
        "cd %s || finish 126" % shlex.quote(workdir),
        *run_lines,
        "finish $?",
    ]
    return "\n".join(lines) + "\n"
