# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""report.html: one self-contained page (inline CSS and SVG; no script, font or image from anywhere),
readable at 2 nodes and at 500.

In this order: the SIMULATED banner, the verdict and its headline, the culprit and its consequences,
the failures table (culprit first, consequences grouped), a grid of the nodes coloured by throughput
against the cluster median, the throughput and loss curves (every node up to 4 nodes; above, the median
with a p10-p90 band and the outlier nodes named), the checks, the run and the effective model.
"""
from __future__ import annotations

import bisect
import datetime
import html
import math
import re
import statistics
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts, natural_key
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import metric_def
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number, percentile
from ansible_collections.clusterval.training.plugins.module_utils._report_view import (
    FAIL, NOT_JUDGED, PASS, CheckGroup, View, check_label, hosts_of, node_states, node_throughput, relative_to_median,
    realism_sentence, short_number, throughput_metric, unique, value_range, view)

# Okabe-Ito: told apart with every common colour-vision deficiency. Node curves; the median is navy.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#d55e00", "#56b4e9")
MEDIAN_COLOUR, BAND_COLOUR, CULPRIT_COLOUR = "#08306b", "#c6dbef", "#6a3d9a"
THRESHOLD_COLOUR, FLOOR_COLOUR, BASELINE_COLOUR = "#cf222e", "#57606a", "#8250df"
# Diverging scale (ColorBrewer RdBu): below the median red, above blue; position in [-1, 1] of the span.
DIVERGING = ((-1.0, "#b2182b"), (-0.5, "#ef8a62"), (-0.2, "#fddbc7"), (0.0, "#f7f7f7"),
             (0.2, "#d1e5f0"), (0.5, "#67a9cf"), (1.0, "#2166ac"))
NO_VALUE_COLOUR = "#bdbdbd"
INDIVIDUAL_CURVES_MAX = 4      # up to this many nodes, one curve per node
OUTLIERS_MAX = 5
GRID_LABELS_MAX = 16           # up to this many nodes, each grid cell names its node
BAND_STEPS_MAX = 200
DETAILS_LISTED_MAX = 100       # per failure group, inside <details>
EVERY_CHECK_ROWS = 1000
DEFAULT_STRAGGLER_PCT = 10.0
CONTROL = re.compile("\x1b\\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MARKS = {"culprit": "!", FAIL: "\u2715", "consequence": "", PASS: ""}
STATE_WORDS = {"culprit": "culprit", FAIL: "failed", "consequence": "stopped as a consequence", PASS: "passed"}

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;padding:16px 24px;
max-width:1180px;color:#1f2328;line-height:1.45;font-size:15px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:0 0 4px}small,.muted{color:#59636e;font-weight:normal}
table{border-collapse:collapse;width:100%;table-layout:fixed;margin:8px 0}
td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere;word-break:break-word}
th{background:#f6f8fa}
pre,code,.detail{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px;
white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;margin:0}
.verdict{font-size:19px;padding:12px 16px;border-radius:6px;margin:12px 0;overflow-wrap:anywhere}
.verdict b{font-size:26px;margin-right:6px}
.verdict.PASS{background:#dafbe1;border:2px solid #1a7f37}.verdict.FAIL{background:#ffebe9;border:2px solid #cf222e}
.realism{background:#e8f4ff;border:2px solid #3a7bd5;padding:8px;margin:12px 0}
.simulated{background:#fff3b0;border:3px solid #e0a800;padding:10px;font-size:20px;font-weight:bold;margin:12px 0}
.culprit-box{border-left:6px solid #cf222e;background:#fff8f8;padding:8px 12px;margin:8px 0}
.culprit-box pre{background:#fff;border:1px solid #f0c4c4;padding:6px 8px;margin:6px 0}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:8px 12px;border-radius:6px;margin:8px 0}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}.not_judged{color:#8a6d00;font-weight:bold}
tr.culprit td{background:#ffebe9}tr.subhead td{background:#f6f8fa;font-weight:bold}tr.consequence td{color:#424a53}
.tag{display:inline-block;background:#cf222e;color:#fff;border-radius:10px;padding:0 8px;font-size:12px;margin-left:4px}
details summary{cursor:pointer;color:#0969da}details ul{margin:4px 0;padding-left:18px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,var(--cell));gap:3px;margin:8px 0}
.grid.labelled{grid-template-columns:repeat(auto-fill,minmax(130px,1fr));gap:6px}
.cell{height:var(--cell);border:1px solid #afb8c1;display:flex;align-items:center;justify-content:center;
font-size:13px;font-weight:bold;line-height:1;overflow:hidden}
.grid.labelled .cell{height:auto;min-height:54px;flex-direction:column;padding:4px;font-weight:normal;font-size:13px}
.cell.s-fail{border:2px solid #cf222e}.cell.s-culprit{border:3px solid #000}.cell.s-consequence{border:1px dotted #1f2328}
.scale{display:flex;align-items:center;gap:10px;flex-wrap:wrap;margin:6px 0;font-size:13px}
.bar{position:relative;width:320px;height:14px;border:1px solid #afb8c1;margin-bottom:18px}
.bar span{position:absolute;top:16px;transform:translateX(-50%);white-space:nowrap;font-size:11px}
.bar i{position:absolute;top:-3px;height:20px;border-left:2px dashed #1f2328}
.swatch{display:inline-flex;align-items:center;justify-content:center;width:18px;height:18px;border:1px solid #afb8c1;
vertical-align:middle;margin-right:4px;font-size:11px;font-weight:bold}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px;margin:2px 0 12px}
.legend .line{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:4px}
svg.chart{display:block;width:100%;height:auto}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.facts dt{color:#59636e}dl.facts dd{margin:0;overflow-wrap:anywhere}
"""


