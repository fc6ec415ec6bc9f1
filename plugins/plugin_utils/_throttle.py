# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""At most N holders at once among the controller's worker processes: Ansible's ``throttle`` for one step inside
a task (the image pull inside the container's start). One lock file per slot, held with ``flock``, so that a
worker that dies frees its slot."""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator

POLL_S = 0.2


@contextlib.contextmanager
def slot(directory: str, slots: int, poll_s: float = POLL_S) -> Iterator[int]:
    """Holds one of ``slots`` slots in ``directory`` (created) while the block runs; waits for a free one."""
    os.makedirs(directory, exist_ok=True)
    while True:
        for index in range(max(1, slots)):
            with open(os.path.join(directory, "slot-%d" % index), "a", encoding="utf-8") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                try:
                    yield index
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                return
        time.sleep(poll_s)
