# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Report rendering: results.json, JUnit XML and a self-contained HTML page with inline SVG."""
from __future__ import annotations

import html
import json
import math
import os
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Sequence

LOSS_COLOURS = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
THROUGHPUT_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#17becf", "#bcbd22")
CHART_WIDTH, CHART_HEIGHT, MARGIN = 640, 240, 48


def strict_json(value: Any) -> Any:
    """NaN/Inf become the strings "nan"/"inf"/"-inf" so the file is valid JSON everywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def results_json(document: Dict[str, Any]) -> str:
    return json.dumps(strict_json(document), indent=2, sort_keys=True, allow_nan=False) + "\n"


def junit_xml(document: Dict[str, Any]) -> str:
    checks: Sequence[Dict[str, Any]] = document.get("checks") or []
    name = "clusterval.training %s" % (document.get("config_name") or document.get("run_id") or "run")
    suite = ET.Element("testsuite", name=name, tests=str(len(checks)),
                       failures=str(sum(c["status"] == "fail" for c in checks)),
                       skipped=str(sum(c["status"] in ("no_threshold", "info") for c in checks)))
    for check in checks:
        case_name = "%s %s" % (check["check"], check.get("metric") or "")
        case = ET.SubElement(suite, "testcase", classname=str(check["node"]), name=case_name.strip())
        if check["status"] == "fail":
            failure = ET.SubElement(case, "failure", message=check["detail"], type=check["check"])
            failure.text = "%s: %s" % (check["node"], check["detail"])
        elif check["status"] in ("no_threshold", "info"):
            ET.SubElement(case, "skipped", message=check["detail"])
        ET.SubElement(case, "system-out").text = check["detail"]
    suites = ET.Element("testsuites", name=name)
    suites.append(suite)
    return ET.tostring(suites, encoding="unicode") + "\n"


def _finite_points(points: Sequence[Sequence[Any]]) -> List[Sequence[float]]:
    return [p for p in points if isinstance(p[1], (int, float)) and math.isfinite(p[1])]


def svg_chart(title: str, curves: Dict[str, Sequence[Sequence[Any]]], colours: Sequence[str]) -> str:
    """One line chart; ``curves`` maps a label (node) to [[step, value], ...]."""
    finite = {label: _finite_points(points) for label, points in curves.items()}
    all_points = [p for points in finite.values() for p in points]
    head = '<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">' % (
        CHART_WIDTH, CHART_HEIGHT, html.escape(title))
    parts = [head, '<rect width="100%" height="100%" fill="#ffffff" stroke="#cccccc"/>',
             '<text x="%d" y="18" font-size="14" font-family="sans-serif">%s</text>' % (MARGIN, html.escape(title))]
    if not all_points:
        parts.append('<text x="%d" y="%d" font-family="sans-serif">no data</text></svg>' % (MARGIN, CHART_HEIGHT // 2))
        return "".join(parts)
    x0, x1 = min(p[0] for p in all_points), max(p[0] for p in all_points)
    y0, y1 = min(p[1] for p in all_points), max(p[1] for p in all_points)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    width, height = CHART_WIDTH - 2 * MARGIN, CHART_HEIGHT - 2 * MARGIN

    def xy(point: Sequence[float]) -> str:
        return "%.1f,%.1f" % (MARGIN + (point[0] - x0) / (x1 - x0) * width,
                              CHART_HEIGHT - MARGIN - (point[1] - y0) / (y1 - y0) * height)

    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (
        MARGIN, CHART_HEIGHT - MARGIN, CHART_WIDTH - MARGIN, CHART_HEIGHT - MARGIN))
    parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (MARGIN, MARGIN, MARGIN, CHART_HEIGHT - MARGIN))
    labels = ((MARGIN - 4, CHART_HEIGHT - MARGIN, "end", "%.4g" % y0), (MARGIN - 4, MARGIN + 4, "end", "%.4g" % y1),
              (MARGIN, CHART_HEIGHT - MARGIN + 16, "start", "step %g" % x0),
              (CHART_WIDTH - MARGIN, CHART_HEIGHT - MARGIN + 16, "end", "step %g" % x1))
    for x, y, anchor, text in labels:
        parts.append('<text x="%d" y="%d" font-size="11" text-anchor="%s" font-family="sans-serif">%s</text>' % (
            x, y, anchor, text))
    for index, (label, points) in enumerate(sorted(finite.items())):
        colour = colours[index % len(colours)]
        if points:
            parts.append('<polyline fill="none" stroke="%s" stroke-width="3" points="%s"><title>%s</title></polyline>' % (
                colour, " ".join(xy(p) for p in points), html.escape(label)))
        parts.append('<text x="%d" y="%d" font-size="11" fill="%s" font-family="sans-serif">%s</text>' % (
            CHART_WIDTH - MARGIN - 120, 18 + 13 * (index % 12), colour, html.escape(label)))
    parts.append("</svg>")
    return "".join(parts)


def throughput_metric(series: Dict[str, Dict[str, Any]]) -> str:
    for metric in ("tokens_per_sec_per_gpu", "tokens_per_gpu", "throughput_per_gpu", "tflops_per_sec_per_gpu"):
        if any(metric in node_series for node_series in series.values()):
            return metric
    return "tokens_per_sec_per_gpu"


STYLE = """
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}.no_threshold,.info{color:#8a6d00}
.verdict{font-size:28px;padding:8px 16px;display:inline-block;border-radius:6px}
.verdict.PASS{background:#dafbe1}.verdict.FAIL{background:#ffebe9}
.simulated{background:#fff3b0;border:3px solid #e0a800;padding:10px;font-size:22px;font-weight:bold;margin:12px 0}
"""


def html_report(document: Dict[str, Any]) -> str:
    series: Dict[str, Dict[str, Any]] = document.get("series") or {}
    metric = throughput_metric(series)
    esc = html.escape
    title = "Training validation: %s" % (document.get("config_name") or document.get("run_id") or "run")
    out = ['<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>%s</style></head><body>' % (
        esc(title), STYLE), "<h1>%s</h1>" % esc(title)]
    if document.get("simulated"):
        out.append('<div class="simulated">SIMULATED RUN: no real GPU was used; these figures say nothing '
                   'about hardware performance.</div>')
    verdict = document.get("verdict", "FAIL")
    out.append('<div class="verdict %s">Verdict: %s</div>' % (esc(verdict), esc(verdict)))
    out.append("<p>Run %s, framework %s, %d node(s).</p>" % (
        esc(str(document.get("run_id") or "")), esc(str(document.get("framework") or "")), len(series)))
    out.append(svg_chart("loss per node", {n: s.get("loss", []) for n, s in series.items()}, LOSS_COLOURS))
    out.append(svg_chart("%s per node" % metric, {n: s.get(metric, []) for n, s in series.items()}, THROUGHPUT_COLOURS))
    out.append("<h2>Checks</h2><table><tr><th>node</th><th>check</th><th>metric</th><th>expected</th>"
               "<th>actual</th><th>status</th><th>detail</th></tr>")
    for check in document.get("checks") or []:
        out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td><td>%s</td></tr>" % (
            esc(str(check["node"])), esc(check["check"]), esc(str(check.get("metric") or "")),
            esc(_short(check.get("expected"))), esc(_short(check.get("actual"))), esc(check["status"]),
            esc(check["status"]), esc(check["detail"])))
    out.append("</table></body></html>\n")
    return "".join(out)


def _short(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)[:80]


def write_reports(run_dir: str, document: Dict[str, Any]) -> Dict[str, str]:
    """Write the three files into ``run_dir`` (created if needed); returns their paths."""
    os.makedirs(run_dir, exist_ok=True)
    files = {"results.json": results_json(document), "junit.xml": junit_xml(document),
             "report.html": html_report(document)}
    paths = {}
    for name, content in files.items():
        path = os.path.join(run_dir, name)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(temporary, path)
        paths[name] = path
    return paths