def esc(value: Any) -> str:
    """HTML text of a value; terminal colour codes and control characters are dropped."""
    text = "" if value is None else str(value)
    return html.escape(text if text.isprintable() else CONTROL.sub("", text))


# -- the page --------------------------------------------------------------------------------------------

def html_report(document: Mapping[str, Any], shown: Optional[View] = None) -> str:
    shown = shown or view(document)
    metric = throughput_metric(document)
    title = "Training validation: %s" % (document.get("config_name") or document.get("run_id") or "run")
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
             '<meta name="viewport" content="width=device-width, initial-scale=1">'
             "<title>%s</title><style>%s</style></head><body>" % (esc(title), STYLE), "<h1>%s</h1>" % esc(title)]
    if shown.simulated:
        parts.append('<div class="simulated">SIMULATED RUN: no real GPU was used; these figures say nothing '
                     'about hardware performance.</div>')
    if shown.realism:
        parts.append('<div class="realism">%s</div>' % esc(realism_sentence(shown.realism)))
    parts.append(verdict_block(document, shown))
    parts.append(failures_section(shown))
    parts.append(grid_section(document, shown, metric))
    parts.append(curves_section(document, shown, metric))
    parts.append(checks_section(shown))
    parts.append(run_section(document, shown))
    parts.append(every_check(document))
    parts.append("</body></html>\n")
    return "".join(parts)


def verdict_block(document: Mapping[str, Any], shown: View) -> str:
    word, dummy, rest = shown.headline.partition(" ")
    if not word.rstrip(":") == shown.verdict:
        word, rest = shown.verdict, shown.headline
    out = ['<div class="verdict %s"><b>%s</b>%s</div>' % (esc(shown.verdict), esc(word), esc(rest))]
    culprit = shown.culprit
    if culprit:
        facts = [("class", culprit.get("class")), ("step", culprit.get("step")), ("log line", culprit.get("lineno")),
                 ("time", utc_time(culprit.get("time")))]
        out.append('<div class="culprit-box"><h3>Culprit: %s</h3><div>%s</div>' % (
            esc(culprit["host"]), " &middot; ".join("%s %s" % (esc(k), esc(v)) for k, v in facts if v not in (None, ""))))
        if culprit.get("text"):
            out.append("<pre>%s</pre>" % esc(culprit["text"]))
        if shown.consequences:
            out.append("<div>%d other node%s stopped as a consequence: %s</div>" % (
                len(shown.consequences), "" if len(shown.consequences) == 1 else "s",
                esc(compact_hosts(shown.consequences, 200))))
        out.append("</div>")
    if shown.unjudged:
        out.append('<div class="note"><b>Not judged:</b> %s</div>' % "; ".join(
            "%s (%s)" % (esc(u.get("metric")), esc(u.get("reason") or "no threshold")) for u in shown.unjudged))
    baseline = document.get("baseline")
    if isinstance(baseline, dict) and baseline:
        out.append('<div class="note">Thresholds from the baseline run %s (%s), tolerance %s%%.</div>' % (
            esc(baseline.get("run_id") or "?"), esc(baseline.get("path") or "?"),
            esc(short_number(baseline["tolerance_pct"]) if is_finite_number(baseline.get("tolerance_pct")) else "?")))
    return "".join(out)


