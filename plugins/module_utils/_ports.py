# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether the coordinator port is free on the node (host network), and who holds it when not."""
from __future__ import annotations

import errno
import glob
import os
import re
import socket
from typing import Any, Dict, Optional

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"
CONTAINER_ID = re.compile(r"(?:docker[-/]|containers/)([0-9a-f]{64})")


def port_check(port: int, proc_root: str = "/proc") -> Dict[str, Any]:
    """A `coordinator_port` check: the port can be bound on every address of the node."""
    error = bind_error(port)
    if error is None:
        return {"check": "coordinator_port", "ok": True, "detail": "port %d is free" % port}
    holder = port_holder(port, proc_root)
    detail = "port %d is in use (%s)%s: another job's coordinator? Free it or choose another coordinator port" % (
        port, error, "; held by %s" % holder if holder else "")
    return {"check": "coordinator_port", "ok": False, "detail": detail}


def bind_error(port: int) -> Optional[str]:
    """None when a TCP listener can bind the port (as the coordinator will), else the reason."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((address, port))
            return None
        except OSError as exc:
            if exc.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL) and family == socket.AF_INET6:
                continue
            return os.strerror(exc.errno) if exc.errno else str(exc)
    return None


def listening_inodes(port: int, proc_root: str = "/proc") -> set:
    inodes = set()
    for table in TCP_TABLES:
        try:
            with open(proc_root + table[len("/proc"):], encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holder(port: int, proc_root: str = "/proc") -> str:
    """`pid N (comm)` of the listener, plus its container id when it runs in one; empty when unknown."""
    wanted = {"socket:[%s]" % inode for inode in listening_inodes(port, proc_root)}
    if not wanted:
        return ""
    for fd in glob.glob(os.path.join(proc_root, "[0-9]*", "fd", "*")):
        try:
            if os.readlink(fd) not in wanted:
                continue
        except OSError:
            continue
        pid_dir = os.path.dirname(os.path.dirname(fd))
        return describe_process(pid_dir)
    return ""


def describe_process(pid_dir: str) -> str:
    text = "pid %s" % os.path.basename(pid_dir)
    try:
        with open(os.path.join(pid_dir, "comm"), encoding="utf-8") as handle:
            text += " (%s)" % handle.read().strip()
        with open(os.path.join(pid_dir, "cgroup"), encoding="utf-8") as handle:
            found = CONTAINER_ID.search(handle.read())
    except OSError:
        return text
    return text + (" in container %s" % found.group(1)[:12] if found else "")
