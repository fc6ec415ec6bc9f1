# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What report.html shows of the fabric gate (template plugins/plugin_utils/templates/fabric.html.j2): its
verdict, the figures per round, and a node-by-node bus bandwidth matrix of the measured pairs."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

SLOW = "#f4c7c3"
FAST = "#d9ead3"


def figure(value: Optional[float]) -> str:
    return "-" if value is None else "%.3g" % value


def fabric_view(fabric: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The template's context; None when the run had no fabric gate."""
    if not fabric:
        return None
    benchmarks = [str(b) for b in fabric.get("benchmarks") or []]
    rows = [(str(host), [figure(values.get(b)) for b in benchmarks]) for host, values in (fabric.get("alone") or {}).items()]
    if fabric.get("all"):
        rows.append(("all %d nodes" % len(fabric.get("nodes") or []), [figure(fabric["all"].get(b)) for b in benchmarks]))
    rounds = ", ".join("%s (%d groups, %.1f s)" % (r["name"], r["groups"], r["seconds"]) for r in fabric.get("rounds") or [])
    return {"status": status(fabric), "msg": str(fabric.get("msg", "")),
            "simulated": bool(fabric.get("simulated")), "benchmarks": benchmarks, "rows": rows,
            "matrix": matrix_view(fabric),
            "rounds": ("%s; %s s in all" % (rounds, fabric.get("seconds"))) if rounds else ""}


def status(fabric: Mapping[str, Any]) -> str:
    if fabric.get("not_run"):
        return "NOT RUN (the fabric was not measured)"
    return "FAIL" if fabric.get("failed") else "PASS"


def matrix_view(fabric: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """Rows of cells ``{text, colour}`` (colour empty where no pair was measured); None without any pair."""
    matrix = fabric.get("matrix") or {}
    cells = matrix.get("busbw") or {}
    if not any(cells.values()):
        return None
    nodes = [str(n) for n in matrix.get("nodes") or cells]
    slow = {frozenset(p["hosts"]) for p in fabric.get("pairs") or [] if not p.get("ok", True)}
    rows: List[Any] = []
    for row in nodes:
        mine = cells.get(row) or {}
        rows.append((row, [{"text": figure(mine[col]), "colour": SLOW if frozenset((row, col)) in slow else FAST}
                           if col in mine and col != row else {"text": "", "colour": ""} for col in nodes]))
    return {"benchmark": str(matrix.get("benchmark", "")), "nodes": nodes, "rows": rows}