def utc_time(epoch: Any) -> Optional[str]:
    if not is_finite_number(epoch):
        return None
    return datetime.datetime.fromtimestamp(float(epoch), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- failures --------------------------------------------------------------------------------------------

def failures_section(shown: View) -> str:
    failed_nodes = unique([str(c.get("node")) for c in shown.culprit_checks]
                          + [n for g in shown.failed + shown.consequential for n in g.nodes])
    count = len(shown.culprit_checks) + sum(len(g.checks) for g in shown.failed + shown.consequential)
    if not count:
        return "<h2>Failures</h2><p>No check failed.</p>"
    rows = ["<h2>Failures <small>%d failed check%s on %d node%s</small></h2>" % (
        count, "" if count == 1 else "s", len(failed_nodes), "" if len(failed_nodes) == 1 else "s"),
        '<table><colgroup><col style="width:24%"><col style="width:20%"><col></colgroup>'
        "<tr><th>nodes</th><th>check</th><th>what happened</th></tr>"]
    for check in shown.culprit_checks:
        rows.append('<tr class="culprit"><td>%s <span class="tag">culprit</span></td><td>%s</td>'
                    '<td class="detail">%s</td></tr>' % (esc(check.get("node")), esc(check_label(check)),
                                                         esc(check.get("detail"))))
    rows.extend(group_row(group, "") for group in shown.failed)
    if shown.consequential:
        culprit = esc(shown.culprit["host"]) if shown.culprit else "the culprit"
        rows.append('<tr class="subhead"><td colspan="3">Stopped as a consequence of %s: %d node%s (%s)</td></tr>' % (
            culprit, len(shown.consequences), "" if len(shown.consequences) == 1 else "s",
            esc(compact_hosts(shown.consequences, 120))))
        rows.extend(group_row(group, "consequence") for group in shown.consequential)
    rows.append("</table>")
    return "".join(rows)


def group_row(group: CheckGroup, css: str) -> str:
    nodes = group.nodes
    first = group.checks[0]
    detail = esc("%s: %s" % (first.get("node"), first.get("detail")) if len(nodes) > 1 else first.get("detail"))
    if len(group.checks) > 1:
        listed = "".join("<li>%s: %s</li>" % (esc(c.get("node")), esc(c.get("detail")))
                         for c in group.checks[:DETAILS_LISTED_MAX])
        more = len(group.checks) - DETAILS_LISTED_MAX
        listed += "<li>%d more in results.json</li>" % more if more > 0 else ""
        detail += "<details><summary>every node (%d)</summary><ul>%s</ul></details>" % (len(group.checks), listed)
    return '<tr class="%s"><td>%s <small>(%d of %d)</small></td><td>%s</td><td class="detail">%s</td></tr>' % (
        css, esc(compact_hosts(nodes, 120)), len(nodes), group.of, esc(group.label), detail)


# -- the node grid ---------------------------------------------------------------------------------------

def mix(low: str, high: str, fraction: float) -> str:
    a, b = int(low[1:], 16), int(high[1:], 16)
    channels = [round(((a >> s) & 255) + (((b >> s) & 255) - ((a >> s) & 255)) * fraction) for s in (16, 8, 0)]
    return "#%02x%02x%02x" % tuple(channels)


def diverging_colour(position: float) -> str:
    """Colour of a position in [-1, 1] (clamped) on the diverging scale."""
    position = max(-1.0, min(1.0, position))
    for (left, low), (right, high) in zip(DIVERGING, DIVERGING[1:]):
        if position <= right:
            return mix(low, high, (position - left) / (right - left))
    return DIVERGING[-1][1]


def is_dark(colour: str) -> bool:
    value = int(colour[1:], 16)
    red, green, blue = (value >> 16) & 255, (value >> 8) & 255, value & 255
    return 0.299 * red + 0.587 * green + 0.114 * blue < 140


def straggler_pct(document: Mapping[str, Any]) -> float:
    pct = document.get("straggler_pct")
    return float(pct) if is_finite_number(pct) and pct > 0 else DEFAULT_STRAGGLER_PCT


def grid_section(document: Mapping[str, Any], shown: View, metric: Optional[str]) -> str:
    hosts = hosts_of(document, shown)
    if not hosts:
        return ""
    values = node_throughput(document, metric) if metric else {}
    median, relative = relative_to_median(values)
    span = 2 * straggler_pct(document) / 100.0
    states = node_states(shown)
    failed_checks = failed_labels(shown)
    unit = unit_of(metric)
    cells = []
    for host in hosts:
        state = states.get(host, PASS)
        colour = diverging_colour(relative[host] / span) if host in relative else NO_VALUE_COLOUR
        if host in relative:
            figure = "%s %s, %s against the median" % (short_number(values[host]), unit, percent(relative[host]))
        else:
            figure = "no throughput value"
        title = "%s: %s; %s" % (host, figure, STATE_WORDS[state])
        if host in failed_checks:
            title += " (%s)" % ", ".join(failed_checks[host])
        label = esc(MARKS[state])
        if len(hosts) <= GRID_LABELS_MAX:
            label = "<b>%s %s</b><span>%s</span>" % (esc(host), label, esc(
                percent(relative[host]) if host in relative else "no value"))
        cells.append('<div class="cell s-%s" style="background:%s;color:%s" title="%s">%s</div>' % (
            state, colour, "#fff" if is_dark(colour) else "#1f2328", esc(title), label))
    heading = "<h2>Nodes <small>%d node%s" % (len(hosts), "" if len(hosts) == 1 else "s")
    if metric and median is not None:
        heading += ", %s against the cluster median %s %s" % (esc(metric), esc(short_number(median)), esc(unit))
    heading += "; hover a cell for its node</small></h2>"
    size = 32 if len(hosts) <= 64 else 24 if len(hosts) <= 256 else 20
    present = {states.get(host, PASS) for host in hosts} | ({"no value"} if len(relative) < len(hosts) else set())
    return heading + grid_legend(span, straggler_pct(document), present) + '<div class="grid%s" style="--cell:%dpx">%s</div>' % (
        " labelled" if len(hosts) <= GRID_LABELS_MAX else "", size, "".join(cells))


def failed_labels(shown: View) -> Dict[str, List[str]]:
    """host -> the labels of its failed checks, the culprit's cause first."""
    labels: Dict[str, List[str]] = {}
    for check in shown.culprit_checks:
        labels.setdefault(str(check.get("node")), []).append(check_label(check))
    for group in shown.failed + shown.consequential:
        for node in group.nodes:
            labels.setdefault(node, []).append(group.label)
    return labels


def percent(fraction: float) -> str:
    """+1.5%, -12.0%, 0.0% (never -0.0%)."""
    text = "%+.1f%%" % (100 * fraction)
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def grid_legend(span: float, limit_pct: float, present: Set[str]) -> str:
    """The colour scale, and the marks of the states some node has."""
    stops = ",".join("%s %.0f%%" % (colour, (position + 1) * 50) for position, colour in DIVERGING)
    ticks = "".join('<span style="left:%.1f%%">%+.0f%%</span>' % ((fraction + 1) * 50, fraction * span * 100)
                    for fraction in (-1.0, -0.5, 0.0, 0.5, 1.0))
    limit = '<i style="left:%.1f%%" title="straggler limit"></i>' % max(0.0, (1 - limit_pct / 100.0 / span) * 50)
    marks = ['<span><span class="swatch" style="background:#f7f7f7;%s">%s</span>%s</span>' % (
        style, esc(MARKS[state]), STATE_WORDS[state]) for state, style in (
        ("culprit", "border:3px solid #000"), (FAIL, "border:2px solid #cf222e"),
        ("consequence", "border:1px dotted #1f2328")) if state in present]
    if "no value" in present:
        marks.insert(0, '<span><span class="swatch" style="background:%s"></span>no throughput value</span>'
                     % NO_VALUE_COLOUR)
    scale = ('<div class="scale"><span>below the median</span><div class="bar" style="background:linear-gradient('
             'to right,%s)">%s%s</div><span>above</span><span class="muted">dashed mark: straggler limit -%s%%</span>'
             '</div>' % (stops, ticks, limit, short_number(limit_pct)))
    return scale + ('<div class="scale">%s</div>' % "".join(marks) if marks else "")


def unit_of(metric: Optional[str]) -> str:
    known = metric_def(metric) if metric else None
    return known.unit if known else ""


# -- curves ----------------------------------------------------------------------------------------------

class Curve(NamedTuple):
    label: str
    points: List[Tuple[float, float]]
    colour: str
    width: float = 2.0


class Band(NamedTuple):
    steps: List[float]
    low: List[float]
    median: List[float]
    high: List[float]


class Level(NamedTuple):
    value: float
    label: str
    colour: str
    dash: str


def finite_points(points: Any) -> List[Tuple[float, float]]:
    """[step, value] pairs with two finite numbers (NaN losses and "nan" strings left out)."""
    return [(point[0], point[1]) for point in points or []
            if isinstance(point, (list, tuple)) and len(point) > 1 and isinstance(point[0], (int, float))
            and isinstance(point[1], (int, float)) and math.isfinite(point[0]) and math.isfinite(point[1])]


def interpolate(points: Sequence[Tuple[float, float]], steps: Sequence[float],
                index_of: Mapping[float, int]) -> Dict[int, float]:
    """The curve's value at each of ``steps`` (by index; ``index_of`` maps a step to it) within its own
    first and last step: its own points where it has them, linear between them elsewhere."""
    values = {index_of[x]: y for x, y in points if x in index_of}
    if len(values) == bisect.bisect_right(steps, points[-1][0]) - bisect.bisect_left(steps, points[0][0]):
        return values                     # every step in range is one of the curve's own (the usual case)
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        for index in range(bisect.bisect_right(steps, x0), bisect.bisect_left(steps, x1)):
            values[index] = y0 + (y1 - y0) * (steps[index] - x0) / (x1 - x0)
    return values


def band_of(curves: Mapping[str, List[Tuple[float, float]]]) -> Tuple[Band, Dict[str, Dict[int, float]]]:
    """p10, median and p90 across nodes at the steps of any node (at most BAND_STEPS_MAX of them), and
    each node's values at those steps, by index. Every step is some node's own, so each has a value."""
    steps = sorted({p[0] for points in curves.values() for p in points})
    if len(steps) > BAND_STEPS_MAX:
        stride = (len(steps) - 1) / float(BAND_STEPS_MAX - 1)
        steps = [steps[round(i * stride)] for i in range(BAND_STEPS_MAX)]
    index_of = {step: index for index, step in enumerate(steps)}
    at = {host: interpolate(points, steps, index_of) for host, points in curves.items() if points}
    band = Band(steps, [], [], [])
    for index in range(len(steps)):
        values = [v[index] for v in at.values() if index in v]
        band.low.append(percentile(values, 10))
        band.median.append(statistics.median(values))
        band.high.append(percentile(values, 90))
    return band, at


def outliers(band: Band, at: Mapping[str, Dict[int, float]], limit: float,
             must: Sequence[str]) -> List[Tuple[str, float]]:
    """Nodes whose curve lies, on average, more than ``limit`` (a fraction) from the median, worst first
    (at most OUTLIERS_MAX), and the nodes in ``must``: (host, mean deviation)."""
    scale = [1.0 / abs(m) if m else 0.0 for m in band.median]
    scored = []
    for host, values in at.items():
        if values:
            deviation = sum((v - band.median[i]) * scale[i] for i, v in values.items()) / len(values)
            scored.append((host, deviation))
    picked = sorted((s for s in scored if abs(s[1]) >= limit), key=lambda s: (-abs(s[1]), natural_key(s[0])))
    picked = picked[:OUTLIERS_MAX]
    named = {host for host, dummy in picked}
    return picked + [(host, dev) for host, dev in scored if host in must and host not in named]


def curves_section(document: Mapping[str, Any], shown: View, metric: Optional[str]) -> str:
    series = document.get("series") or {}
    out = ["<h2>Curves</h2>"]
    if metric:
        out.append(metric_chart(document, shown, metric, "%s (%s)" % (metric, unit_of(metric)) if unit_of(metric)
                                else metric, zero_based=True))
    out.append(metric_chart(document, shown, "loss", "loss", zero_based=False))
    if not series:
        out.append("<p>No step series in this document.</p>")
    return "".join(out)


def metric_chart(document: Mapping[str, Any], shown: View, metric: str, title: str, zero_based: bool) -> str:
    curves = {str(host): finite_points((s or {}).get(metric)) for host, s in (document.get("series") or {}).items()}
    curves = {host: sorted(points) for host, points in curves.items() if points}
    levels = threshold_levels(document, metric) if metric != "loss" else []
    legend: List[str] = []
    if len(curves) <= INDIVIDUAL_CURVES_MAX:
        drawn = [Curve(host, curves[host], PALETTE[i % len(PALETTE)], 2.5)
                 for i, host in enumerate(sorted(curves, key=natural_key))]
        legend = [legend_line(c.colour, c.label) for c in drawn]
        band = None
    else:
        band, at = band_of(curves)
        culprit = [str(shown.culprit["host"])] if shown.culprit else []
        picked = outliers(band, at, straggler_pct(document) / 200.0, culprit)
        drawn = [Curve(host, curves[host], CULPRIT_COLOUR if host in culprit else PALETTE[(i + 1) % len(PALETTE)], 1.6)
                 for i, (host, dummy) in enumerate(picked)]
        legend = ['<span><span class="swatch" style="background:%s"></span>p10-p90 of %d nodes</span>' % (
            BAND_COLOUR, len(curves)), legend_line(MEDIAN_COLOUR, "median")]
        legend += [legend_line(c.colour, "%s%s %+.1f%% against the median" % (
            c.label, " (culprit)" if c.label in culprit else "", 100 * dev)) for c, (dummy, dev) in zip(drawn, picked)]
        if not picked:
            legend.append("<span class=\"muted\">no node more than %s%% from the median</span>" % short_number(
                straggler_pct(document) / 2))
    legend += [legend_line(level.colour, level.label, level.dash) for level in levels]
    chart = svg_chart(title, drawn, band, levels, zero_based)
    return chart + '<div class="legend">%s</div>' % "".join(legend)


def legend_line(colour: str, label: str, dash: str = "") -> str:
    style = "border-top-color:%s%s" % (colour, ";border-top-style:dashed" if dash else "")
    return '<span><span class="line" style="%s"></span>%s</span>' % (style, esc(label))


def threshold_levels(document: Mapping[str, Any], metric: str) -> List[Level]:
    """The thresholds of ``metric`` that the checks compared with, the straggler limit and the baseline."""
    levels: List[Level] = []
    baseline = document.get("baseline") if isinstance(document.get("baseline"), dict) else {}
    for check in document.get("checks") or []:
        if (isinstance(check, dict) and check.get("check") == "threshold" and check.get("metric") == metric
                and check.get("status") in (PASS, FAIL) and is_finite_number(check.get("expected"))):
            value = float(check["expected"])
            if all(level.value != value for level in levels):
                source = " from baseline run %s" % baseline.get("run_id") if check.get("source") == "baseline" else ""
                levels.append(Level(value, "threshold %s%s" % (short_number(value), source), THRESHOLD_COLOUR, "6 4"))
    values = node_throughput(document, metric)
    if len(values) > 1:
        floor = statistics.median(values.values()) * (1 - straggler_pct(document) / 100.0)
        levels.append(Level(floor, "straggler limit %s (-%s%% of the median)" % (
            short_number(floor), short_number(straggler_pct(document))), FLOOR_COLOUR, "2 3"))
    base = (baseline.get("values") or {}).get(metric) if isinstance(baseline.get("values"), dict) else None
    if is_finite_number(base):
        levels.append(Level(float(base), "baseline %s (run %s)" % (short_number(base), baseline.get("run_id")),
                            BASELINE_COLOUR, "8 3 2 3"))
    return levels


# -- SVG -------------------------------------------------------------------------------------------------

WIDTH, HEIGHT = 1000, 320
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 30, 42


def nice_step(span: float, count: int = 5, whole: bool = False) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about ``count`` ticks over ``span``;
    ``whole``: a whole number (steps of training)."""
    raw = span / max(1, count)
    magnitude = 10 ** int(("%e" % raw).split("e")[1])
    for factor in ((1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)):
        if raw <= factor * magnitude:
            return max(1.0, factor * magnitude) if whole else factor * magnitude
    return 10 * magnitude


def axis_range(low: float, high: float, zero_based: bool) -> Tuple[float, float, float]:
    """A rounded range and tick step that hold [low, high]; from 0 when ``zero_based``."""
    if zero_based:
        low = min(0.0, low)
    if high <= low:
        high = low + (abs(low) or 1.0)
    step = nice_step(high - low)
    return (step * int(low / step) if low >= 0 else -step * int(-low / step + 0.999999)), \
        step * int(high / step + 0.999999), step


def svg_chart(title: str, curves: Sequence[Curve], band: Optional[Band], levels: Sequence[Level],
              zero_based: bool) -> str:
    xs = [p[0] for c in curves for p in c.points] + (band.steps if band else [])
    ys = [p[1] for c in curves for p in c.points] + (band.low + band.high if band else []) + [lv.value for lv in levels]
    head = ('<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" '
            'role="img" aria-label="%s"><rect width="100%%" height="100%%" fill="#fff" stroke="#d0d7de"/>'
            '<text x="%d" y="19" font-size="14" font-weight="bold" font-family="sans-serif">%s</text>' % (
                WIDTH, HEIGHT, WIDTH, HEIGHT, esc(title), LEFT, esc(title)))
    if not xs:
        return head + '<text x="%d" y="%d" font-family="sans-serif">no data</text></svg>' % (LEFT, HEIGHT // 2)
    x0, x1 = min(xs), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1
    y0, y1, ystep = axis_range(min(ys), max(ys), zero_based)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts = [head]
    parts.extend(y_axis(y0, y1, ystep, sy))
    parts.extend(x_axis(x0, x1, sx))
    if y0 != 0:
        parts.append('<text x="%d" y="19" font-size="12" fill="#9a6700" text-anchor="end" font-family="sans-serif">'
                     'y axis starts at %s, not 0</text>' % (WIDTH - RIGHT, esc(short_number(y0))))
    if band and band.steps:
        outline = ["%.1f,%.1f" % (sx(x), sy(y)) for x, y in zip(band.steps, band.high)]
        outline += ["%.1f,%.1f" % (sx(x), sy(y)) for x, y in reversed(list(zip(band.steps, band.low)))]
        parts.append('<polygon fill="%s" stroke="none" points="%s"><title>p10-p90</title></polygon>' % (
            BAND_COLOUR, " ".join(outline)))
        parts.append(polyline(zip(band.steps, band.median), MEDIAN_COLOUR, 2.5, "median", sx, sy))
    for level in levels:
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.8" stroke-dasharray="%s">'
                     '<title>%s</title></line>' % (LEFT, WIDTH - RIGHT, sy(level.value), sy(level.value), level.colour,
                                                   level.dash, esc(level.label)))
    for curve in curves:
        parts.append(polyline(curve.points, curve.colour, curve.width, curve.label, sx, sy))
    parts.append("</svg>")
    return "".join(parts)


def polyline(points: Any, colour: str, width: float, label: str, sx: Any, sy: Any) -> str:
    coords = " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in points)
    return '<polyline fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" points="%s"><title>%s</title>' \
           '</polyline>' % (colour, width, coords, esc(label))


def y_axis(y0: float, y1: float, step: float, sy: Any) -> List[str]:
    parts = []
    count = int(round((y1 - y0) / step))
    for i in range(count + 1):
        value = y0 + i * step
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eaeef2"/>' % (
            LEFT, WIDTH - RIGHT, sy(value), sy(value)))
        parts.append('<text x="%d" y="%.1f" font-size="11" text-anchor="end" font-family="sans-serif">%s</text>' % (
            LEFT - 6, sy(value) + 4, esc(short_number(value))))
    parts.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#57606a"/>' % (LEFT, LEFT, TOP, HEIGHT - BOTTOM))
    return parts


def x_axis(x0: float, x1: float, sx: Any) -> List[str]:
    parts = ['<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#57606a"/>' % (
        LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, HEIGHT - BOTTOM)]
    step = nice_step(x1 - x0, 8, whole=True)
    tick = step * int(x0 / step + 0.999999)
    while tick <= x1 + 1e-9:
        parts.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle" font-family="sans-serif">%s</text>' % (
            sx(tick), HEIGHT - BOTTOM + 15, esc(short_number(tick))))
        tick += step
    parts.append('<text x="%d" y="%d" font-size="12" text-anchor="middle" font-family="sans-serif">step</text>' % (
        LEFT + (WIDTH - LEFT - RIGHT) // 2, HEIGHT - 6))
    return parts


# -- checks, run, every check ----------------------------------------------------------------------------

def checks_section(shown: View) -> str:
    rows = ['<h2>Checks</h2><table><colgroup><col style="width:32%"><col style="width:14%"><col></colgroup>'
            "<tr><th>check</th><th>status</th><th>nodes</th></tr>"]
    for group in shown.passed:
        rows.append('<tr><td>%s</td><td class="pass">pass</td><td>all %d%s</td></tr>' % (
            esc(group.label), len(group.nodes), esc(("; " + value_range(group)) if value_range(group) else "")))
    for group in shown.failed + shown.consequential:
        rows.append('<tr><td>%s</td><td class="fail">fail</td><td>%s (%d of %d)</td></tr>' % (
            esc(group.label), esc(compact_hosts(group.nodes, 100)), len(group.nodes), group.of))
    for group in shown.not_judged:
        rows.append('<tr><td>%s</td><td class="not_judged">not judged</td><td>%s: %d node%s%s</td></tr>' % (
            esc(group.label), esc(group.status.replace("_", " ")), len(group.nodes),
            "" if len(group.nodes) == 1 else "s", esc(("; " + value_range(group)) if value_range(group) else "")))
    rows.append("</table>")
    return "".join(rows)


def run_section(document: Mapping[str, Any], shown: View) -> str:
    facts = [(key.replace("_", " "), document.get(key)) for key in (
        "run_id", "config_name", "framework", "model", "gpu_arch", "mode", "final_step", "total_steps", "warmup_steps",
        "straggler_pct", "run_dir", "generated_at", "schema_version")]
    facts.insert(4, ("effective model", model_text(document.get("effective_model"), document.get("model"))))
    facts.append(("nodes", len(hosts_of(document, shown))))
    judged = document.get("judged")
    if isinstance(judged, list):
        facts.append(("judged metrics", ", ".join(str(m) for m in judged) or "none"))
    facts.append(("teardown", teardown_text(document.get("teardown"))))
    items = "".join("<dt>%s</dt><dd>%s</dd>" % (esc(k), esc(v)) for k, v in facts if v not in (None, ""))
    return '<h2>Run</h2><dl class="facts">%s</dl>' % items


def model_text(model: Any, key: Any) -> Optional[str]:
    if not isinstance(model, dict) or not model.get("name"):
        return None
    text = str(model["name"])
    if is_finite_number(model.get("params_b")):
        text += ", %s B parameters" % short_number(model["params_b"])
    dims = model.get("dims") if isinstance(model.get("dims"), dict) else {}
    if dims:
        text += " (%s)" % ", ".join("%s %s" % (k, v) for k, v in dims.items())
    if key and str(key) != str(model["name"]):
        text += "; the config's model key is %s" % key
    return text


def teardown_text(teardown: Any) -> Optional[str]:
    """Hosts grouped by their teardown outcome (its status, or ok/failed)."""
    if not isinstance(teardown, dict) or not teardown:
        return None
    groups: Dict[str, List[str]] = {}
    for host, outcome in teardown.items():
        if isinstance(outcome, dict):
            status = str(outcome.get("status") or ("failed" if outcome.get("failed") else "ok"))
        else:
            status = str(outcome)
        groups.setdefault(status, []).append(str(host))
    return "; ".join("%s: %s" % (status, compact_hosts(hosts, 100)) for status, hosts in sorted(groups.items()))


def status_cell(status: Any) -> str:
    if status in NOT_JUDGED:
        return '<td class="not_judged">not judged</td>'
    return '<td class="%s">%s</td>' % (esc(status), esc(status))


def every_check(document: Mapping[str, Any]) -> str:
    """Every check by node, collapsed; above EVERY_CHECK_ROWS rows, those that did not pass first and the
    rest left to results.json (the page stays light at 500 nodes)."""
    checks = sorted((c for c in document.get("checks") or [] if isinstance(c, dict)),
                    key=lambda c: natural_key(str(c.get("node"))))
    shown = checks
    if len(checks) > EVERY_CHECK_ROWS:
        shown = ([c for c in checks if c.get("status") != PASS] + [c for c in checks if c.get("status") == PASS])
        shown = sorted(shown[:EVERY_CHECK_ROWS], key=lambda c: natural_key(str(c.get("node"))))
    rows = "".join('<tr><td>%s</td><td>%s</td>%s<td class="detail">%s</td></tr>' % (
        esc(c.get("node")), esc(check_label(c)), status_cell(c.get("status")), esc(c.get("detail"))) for c in shown)
    more = len(checks) - len(shown)
    summary = "%d checks, by node" % len(checks) + (
        " (the %d that did not pass first; %d more in results.json)" % (len(shown), more) if more else "")
    return ('<h2>Every check</h2><details%s><summary>%s</summary><table><colgroup>'
            '<col style="width:16%%"><col style="width:22%%"><col style="width:10%%"><col></colgroup>'
            '<tr><th>node</th><th>check</th><th>status</th><th>detail</th></tr>%s</table></details>' % (
                " open" if len(checks) <= 40 else "", esc(summary), rows))
