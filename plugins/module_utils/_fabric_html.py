# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fabric gate's part of report.html: its verdict, the figures per round, and a node-by-node bandwidth matrix.

Self-contained (its own escaping and inline styles) so that it moves as one piece into a template.
"""
from __future__ import annotations

import html
from typing import Any, Mapping, Optional

SLOW = "#f4c7c3"
FAST = "#d9ead3"


def figure(value: Optional[float]) -> str:
    return "-" if value is None else "%.3g" % value


def fabric_section(fabric: Optional[Mapping[str, Any]]) -> str:
    """The section, or "" when the run had no fabric gate."""
    if not fabric:
        return ""
    esc = html.escape
    status = "FAIL" if fabric.get("failed") else "PASS"
    parts = ['<section id="fabric"><h2>Fabric gate: %s</h2>' % status,
             "<p>%s</p>" % esc(str(fabric.get("msg", "")))]
    if fabric.get("simulated"):
        parts.append("<p><em>SIMULATED: the stand-in moved real bytes over TCP between simulated nodes; the figures "
                     "say nothing about a GPU fabric.</em></p>")
    benchmarks = list(fabric.get("benchmarks") or [])
    rows = ["<tr><th>%s</th>%s</tr>" % (esc(host), "".join("<td>%s</td>" % figure(values.get(b)) for b in benchmarks))
            for host, values in (fabric.get("alone") or {}).items()]
    if fabric.get("all"):
        rows.append("<tr><th>all %d nodes</th>%s</tr>" % (len(fabric.get("nodes") or []), "".join(
            "<td>%s</td>" % figure(fabric["all"].get(b)) for b in benchmarks)))
    if rows:
        parts.append("<table><caption>Bus bandwidth (GB/s, largest message size)</caption><tr><th></th>%s</tr>%s"
                     "</table>" % ("".join("<th>%s</th>" % esc(b) for b in benchmarks), "".join(rows)))
    parts.append(matrix_table(fabric))
    rounds = fabric.get("rounds") or []
    if rounds:
        parts.append("<p>Rounds: %s; %s s in all.</p>" % (", ".join(
            "%s (%d groups, %.1f s)" % (esc(str(r["name"])), r["groups"], r["seconds"]) for r in rounds),
            fabric.get("seconds")))
    parts.append("</section>")
    return "".join(parts)


def matrix_table(fabric: Mapping[str, Any]) -> str:
    """Node-by-node bus bandwidth where pairs were measured; slow pairs shaded."""
    matrix = fabric.get("matrix") or {}
    cells = matrix.get("busbw") or {}
    if not any(cells.values()):
        return ""
    esc = html.escape
    nodes = list(matrix.get("nodes") or cells)
    slow = {frozenset(p["hosts"]) for p in fabric.get("pairs") or [] if not p.get("ok", True)}
    head = "".join("<th>%s</th>" % esc(n) for n in nodes)
    body = []
    for row in nodes:
        tds = []
        for col in nodes:
            value = (cells.get(row) or {}).get(col)
            if row == col or col not in (cells.get(row) or {}):
                tds.append("<td></td>")
                continue
            colour = SLOW if frozenset((row, col)) in slow else FAST
            tds.append('<td style="background:%s">%s</td>' % (colour, figure(value)))
        body.append("<tr><th>%s</th>%s</tr>" % (esc(row), "".join(tds)))
    return ("<table><caption>%s bus bandwidth between pairs of nodes (GB/s; shaded red: slow)</caption>"
            "<tr><th></th>%s</tr>%s</table>" % (esc(str(matrix.get("benchmark", ""))), head, "".join(body)))
