# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one atomic writer: readers see the old file or the new one, never half of one.

The content goes to a temporary file beside the target, then is renamed over it (or linked, when an
existing file must win). A write that fails (a full disk, a removed directory) leaves no temporary file
behind and raises the OSError, whose message names the path. Standard library only: shipped into the
training containers with the supervisor.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional, Tuple

Ownership = Optional[Tuple[int, int]]


def write_bytes(path: str, data: bytes, mode: int = 0o644, owner: Ownership = None,
                replace: bool = True) -> bool:
    """Write ``data`` to ``path`` atomically; with ``replace=False`` an existing file wins (returns False)."""
    directory = os.path.dirname(path) or "."
    descriptor, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, mode)
        if owner is not None:
            os.chown(temporary, *owner)
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def write_text(path: str, text: str, mode: int = 0o644, replace: bool = True) -> bool:
    return write_bytes(path, text.encode("utf-8"), mode, replace=replace)


def write_json(path: str, data: Any, mode: int = 0o644, replace: bool = True, makedirs: bool = False) -> bool:
    """``data`` as JSON (NaN and Infinity kept, as Python's json writes them)."""
    if makedirs:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return write_text(path, json.dumps(data, allow_nan=True), mode, replace)


def read_json(path: str) -> Any:
    """The JSON document at ``path``, or None when there is no file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
