# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""report.html: one self-contained page (inline CSS and SVG; no script, font or image from anywhere),
readable at 2 nodes and at 500, rendered from the Jinja2 templates in plugins/plugin_utils/templates/.

In this order: the SIMULATED banner, the verdict and its headline, where the run stopped (a run that
stopped early), the culprit and its consequences, the threshold cell, the failures table (culprit first,
consequences grouped), a grid of the nodes coloured by throughput against the cluster median (each cell a
link to the node's log), the curves over steps with a wall-clock row (throughput, TFLOP/s, step time per
step, loss: every node up to 4 nodes; above, the median with a p10-p90 band and the outlier nodes named),
each node in its own <details>, the checks, the run and the effective model. Python computes what is shown
(this module); the templates hold every piece of markup, autoescaped.
"""
from __future__ import annotations

import bisect
import datetime
import math
import os
import re
import statistics
import urllib.parse
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._fabric_html import fabric_view
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts, natural_key
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import metric_def
from ansible_collections.clusterval.training.plugins.module_utils._metrics import is_finite_number, percentile
from ansible_collections.clusterval.training.plugins.module_utils._report_view import (
    FAIL, NOT_JUDGED, PASS, CheckGroup, View, cannot_fail_sentence, check_label, expectations, failed_by_check,
    failed_check_text, hosts_of, node_states, node_throughput, relative_to_median, realism_sentence, short_number,
    throughput_metric, unique, value_range, view)

try:  # Jinja2 comes with ansible-core; this runs on the controller only (training_results, the callback)
    import jinja2
    JINJA2_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - ansible-core requires Jinja2
    jinja2 = None
    JINJA2_IMPORT_ERROR = str(exc)

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
NODES_LISTED_MAX = 64          # above, each node's <details> sit in one collapsed list; the failed ones above it
DEFAULT_STRAGGLER_PCT = 10.0
CONTROL = re.compile("\x1b\\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MARKS = {"culprit": "!", FAIL: "\u2715", "consequence": "", PASS: ""}
STATE_WORDS = {"culprit": "culprit", FAIL: "failed", "consequence": "stopped as a consequence", PASS: "passed"}
FLOPS_METRICS = ("tflops_per_sec_per_gpu", "throughput_per_gpu")
STEP_TIME_TITLE = "step time per step (s)"

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
.grid>a,.grid>a:visited{display:block;text-decoration:none;color:inherit}
.stopped{border-left:6px solid #9a6700;background:#fff8c5;padding:8px 12px;margin:8px 0}
.stopped pre{background:#fff;border:1px solid #d4a72c;padding:6px 8px;margin:6px 0}
.nodata{font-size:16px}
.drill{columns:2 420px;column-gap:16px;margin:8px 0}
.drill details{break-inside:avoid;border:1px solid #d0d7de;border-radius:4px;padding:2px 8px;margin:0 0 4px}
.drill details.s-culprit{border:2px solid #000}.drill details.s-fail{border-color:#cf222e}
.drill .state{font-size:12px;border-radius:8px;padding:0 6px;background:#eaeef2}
.drill .state.culprit,.drill .state.fail{background:#ffebe9;color:#cf222e}
.drill ul{margin:4px 0;padding-left:18px}.drill dl.facts{font-size:13px}
.stages{display:flex;flex-wrap:wrap;gap:4px;margin:8px 0;padding:0;list-style:none}
.stages li{border:1px solid #d0d7de;border-radius:4px;padding:4px 6px;font-size:12.5px;flex:1 1 0;min-width:104px}
.stages li b{display:block}.stages .ok{background:#dafbe1}.stages .failed{background:#ffebe9;border:2px solid #cf222e}
.stages .interrupted{background:#fff8c5;border:2px solid #9a6700}.stages .not_reached,.stages .skipped{color:#59636e}
"""


# -- rendering ---------------------------------------------------------------------------------------------

_ENVIRONMENT: Optional[Any] = None


