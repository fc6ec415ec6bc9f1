# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Directories and small files of a run on a node, made in one pass and idempotently."""
from __future__ import annotations

import os
import pwd
from typing import List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic

Ownership = Optional[Tuple[int, int]]


def ownership(user: Optional[str]) -> Ownership:
    """uid and primary gid of a user; None keeps whatever the creating process gets."""
    if not user:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ValueError("no such user on the node: %s" % user) from None
    return entry.pw_uid, entry.pw_gid


def ensure_directory(path: str, mode: int, owner: Ownership, check_mode: bool) -> bool:
    changed = False
    if not os.path.isdir(path):
        changed = True
        if not check_mode:
            os.makedirs(path, mode=mode, exist_ok=True)
    elif not owned_here(path):
        return False  # another user's directory (a share such as data_cache_dir): used as it is
    if not check_mode or not changed:
        changed = fix_attributes(path, mode, owner, check_mode) or changed
    return changed


def owned_here(path: str) -> bool:
    """Whether this process may change the path's mode and owner (its own, or root's process)."""
    return os.geteuid() == 0 or os.stat(path).st_uid == os.geteuid()


def ensure_file(path: str, content: str, mode: int, owner: Ownership, check_mode: bool) -> bool:
    data = content.encode("utf-8")
    if read_bytes(path) != data:
        if not check_mode:
            _atomic.write_bytes(path, data, mode, owner)
        return True
    return fix_attributes(path, mode, owner, check_mode)


def read_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def fix_attributes(path: str, mode: int, owner: Ownership, check_mode: bool) -> bool:
    stat = os.stat(path)
    wrong_mode = stat.st_mode & 0o7777 != mode
    wrong_owner = owner is not None and (stat.st_uid, stat.st_gid) != owner
    if not check_mode:
        if wrong_mode:
            os.chmod(path, mode)
        if wrong_owner:
            os.chown(path, *owner)
    return wrong_mode or wrong_owner


def ensure_all(directories: Sequence[str], files: Sequence[Mapping[str, str]], owner: Optional[str],
               check_mode: bool) -> List[str]:
    """Makes every directory (0755) and file; returns the paths that changed (or would)."""
    uid_gid = ownership(owner)
    changed = [path for path in directories if ensure_directory(path, 0o755, uid_gid, check_mode)]
    for spec in files:
        if ensure_file(spec["path"], spec["content"], int(str(spec.get("mode", "0644")), 8), uid_gid, check_mode):
            changed.append(spec["path"])
    return changed
