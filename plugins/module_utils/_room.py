# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Room kept on the controller's disk for the run's own small files, so that a disk that fills during the run
(another process, the nodes' logs) still keeps the watch's memory, its decision and results.json.

When the run's containers start, each room is a file of zeros in the run directory (really written: a file
system counts it as used). A writer that meets a full disk releases its room once and writes again. A room that
cannot be made (the disk is already too full) is not kept: the run goes on without it.
"""
from __future__ import annotations

import os
from typing import List

# The watch's memory (every node's state with its steps), its decision (outcome.json), the reports' results.json.
ROOMS = {"watch": 4 << 20, "verdict": 1 << 18, "results": 1 << 20}
CHUNK = 1 << 16


def room_path(run_dir: str, name: str) -> str:
    return os.path.join(run_dir, ".clusterval-room-%s" % name)


def reserve(run_dir: str) -> List[str]:
    """Make every room not made yet; the names of the rooms the run directory holds."""
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError:
        return []
    held = []
    for name, size in ROOMS.items():
        path = room_path(run_dir, name)
        if os.path.exists(path) or make(path, size):
            held.append(name)
    return held


def make(path: str, size: int) -> bool:
    try:
        with open(path, "wb") as handle:
            for dummy in range(size // CHUNK):
                handle.write(bytes(CHUNK))
            handle.flush()
            os.fsync(handle.fileno())
        return True
    except OSError:
        release_path(path)
        return False


def release(run_dir: str, name: str) -> bool:
    """Free the room: True when there was one to free (a write may be tried again)."""
    return release_path(room_path(run_dir, name))


def release_path(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def release_all(run_dir: str) -> None:
    """The run's reports are written: no room is needed any more."""
    for name in ROOMS:
        release(run_dir, name)