def template_dir() -> str:
    """The templates ship in the collection beside the controller-side code: plugins/plugin_utils/templates."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_utils", "templates")


def environment() -> Any:
    """One Jinja2 environment per process (Jinja2 comes with ansible-core; this runs on the controller)."""
    global _ENVIRONMENT  # pylint: disable=global-statement
    if _ENVIRONMENT is None:
        if jinja2 is None:
            raise RuntimeError("Jinja2 is needed on the controller to write report.html (it comes with "
                               "ansible-core): %s" % JINJA2_IMPORT_ERROR)
        _ENVIRONMENT = jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir()), autoescape=True,
                                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return _ENVIRONMENT


def clean(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if text.isprintable() else CONTROL.sub("", text)


def cleaned(value: Any) -> Any:
    """Every string in a context, cleaned of control characters (recursively)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {key: cleaned(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [cleaned(item) for item in value]
    return value


# -- the page --------------------------------------------------------------------------------------------

def html_report(document: Mapping[str, Any], shown: Optional[View] = None, logs: Optional[Set[str]] = None) -> str:
    """The page. ``logs``: the nodes whose log lies beside it (``logs/<host>/training.log``); None: link every
    node's (the page is rendered away from its run directory)."""
    shown = shown or view(document)
    metric = throughput_metric(document)
    title = "Training validation: %s" % (document.get("config_name") or document.get("run_id") or "run")
    charts, reason = charts_of(document, shown, metric)
    context = {
        "title": title, "style": STYLE, "simulated": shown.simulated, "verdict": verdict_of(shown),
        "realism": realism_sentence(shown.realism) if shown.realism else "",
        "stop": stop_of(document, shown), "culprit": culprit_of_view(shown), "unjudged": unjudged_text(shown),
        "expectations": expectations(document, shown),
        "run_cause": run_cause_of(document, shown),
        "cell": cell_of(document), "baseline": baseline_text(document), "failures": failures_of(document, shown),
        "grid": grid_of(document, shown, metric, logs), "charts": charts, "charts_reason": reason,
        "nodes": drill_down(document, shown, metric, logs), "nodes_listed_max": NODES_LISTED_MAX, "checks": checks_of(shown, document),
        "checks_empty": "no check was judged: %s" % (reason or "no node reported a result"),
        "facts": run_facts(document, shown), "every": every_check_of(document),
        "fabric": fabric_view(document.get("fabric")), "stages": stages_of(document),
    }
    return environment().get_template("report.html.j2").render(cleaned(context))


def run_cause_of(document: Mapping[str, Any], shown: View) -> Optional[Dict[str, Any]]:
    """No node is named: why, and where each node stopped with what its processes were doing."""
    run_cause = document.get("run_cause")
    if shown.culprit or not isinstance(run_cause, dict):
        return None
    evidence = run_cause.get("evidence") if isinstance(run_cause.get("evidence"), dict) else {}
    rows = [(host, item.get("step"), item.get("reason"),
             " ".join("%s=%s" % (k, v) for k, v in sorted((item.get("process") or {}).items()) if k != "stack"))
            for host, item in sorted(evidence.items()) if isinstance(item, dict)]
    return {"cls": run_cause.get("class"), "text": run_cause.get("text"), "rows": rows}


def verdict_of(shown: View) -> Dict[str, str]:
    word, dummy, rest = shown.headline.partition(" ")
    if not word.rstrip(":") == shown.verdict:
        word, rest = shown.verdict, shown.headline
    return {"css": shown.verdict, "word": word, "rest": rest}


def stopped(document: Mapping[str, Any], shown: View) -> bool:
    """A run that stopped before a verdict on its steps: no check judged anything, or it says where it stopped."""
    return isinstance(document.get("stop"), dict) or (shown.verdict == "FAIL" and not shown.subjects)


def stop_of(document: Mapping[str, Any], shown: View) -> Optional[Dict[str, Any]]:
    if not stopped(document, shown):
        return None
    stop = document.get("stop") if isinstance(document.get("stop"), dict) else {}
    lines = [str(stop[key]) for key in ("cause", "reason") if stop.get(key)]
    lines += [str(line) for line in stop.get("lines") or [] if str(line) not in lines]
    if not shown.subjects:  # no check judged anything: the failures are all there is (a judged run has its table)
        lines += [str(line) for line in document.get("failures") or [] if str(line) not in lines]
    hosts = []
    for key, label in (("hosts", "nodes"), ("nodes", "nodes"), ("never_started", "nodes that never started")):
        if isinstance(stop.get(key), list) and stop[key]:
            hosts.append((label, compact_hosts([str(h) for h in stop[key]], 400)))
    return {"stage": stop.get("stage"), "lines": lines, "hosts": hosts, "before_training": not has_steps(document)}


STAGE_MARKS = {"ok": "\u2713", "failed": "\u2715", "interrupted": "\u25a0", "not reached": "\u2013", "skipped": "\u2013"}


def stages_of(document: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The run's stages in order with their outcome and, where known, when they started and ended (UTC)."""
    rows = []
    for stage in document.get("stages") or []:
        if not isinstance(stage, dict):
            continue
        outcome = str(stage.get("outcome") or "")
        start, end = stage.get("start"), stage.get("end")
        took = "%ds" % round(end - start) if is_finite_number(start) and is_finite_number(end) and end >= start else ""
        rows.append({"stage": stage.get("stage"), "outcome": outcome, "mark": STAGE_MARKS.get(outcome, ""),
                     "css": outcome.replace(" ", "_"), "when": stage_time(clock(start), clock(end), took)})
    return rows


def stage_time(start: str, end: str, took: str) -> str:
    """What is known of when: ``10:15:02 → 10:15:40 (38s)``, ``from 10:15:02``, ``until 10:15:40``; never a guess."""
    if start and end:
        return "%s → %s%s" % (start, end, " (%s)" % took if took else "")
    return "from %s" % start if start else "until %s" % end if end else ""


def clock(epoch: Any) -> str:
    """HH:MM:SS UTC (the day is the run's, in the run's facts); empty when not known."""
    text = utc_time(epoch)
    return text[11:] if text else ""


def has_steps(document: Mapping[str, Any]) -> bool:
    return any(finite_points(points) for series in (document.get("series") or {}).values()
               for points in (series or {}).values())


def culprit_of_view(shown: View) -> Optional[Dict[str, Any]]:
    culprit = shown.culprit
    if not culprit:
        return None
    facts = [("class", culprit.get("class")), ("step", culprit.get("step")), ("log line", culprit.get("lineno")),
             ("time", utc_time(culprit.get("time")))]
    consequences = ""
    if shown.consequences:
        consequences = "%d other node%s stopped as a consequence: %s" % (
            len(shown.consequences), "" if len(shown.consequences) == 1 else "s", compact_hosts(shown.consequences, 200))
    return {"host": culprit["host"], "facts": ["%s %s" % (k, v) for k, v in facts if v not in (None, "")],
            "text": culprit.get("text"), "consequences": consequences}


def unjudged_text(shown: View) -> str:
    return "; ".join("%s (%s)" % (u.get("metric"), u.get("reason") or "no threshold") for u in shown.unjudged)


def cell_of(document: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The versioned format's threshold cell, and where its name and the run differ."""
    cell = document.get("threshold_file")
    if not isinstance(cell, dict):
        return None
    differences = [str(line) for line in cell.get("differences_text") or []]
    if cell.get("cell"):
        text = "%s judges this run (%s)" % (cell["cell"], os.path.basename(str(cell.get("path") or "")))
        if differences:
            text += "; the cell is for another run:"
    else:
        text = str(cell.get("note") or "no cell of the threshold file judges this run")
    return {"text": text, "differences": differences}


def baseline_text(document: Mapping[str, Any]) -> Optional[str]:
    baseline = document.get("baseline")
    if not isinstance(baseline, dict) or not baseline:
        return None
    return "Thresholds from the baseline run %s (%s), tolerance %s%%." % (
        baseline.get("run_id") or "?", baseline.get("path") or "?",
        short_number(baseline["tolerance_pct"]) if is_finite_number(baseline.get("tolerance_pct")) else "?")


def utc_time(epoch: Any) -> Optional[str]:
    if not is_finite_number(epoch):
        return None
    return datetime.datetime.fromtimestamp(float(epoch), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- failures --------------------------------------------------------------------------------------------

def failures_of(document: Mapping[str, Any], shown: View) -> Dict[str, Any]:
    """The failures table; without a failed check, a FAIL says why (never "No check failed")."""
    failed_nodes = unique([str(c.get("node")) for c in shown.culprit_checks]
                          + [n for g in shown.failed + shown.consequential for n in g.nodes])
    count = len(shown.culprit_checks) + sum(len(g.checks) for g in shown.failed + shown.consequential)
    lines: List[str] = []
    why = ""
    if not count and (shown.verdict != "PASS" or stopped(document, shown)):
        lines = [str(line) for line in document.get("failures") or []] or [shown.headline]
        why = ("The run stopped before any check could judge it:" if stopped(document, shown)
               else "No single check failed, but the run did:")
    subhead = ""
    if shown.consequential:
        subhead = "Stopped as a consequence of %s: %d of %d node%s (%s)" % (
            shown.cause, len(shown.consequences), len(shown.subjects), "" if len(shown.subjects) == 1 else "s",
            compact_hosts(shown.consequences, 120))
    return {"count": count, "nodes": len(failed_nodes), "lines": lines, "why": why, "subhead": subhead,
            "culprit": [{"node": c.get("node"), "label": check_label(c), "detail": c.get("detail")}
                        for c in shown.culprit_checks],
            "own": [group_row(g) for g in shown.failed],
            "consequential": [dict(group_row(g), of=None) for g in shown.consequential]}


def group_row(group: CheckGroup) -> Dict[str, Any]:
    first = group.checks[0]
    listed = [node_detail(c) for c in group.checks[:DETAILS_LISTED_MAX]] if len(group.checks) > 1 else []
    return {"hosts": compact_hosts(group.nodes, 120), "count": len(group.nodes), "of": group.of, "label": group.label,
            "detail": node_detail(first) if len(group.nodes) > 1 else first.get("detail"),
            "listed": listed, "total": len(group.checks), "more": max(0, len(group.checks) - DETAILS_LISTED_MAX)}


def node_detail(check: Mapping[str, Any]) -> str:
    """``node1: stopped at step 3 of 11``; a detail that names its node already is left as it is."""
    detail = str(check.get("detail") or "")
    return detail if detail.startswith("%s: " % check.get("node")) else "%s: %s" % (check.get("node"), detail)


def log_link(host: str, logs: Optional[Set[str]] = None) -> str:
    """The node's log, fetched beside the reports: logs/<host>/training.log; empty when it was not collected
    (``logs``: the nodes whose log is there; None: not known, linked)."""
    if logs is not None and str(host) not in logs:
        return ""
    return "logs/%s/training.log" % urllib.parse.quote(str(host), safe="")


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


def outlier_pct(document: Mapping[str, Any]) -> float:
    """The straggler limit, or the default's where the limit cannot fail (the colours and outliers need a scale)."""
    return straggler_pct(document) if straggler_pct(document) < 100 else DEFAULT_STRAGGLER_PCT


def grid_of(document: Mapping[str, Any], shown: View, metric: Optional[str],
            logs: Optional[Set[str]] = None) -> Optional[Dict[str, Any]]:
    hosts = hosts_of(document, shown)
    if not hosts:
        return None
    values = node_throughput(document, metric) if metric else {}
    median, relative = relative_to_median(values)
    limit_pct = straggler_pct(document)
    span = 2 * outlier_pct(document) / 100.0    # the colours span twice the straggler limit
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
        cells.append({"host": host, "state": state, "colour": colour, "ink": "#fff" if is_dark(colour) else "#1f2328",
                      "title": title, "mark": MARKS[state], "log": log_link(host, logs),
                      "figure": percent(relative[host]) if host in relative else "no value"})
    heading = "%d node%s" % (len(hosts), "" if len(hosts) == 1 else "s")
    if metric and median is not None:
        heading += ", %s against the cluster median %s %s" % (metric, short_number(median), unit)
    present = {states.get(host, PASS) for host in hosts} | ({"no value"} if len(relative) < len(hosts) else set())
    return dict(heading=heading, cells=cells, labelled=len(hosts) <= GRID_LABELS_MAX,
                logs=any(cell["log"] for cell in cells), limit_cannot_fail=limit_pct >= 100,
                size=32 if len(hosts) <= 64 else 24 if len(hosts) <= 256 else 20, **grid_legend(span, limit_pct, present))


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


def grid_legend(span: float, limit_pct: float, present: Set[str]) -> Dict[str, Any]:
    """The colour scale, and the marks of the states some node has."""
    marks = [{"style": "background:%s" % NO_VALUE_COLOUR, "symbol": "", "label": "no throughput value"}] \
        if "no value" in present else []
    marks += [{"style": "background:#f7f7f7;%s" % style, "symbol": MARKS[state], "label": STATE_WORDS[state]}
              for state, style in (("culprit", "border:3px solid #000"), (FAIL, "border:2px solid #cf222e"),
                                   ("consequence", "border:1px dotted #1f2328")) if state in present]
    return {"stops": ",".join("%s %.0f%%" % (colour, (position + 1) * 50) for position, colour in DIVERGING),
            "ticks": [("%.1f" % ((fraction + 1) * 50), "%+.0f%%" % (fraction * span * 100))
                      for fraction in (-1.0, -0.5, 0.0, 0.5, 1.0)],
            "limit_left": "%.1f" % max(0.0, (1 - limit_pct / 100.0 / span) * 50), "limit_pct": short_number(limit_pct),
            "marks": marks}


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


def charts_of(document: Mapping[str, Any], shown: View, metric: Optional[str]
              ) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The curves that have data: throughput, TFLOP/s, step time per step, loss, each over steps with a
    wall-clock row; without any step, why there is no curve (never an empty chart)."""
    if not has_steps(document):
        if stopped(document, shown):
            stage = (document.get("stop") or {}).get("stage") if isinstance(document.get("stop"), dict) else None
            return [], "the run stopped%s before any node printed a training step." % (" in %s" % stage if stage else "")
        return [], "no node printed a training step (no step series in this document)."
    clock = clock_of(document)
    wanted = [(metric, True)] if metric else []
    flops = next((m for m in FLOPS_METRICS if m != metric and any(m in (s or {}) for s in
                                                                  (document.get("series") or {}).values())), None)
    if flops:
        wanted.append((flops, True))
    wanted += [("seconds", True), ("loss", False)]
    charts = []
    for name, zero_based in wanted:
        unit = unit_of(name)
        title = STEP_TIME_TITLE if name == "seconds" else "%s (%s)" % (name, unit) if unit else name
        drawn = metric_chart(document, shown, name, title, zero_based, clock)
        if drawn:
            charts.append(drawn)
    if not metric:
        charts.append({"missing": "No throughput curve: the step lines carry no throughput metric."})
    if not any(chart["svg"]["title"] == STEP_TIME_TITLE for chart in charts if "svg" in chart):
        charts.append({"missing": "No step-time curve: the step lines carry no step time."})
    return charts, None


def clock_of(document: Mapping[str, Any]) -> Optional[Clock]:
    """The wall clock at a step: the nodes' median of seconds since the first step began (series ``elapsed``),
    from the earliest node start when the document has one (UTC), else as elapsed time."""
    by_step: Dict[float, List[float]] = {}
    for series in (document.get("series") or {}).values():
        for step, elapsed in finite_points((series or {}).get("elapsed")):
            by_step.setdefault(step, []).append(elapsed)
    if len(by_step) < 2:
        return None
    points = sorted((step, statistics.median(values)) for step, values in by_step.items())
    starts = [n.get("started_at") for n in ((document.get("summary") or {}).get("nodes") or {}).values()
              if isinstance(n, dict) and is_finite_number(n.get("started_at"))]
    return Clock(points, min(starts) if starts else None)


class Clock(NamedTuple):
    points: List[Tuple[float, float]]
    start: Optional[float]

    def at(self, step: float) -> Optional[float]:
        steps = [p[0] for p in self.points]
        index = bisect.bisect_left(steps, step)
        if index < len(steps) and steps[index] == step:
            return self.points[index][1]
        if index == 0 or index == len(steps):
            return None
        (x0, y0), (x1, y1) = self.points[index - 1], self.points[index]
        return y0 + (y1 - y0) * (step - x0) / (x1 - x0)

    def label(self, step: float) -> str:
        seconds = self.at(step)
        if seconds is None:
            return ""
        if self.start is not None:
            return datetime.datetime.fromtimestamp(self.start + seconds, datetime.timezone.utc).strftime("%H:%M:%S")
        minutes, rest = divmod(int(round(seconds)), 60)
        hours, minutes = divmod(minutes, 60)
        return "+%d:%02d:%02d" % (hours, minutes, rest) if hours else "+%d:%02d" % (minutes, rest)

    @property
    def axis(self) -> str:
        return "wall clock (UTC)" if self.start is not None else "wall clock (since the first step)"


def metric_chart(document: Mapping[str, Any], shown: View, metric: str, title: str, zero_based: bool,
                 clock: Optional[Clock] = None) -> Optional[Dict[str, Any]]:
    curves = {str(host): finite_points((s or {}).get(metric)) for host, s in (document.get("series") or {}).items()}
    curves = {host: sorted(points) for host, points in curves.items() if points}
    if not curves:
        return None
    levels = threshold_levels(document, metric) if metric not in ("loss", "seconds") else []
    legend: List[Dict[str, Any]] = []
    if len(curves) <= INDIVIDUAL_CURVES_MAX:
        drawn = [Curve(host, curves[host], PALETTE[i % len(PALETTE)], 2.5)
                 for i, host in enumerate(sorted(curves, key=natural_key))]
        legend = [legend_line(c.colour, c.label) for c in drawn]
        band = None
    else:
        band, at = band_of(curves)
        culprit = [str(shown.culprit["host"])] if shown.culprit else []
        picked = outliers(band, at, outlier_pct(document) / 200.0, culprit)
        drawn = [Curve(host, curves[host], CULPRIT_COLOUR if host in culprit else PALETTE[(i + 1) % len(PALETTE)], 1.6)
                 for i, (host, dummy) in enumerate(picked)]
        legend = [{"kind": "band", "colour": BAND_COLOUR, "label": "p10-p90 of %d nodes" % len(curves)},
                  legend_line(MEDIAN_COLOUR, "median")]
        legend += [legend_line(c.colour, "%s%s %+.1f%% against the median" % (
            c.label, " (culprit)" if c.label in culprit else "", 100 * dev)) for c, (dummy, dev) in zip(drawn, picked)]
        if not picked:
            legend.append({"kind": "note", "label": "no node more than %s%% from the median" % short_number(
                outlier_pct(document) / 2)})
    legend += [legend_line(level.colour, level.label, level.dash) for level in levels]
    return {"svg": chart_context(title, drawn, band, levels, zero_based, clock), "legend": legend}


def legend_line(colour: str, label: str, dash: str = "") -> Dict[str, Any]:
    return {"kind": "line", "colour": colour, "label": label, "dash": dash}


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
    if len(values) > 1 and straggler_pct(document) < 100:   # a floor at or below zero cannot fail: not drawn
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
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 30, 58


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
              zero_based: bool, clock: Optional[Clock] = None) -> str:
    """One chart as SVG markup (the chart template's macro)."""
    macro = environment().get_template("chart.svg.j2").module.chart  # type: ignore[attr-defined]
    return str(macro(cleaned(chart_context(title, curves, band, levels, zero_based, clock))))


def chart_context(title: str, curves: Sequence[Curve], band: Optional[Band], levels: Sequence[Level],
                  zero_based: bool, clock: Optional[Clock] = None) -> Dict[str, Any]:
    """What the chart template draws, in SVG coordinates: axes and ticks, the band and median, the threshold
    levels, the curves; a wall-clock row of tick labels under the steps when ``clock`` is known."""
    xs = [p[0] for c in curves for p in c.points] + (band.steps if band else [])
    ys = [p[1] for c in curves for p in c.points] + (band.low + band.high if band else []) + [lv.value for lv in levels]
    frame = {"title": title, "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
             "bottom": HEIGHT - BOTTOM, "middle": LEFT + (WIDTH - LEFT - RIGHT) // 2, "empty": "", "y_ticks": [],
             "x_ticks": [], "clock_ticks": [], "x_label": "step", "note": "", "band": None, "levels": [], "lines": []}
    if not xs:
        return dict(frame, empty="no data")
    x0, x1 = min(xs), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1
    y0, y1, ystep = axis_range(min(ys), max(ys), zero_based)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    def coords(points: Any) -> str:
        return " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in points)

    frame["y_ticks"] = [("%.1f" % sy(y0 + i * ystep), "%.1f" % (sy(y0 + i * ystep) + 4), tick_label(y0 + i * ystep))
                        for i in range(int(round((y1 - y0) / ystep)) + 1)]
    ticks = x_ticks(x0, x1)
    frame["x_ticks"] = [("%.1f" % sx(tick), short_number(tick)) for tick in ticks]
    if clock is not None:
        frame["clock_ticks"] = [("%.1f" % sx(tick), clock.label(tick)) for tick in ticks if clock.label(tick)]
        frame["x_label"] = "step; below it, the %s" % clock.axis
    if y0 != 0:
        frame["note"] = "y axis starts at %s, not 0" % short_number(y0)
    if band and band.steps:
        outline = list(zip(band.steps, band.high)) + list(reversed(list(zip(band.steps, band.low))))
        frame["band"] = {"colour": BAND_COLOUR, "points": coords(outline),
                         "median": {"colour": MEDIAN_COLOUR, "width": 2.5, "label": "median",
                                    "points": coords(zip(band.steps, band.median))}}
    frame["levels"] = [{"y": "%.1f" % sy(level.value), "colour": level.colour, "dash": level.dash,
                        "label": level.label} for level in levels]
    frame["lines"] = [{"colour": c.colour, "width": c.width, "label": c.label, "points": coords(c.points)}
                      for c in curves]
    return frame


def tick_label(value: float) -> str:
    """A y tick that fits the left margin: 8000, 0.25, 1e+09."""
    return "%.3g" % value if abs(value) >= 1e6 else short_number(value)


def x_ticks(x0: float, x1: float) -> List[float]:
    step = nice_step(x1 - x0, 8, whole=True)
    tick = step * int(x0 / step + 0.999999)
    ticks = []
    while tick <= x1 + 1e-9:
        ticks.append(tick)
        tick += step
    return ticks


# -- each node, checks, run, every check -----------------------------------------------------------------

def drill_down(document: Mapping[str, Any], shown: View, metric: Optional[str],
               logs: Optional[Set[str]] = None) -> List[Dict[str, Any]]:
    """One <details> per node: its state, last step, throughput against the median, failed checks, steady
    means and a link to its log."""
    hosts = hosts_of(document, shown)
    states = node_states(shown)
    failed: Dict[str, List[str]] = {}
    for check in document.get("checks") or []:
        if isinstance(check, dict) and check.get("status") == FAIL:
            failed.setdefault(str(check.get("node")), []).append("%s: %s" % (check_label(check), check.get("detail")))
    values = node_throughput(document, metric) if metric else {}
    dummy, relative = relative_to_median(values)
    summaries = (document.get("summary") or {}).get("nodes") or {}
    nodes = []
    for host in hosts:
        summary = summaries.get(host) if isinstance(summaries.get(host), dict) else {}
        state = states.get(host, PASS)
        brief = []
        if summary.get("last_step") is not None:
            brief.append("last step %s" % summary["last_step"])
        if host in values:
            brief.append("%s %s (%s against the median)" % (short_number(values[host]), unit_of(metric),
                                                            percent(relative[host])))
        facts = [("exit status", summary.get("exit_code")), ("steps seen", summary.get("steps")),
                 ("error lines", summary.get("errors"))]
        steady = summary.get("steady") if isinstance(summary.get("steady"), dict) else {}
        facts += [("steady %s" % ("step time" if name == "seconds" else name),
                   "%s %s" % (short_number(stats["mean"]), unit_of(name)))
                  for name, stats in steady.items() if isinstance(stats, dict) and is_finite_number(stats.get("mean"))]
        nodes.append({"host": host, "state": state, "state_word": STATE_WORDS[state], "brief": ", ".join(brief),
                      "log": log_link(host, logs), "failed": failed.get(host, []), "open": state == "culprit",
                      "facts": [(k, v) for k, v in facts if v not in (None, "")]})
    return nodes


def checks_of(shown: View, document: Mapping[str, Any]) -> List[Dict[str, str]]:
    """One row per (check, metric): what failed first, the culprit's first, each with every node that failed it
    (the culprit, on their own, as a consequence); then checks that cannot fail, passed, not judged."""
    rows = [{"label": row.label, "css": "fail", "status": "fail", "cls": "culprit" if row.culprit else
             "consequence" if not row.own else "", "nodes": failed_check_text(row, shown.cause)}
            for row in failed_by_check(shown)]
    rows += [{"label": g.label, "css": "not_judged", "status": "cannot fail", "cls": "",
              "nodes": "all %d: %s" % (len(g.nodes), cannot_fail_sentence(g, document))} for g in shown.cannot_fail]
    rows += [{"label": g.label, "css": "pass", "status": "pass", "cls": "", "nodes": "all %d%s" % (
        len(g.nodes), ("; " + value_range(g)) if value_range(g) else "")} for g in shown.passed]
    rows += [{"label": g.label, "css": "not_judged", "status": "not judged", "cls": "", "nodes": "%s: %d node%s%s" % (
        g.status.replace("_", " "), len(g.nodes), "" if len(g.nodes) == 1 else "s",
        ("; " + value_range(g)) if value_range(g) else "")} for g in shown.not_judged]
    return rows


def run_facts(document: Mapping[str, Any], shown: View) -> List[Tuple[str, Any]]:
    facts = [(key.replace("_", " "), document.get(key)) for key in (
        "run_id", "config_name", "framework", "model", "gpu_arch", "mode", "final_step", "total_steps", "warmup_steps",
        "straggler_pct", "run_dir", "generated_at", "schema_version")]
    facts.insert(4, ("effective model", model_text(document.get("effective_model"), document.get("model"))))
    stop = document.get("stop") if isinstance(document.get("stop"), dict) else {}
    planned = {str(h) for key in ("hosts", "nodes", "never_started") if isinstance(stop.get(key), list)
               for h in stop[key]}
    hosts = hosts_of(document, shown)
    facts.append(("nodes", len(hosts) if hosts or not planned else "%d known to the stop, none judged" % len(planned)))
    judged = document.get("judged")
    if isinstance(judged, list):
        facts.append(("judged metrics", ", ".join(str(m) for m in judged) or "none"))
    facts.append(("teardown", teardown_text(document.get("teardown"))))
    return [(k, v) for k, v in facts if v not in (None, "")]


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
            status = str(outcome.get("status") or (
                "not run (the node left the play)" if not outcome else "unreachable" if outcome.get("unreachable")
                else "failed" if outcome.get("failed") or outcome.get("ok") is False else "ok"))
        else:
            status = str(outcome)
        groups.setdefault(status, []).append(str(host))
    return "; ".join("%s: %s" % (status, compact_hosts(hosts, 100)) for status, hosts in sorted(groups.items()))


def every_check_of(document: Mapping[str, Any]) -> Dict[str, Any]:
    """Every check by node, the culprit's first, collapsed; above EVERY_CHECK_ROWS rows, those that did not pass
    first and the rest left to results.json (the page stays light at 500 nodes)."""
    culprit = str((document.get("culprit") or {}).get("host")) if isinstance(document.get("culprit"), dict) else None

    def by_node(check: Mapping[str, Any]) -> Tuple[bool, Any]:
        return str(check.get("node")) != culprit, natural_key(str(check.get("node")))
    checks = sorted((c for c in document.get("checks") or [] if isinstance(c, dict)), key=by_node)
    shown = checks
    if len(checks) > EVERY_CHECK_ROWS:
        shown = ([c for c in checks if c.get("status") != PASS] + [c for c in checks if c.get("status") == PASS])
        shown = sorted(shown[:EVERY_CHECK_ROWS], key=by_node)
    rows = [{"node": c.get("node"), "label": check_label(c), "detail": c.get("detail"),
             "css": "not_judged" if c.get("status") in NOT_JUDGED else c.get("status"),
             "status": "not judged" if c.get("status") in NOT_JUDGED else c.get("status")} for c in shown]
    more = len(checks) - len(shown)
    summary = "%d checks, by node" % len(checks) + (
        " (the %d that did not pass first; %d more in results.json)" % (len(shown), more) if more else "")
    return {"rows": rows, "summary": summary, "open": len(checks) <= 40}
