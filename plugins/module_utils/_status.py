# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""One read of every node's status stream, and the lease renewal, in one place on the shared directory.

Runs on one node (the module clusterval.training.training_status) or on the controller when it sees the
shared directory; see plugins/module_utils/_supervise.py for the writer.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic

DEFAULT_MAX_BYTES = 1 << 20


def read_new_lines(path: str, offset: int, max_bytes: int) -> Tuple[List[Dict[str, Any]], int, Optional[int]]:
    """The complete JSON lines after ``offset`` (at most about ``max_bytes``), the new offset and the file size.
    A line still being written (no newline yet) waits for the next read. A stream shorter than ``offset`` was
    started anew by a new supervisor: it is read from its start, marked by a ``restarted`` record."""
    restarted: List[Dict[str, Any]] = []
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < offset:
                offset, restarted = 0, [{"t": "restarted"}]
            handle.seek(offset)
            data = handle.read(max(0, min(max_bytes, size - offset)))
    except FileNotFoundError:
        return [], offset, None
    end = data.rfind(b"\n") + 1
    records = []
    for raw in data[:end].splitlines():
        try:
            record = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            record = {"t": "garbled", "text": raw[:200].decode("utf-8", "replace")}
        records.append(record if isinstance(record, dict) else {"t": "garbled", "text": str(record)[:200]})
    return restarted + records, offset + end, size


def read_all(status_dir: str, hosts: Sequence[str], offsets: Mapping[str, int],
             max_bytes: int = DEFAULT_MAX_BYTES) -> Dict[str, Dict[str, Any]]:
    """{host: {records, offset, size}}; ``size`` is None when the node wrote no stream yet."""
    found = {}
    for host in hosts:
        records, offset, size = read_new_lines(os.path.join(status_dir, "nodes", "%s.jsonl" % host),
                                               int(offsets.get(host) or 0), max_bytes)
        found[host] = {"records": records, "offset": offset, "size": size}
    return found


def poll(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The module's work: renew the lease first (a slow read must not let it lapse), then read."""
    lease = params.get("lease")
    if lease is not None:
        _atomic.write_json(os.path.join(params["status_dir"], "lease"), dict(lease))
    nodes = read_all(params["status_dir"], params["hosts"], params.get("offsets") or {},
                     params.get("max_bytes") or DEFAULT_MAX_BYTES)
    return {"nodes": nodes, "lease_renewed": lease is not None}
