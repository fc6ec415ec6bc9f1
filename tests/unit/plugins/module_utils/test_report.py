from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET

import pytest
from lxml import etree
from synthetic_results import CRASH_TEXT, synthetic_document

from ansible_collections.clusterval.training.plugins.module_utils import _metrics, _report, _report_html

SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "junit", "junit-10.xsd")


@pytest.fixture(scope="module")
def junit_schema():
    return etree.XMLSchema(etree.parse(SCHEMA))


def document(simulated=False):
    steps = [{"step": i, "loss": 10.0 - 0.1 * i, "tokens_per_sec_per_gpu": 8600.0 + i} for i in range(30)]
    steps[5]["loss"] = float("nan")
    plan = {"framework": "maxtext", "final_step": 29, "warmup_steps": 3, "simulated": simulated, "run_id": "r1",
            "config_name": "cfg", "thresholds": [{"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 9000.0,
                                                  "set": True}]}
    outcome = _metrics.evaluate(plan, {"node1": {"steps": steps, "errors": [], "exit_code": 0}})
    return dict(outcome, run_id="r1", config_name="cfg", framework="maxtext")


@pytest.fixture(scope="module")
def crash512():
    return synthetic_document(512, 100, crash_at=81, stragglers=(5, 40, 300))


# -- results.json -----------------------------------------------------------------------------------------

def test_results_json_is_strict_json_with_nan_as_text():
    loaded = json.loads(_report.results_json(document()))
    assert loaded["verdict"] == "FAIL"
    assert [5, "nan"] in loaded["series"]["node1"]["loss"]
    assert loaded["checks"][0]["node"] == "node1"
    assert loaded["schema_version"] == _report.SCHEMA_VERSION == 1


def test_results_json_keeps_a_documents_own_schema_version_and_every_key(crash512):
    loaded = json.loads(_report.results_json(dict(crash512, schema_version=7)))
    assert loaded["schema_version"] == 7
    assert set(crash512) <= set(loaded)
    assert loaded["culprit"]["host"] == "node017" and len(loaded["consequences"]) == 511


def test_results_json_puts_one_check_and_one_node_series_per_line(crash512):
    text = _report.results_json(crash512)
    lines = text.splitlines()
    assert sum(1 for line in lines if line.startswith('    {"actual"')) == len(crash512["checks"])
    assert sum(1 for line in lines if re.match(r'    "node\d{3}": \{"elapsed"', line)) == 512


def test_results_document_has_every_key_and_a_headline_for_older_outcomes():
    outcome = document()
    produced = _report.results_document(outcome, "2026-11-21T10:25:00Z")
    assert tuple(produced) == _report.DOCUMENT_KEYS
    assert produced["schema_version"] == 1 and produced["culprit"] is None and produced["teardown"] is None
    assert produced["headline"] == "FAIL: node1: loss nan at step 5 (2 failed checks on node1)"
    assert produced["generated_at"] == "2026-11-21T10:25:00Z"
    assert _report.results_document(dict(outcome, headline="FAIL: given"), "t")["headline"] == "FAIL: given"


def test_results_document_keeps_new_outcome_keys_and_drops_ansibles():
    result = dict(document(), independent_failures=["node4"], changed=False, msg="verdict FAIL", failed=True,
                  ansible_stats={"data": {}}, _ansible_no_log=False, invocation={"module_args": {}})
    produced = _report.results_document(result, "t")
    assert produced["independent_failures"] == ["node4"]
    assert not {"changed", "msg", "failed", "ansible_stats", "_ansible_no_log", "invocation"} & set(produced)


# -- JUnit ------------------------------------------------------------------------------------------------

def cases_of(text):
    suite = ET.fromstring(text).find("testsuite")
    return suite, [(c.get("classname"), c.get("name"), c[0].tag if len(c) else None) for c in suite.findall("testcase")]


def test_junit_has_a_case_per_check_failures_with_their_messages(junit_schema):
    doc = document()
    text = _report.junit_xml(doc, hostname="controller")
    junit_schema.assertValid(etree.fromstring(text.encode()))
    suite, cases = cases_of(text)
    assert ("clusterval.training.checks", "threshold tokens_per_sec_per_gpu", "failure") in cases
    assert ("clusterval.training.checks", "convergence loss", "failure") in cases and ("clusterval.training.checks", "completion step", None) in cases
    assert suite.get("failures") == str(sum(1 for c in cases if c[2] == "failure")) == str(len(doc["failures"]))
    assert suite.get("errors") == "0" and suite.get("hostname") == "controller"
    assert suite.get("tests") == str(len(cases))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.get("timestamp"))
    messages = {f.get("message") for f in suite.iter("failure")}
    assert "tokens_per_sec_per_gpu 8616.0 < 9000.0 (min, steady mean over steps 3-29)" in messages


@pytest.mark.parametrize("nodes, crash_at, legacy", [(2, None, False), (64, 41, False), (512, 81, False),
                                                     (64, None, True)])
def test_junit_validates_against_the_jenkins_xunit_schema(junit_schema, nodes, crash_at, legacy):
    doc = synthetic_document(nodes, 100, crash_at=crash_at, legacy=legacy)
    root = etree.fromstring(_report.junit_xml(doc).encode())
    junit_schema.assertValid(root)
    suite = root.find("testsuite")
    assert int(suite.get("tests")) == len(suite.findall("testcase")) <= 10
    assert (int(suite.get("failures")) + int(suite.get("errors")) > 0) == (doc["verdict"] == "FAIL")


def test_junit_leads_with_the_culprit_and_groups_its_consequences_in_one_case(crash512):
    suite, cases = cases_of(_report.junit_xml(crash512))
    first = suite.find("testcase")
    assert first.get("classname") == "clusterval.training.culprit" and first.get("name") == "culprit: errors crash"
    assert first.find("failure").text.startswith(crash512["headline"])
    assert "node017: training exited with status 1" in first.find("failure").text
    assert cases[1] == ("clusterval.training.culprit", "consequences of the culprit", "failure")
    consequence = suite.findall("testcase")[1].find("failure")
    assert consequence.get("message") == "511 node(s) stopped as a consequence of node017: node[001-016,018-512]"
    assert "errors coordination: node[001-016,018-512]" in consequence.text
    assert ("clusterval.training.checks", "threshold tokens_per_sec_per_gpu", "failure") in cases
    assert suite.get("name").endswith("[SIMULATED]")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["simulated"] == "true" and properties["culprit"] == "node017"
    assert properties["consequences"] == "node[001-016,018-512]"
    assert properties["headline"] == crash512["headline"] and properties["effective_model"] == "llama3.1-70b"


def test_junit_case_names_do_not_change_with_the_nodes(crash512):
    """A CI's history of a case lines up across runs: which node crashed, and where, is the message's."""
    other = json.loads(json.dumps(crash512).replace("node017", "node200"))
    assert cases_of(_report.junit_xml(crash512))[1] == cases_of(_report.junit_xml(other))[1]


def test_junit_at_512_nodes_is_a_handful_of_cases(crash512):
    text = _report.junit_xml(crash512)
    suite, cases = cases_of(text)
    assert len(cases) <= 8 and suite.get("failures") == "4" and suite.get("errors") == "0"
    assert len(text) < 10000


def test_a_run_stopped_before_its_verdict_is_an_error_case():
    from ansible_collections.clusterval.training.plugins.module_utils._results import document_of
    doc = document_of({"run_id": "r1", "config_name": "cfg"}, None, "node2: unreachable over SSH: no route to host",
                      None, "/tmp/r1")
    suite, cases = cases_of(_report.junit_xml(doc))
    assert cases == [("clusterval.training.run", "stopped before the verdict", "error")]
    assert suite.get("errors") == "1" and suite.get("tests") == "1"
    error = suite.find("testcase").find("error")
    assert "node2: unreachable over SSH: no route to host" in error.text and error.get("type") == "stop"


def test_a_stop_with_its_stage_and_nodes_names_them():
    doc = dict(document(), checks=[], failures=["preflight failed on node3"], verdict="FAIL",
               stop={"stage": "preflight", "hosts": ["node3"], "never_started": ["node%d" % i for i in range(1, 9)],
                     "cause": "node3: unreachable"})
    suite, cases = cases_of(_report.junit_xml(doc))
    assert cases == [("clusterval.training.run", "stopped in preflight", "error")]
    text = suite.find("testcase").find("error").text
    assert text.splitlines()[0] == "node3: unreachable"
    assert "nodes: node3" in text and "never started: node[1-8]" in text


def test_an_unreachable_node_and_a_failed_teardown_are_errors_not_failures():
    doc = document()
    doc["checks"] = [c for c in doc["checks"] if c["status"] != "fail"]
    doc["checks"].append({"node": "node2", "check": "progress", "metric": None, "expected": "completed",
                          "actual": "unreachable", "status": "fail", "detail": "node2: unreachable during the run"})
    doc.update(verdict="FAIL", failures=["node2: node2: unreachable during the run"],
               teardown={"node1": {"ok": True}, "node2": {"unreachable": True, "msg": "no route to host"}})
    suite, cases = cases_of(_report.junit_xml(doc))
    assert ("clusterval.training.checks", "progress (infrastructure)", "error") in cases and ("clusterval.training.run", "teardown", "error") in cases
    assert suite.get("failures") == "0" and suite.get("errors") == "2"
    assert "node2: unreachable (no route to host)" in [e.text for e in suite.iter("error")][1]


def test_a_fail_verdict_always_has_a_failing_case():
    doc = dict(document(), verdict="FAIL", headline="FAIL: run: hang: no node printed a step for 600 s",
               failures=["run: hang: no node printed a step for 600 s"])
    doc["checks"] = [c for c in doc["checks"] if c["status"] != "fail"]
    suite, cases = cases_of(_report.junit_xml(doc))
    assert cases[0] == ("clusterval.training.run", "verdict", "failure") and suite.get("failures") == "1"
    assert suite.find("testcase").find("failure").text == "run: hang: no node printed a step for 600 s"
    passing = dict(doc, verdict="PASS", headline="PASS", failures=[])
    suite, cases = cases_of(_report.junit_xml(passing))
    assert suite.get("failures") == suite.get("errors") == "0" and cases


def test_junit_survives_control_characters_in_log_lines(junit_schema):
    doc = document()
    doc["checks"].append({"node": "node1", "check": "errors", "metric": "crash", "expected": None, "actual": None,
                          "status": "fail", "detail": "\x1b[31mRuntimeError\x1b[0m: bad\x00 byte"})
    root = etree.fromstring(_report.junit_xml(doc).encode())
    junit_schema.assertValid(root)
    assert any("RuntimeError" in (f.get("message") or "") for f in root.iter("failure"))


# -- HTML -------------------------------------------------------------------------------------------------

def test_html_is_self_contained():
    page = _report.html_report(synthetic_document(64, 60, crash_at=41))
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    for needle in ("<script", "<link", "<img", "@import", "url(", "src="):
        assert needle not in page


def test_html_leads_with_the_verdict_then_the_failures(crash512):
    page = _report.html_report(crash512)
    markers = ('<div class="simulated">', '<div class="verdict FAIL">', '<div class="culprit-box">', "<h2>Failures",
               "<h2>Nodes", "<h2>Curves", "<h2>Checks", "<h2>Run")
    order = [page.index(marker) for marker in markers]
    assert order == sorted(order)
    assert "511 other nodes stopped as a consequence: node[001-016,018-512]" in page
    failures = page[page.index("<h2>Failures"):page.index("<h2>Nodes")]
    rows = re.findall(r"<tr class=\"([a-z]*)\">", failures)
    assert rows[:3] == ["culprit"] * 3 and rows[-1] == "consequence"
    assert "Stopped as a consequence of node017: 511 of 512 nodes" in failures
    assert "node[005,040,300] <small>(3 of 512)</small>" in failures


def test_html_grid_has_a_cell_per_node_coloured_by_throughput(crash512):
    page = _report.html_report(crash512)
    cells = re.findall(r'<div class="cell s-(\w+)" style="background:(#[0-9a-f]{6});[^"]*" title="([^"]*)"', page)
    assert len(cells) == 512
    by_host = {title.split(":")[0]: (state, colour) for state, colour, title in cells}
    assert by_host["node017"][0] == "culprit" and by_host["node005"][0] == "fail"
    assert by_host["node001"][0] == "consequence"
    red, green, blue = (int(by_host["node005"][1][i:i + 2], 16) for i in (1, 3, 5))
    assert red > blue + 80                              # 15 % below the median: deep on the red side
    title = [title for dummy, dummy2, title in cells if title.startswith("node005")][0]
    assert re.match(r"node005: 7\d{3} tokens/s/GPU, -1\d\.\d% against the median; failed "
                    r"\(threshold tokens_per_sec_per_gpu, straggler tokens_per_sec_per_gpu, errors coordination, "
                    r"exit_code, completion step\)$", title)
    culprit = [title for dummy, dummy2, title in cells if title.startswith("node017")][0]
    assert culprit.endswith("; culprit (errors crash, exit_code, completion step)")
    assert "straggler limit -10%" in page and "below the median" in page


def test_diverging_scale():
    assert _report_html.diverging_colour(0.0) == "#f7f7f7"
    assert _report_html.diverging_colour(-1.0) == "#b2182b" == _report_html.diverging_colour(-5.0)
    assert _report_html.diverging_colour(1.0) == "#2166ac"
    assert _report_html.diverging_colour(-0.35) not in ("#ef8a62", "#fddbc7")   # interpolated


def test_html_curves_at_512_nodes_are_a_median_band_and_the_outliers(crash512):
    page = _report.html_report(crash512)
    throughput = chart_of(page, "tokens_per_sec_per_gpu (tokens/s/GPU)")
    assert throughput.count("<polygon") == 1 and "<title>median</title>" in throughput
    named = re.findall(r"<title>(node\d+)</title>", throughput)
    assert {"node005", "node040", "node300", "node017"} <= set(named) and len(named) <= _report_html.OUTLIERS_MAX + 1
    assert "node005 -1" in page and "against the median" in page and "node017 (culprit)" in page
    assert "threshold 8000" in throughput and "straggler limit" in throughput
    assert '>0</text>' in throughput and "not 0" not in throughput      # the throughput axis starts at 0


def test_an_axis_that_does_not_start_at_zero_says_so():
    curve = [_report_html.Curve("node1", [(0.0, 10.4), (10.0, 7.2)], "#000000")]
    assert "y axis starts at 7, not 0" in _report_html.svg_chart("loss", curve, None, [], zero_based=False)
    from_zero = _report_html.svg_chart("rate", curve, None, [], zero_based=True)
    assert "not 0" not in from_zero and ">0</text>" in from_zero
    assert _report_html.axis_range(7.2, 10.4, False) == (7.0, 11.0, 1.0)
    assert _report_html.axis_range(7310.0, 8790.0, True) == (0.0, 10000.0, 2000.0)


def test_html_curves_at_a_few_nodes_are_one_per_node():
    page = _report.html_report(synthetic_document(3, 40, stragglers=(2,)))
    throughput = chart_of(page, "tokens_per_sec_per_gpu (tokens/s/GPU)")
    assert "<polygon" not in throughput
    assert re.findall(r"<title>(node\d+)</title>", throughput) == ["node001", "node002", "node003"]


def test_html_pass_says_what_was_not_judged_and_shows_the_model():
    page = _report.html_report(synthetic_document(2, 40, stragglers=()))
    assert '<div class="verdict PASS"><b>PASS</b> (throughput not judged' in page
    assert "<b>Not judged:</b> tflops_per_sec_per_gpu (no threshold set)" in page
    assert "No check failed." in page
    assert "llama3.1-70b, 70.6 B parameters (emb_dim 8192, num_layers 80" in page


def test_html_of_an_older_document_without_the_new_keys():
    doc = synthetic_document(64, 60, legacy=True)
    page = _report.html_report(doc)
    assert '<div class="verdict FAIL"><b>FAIL:</b>' in page and 'class="culprit-box"' not in page
    assert "4 failed checks on node[005,040]" in page
    assert "tflops_per_sec_per_gpu (no threshold set)" in page


def test_html_says_simulated_prominently():
    assert '<div class="simulated">SIMULATED RUN' in _report.html_report(document(simulated=True))
    assert "SIMULATED" not in _report.html_report(document())


def test_html_escapes_and_wraps_log_text():
    doc = document()
    doc["checks"].append({"node": "n<1>", "check": "errors", "metric": None, "expected": None, "actual": None,
                          "status": "fail", "detail": "<script>alert(1)</script> \x1b[31m" + "x" * 500})
    page = _report.html_report(doc)
    assert "<script>" not in page and "&lt;script&gt;" in page and "\x1b" not in page
    assert "overflow-wrap:anywhere" in page and "table-layout:fixed" in page


def test_html_baseline_and_threshold_from_it():
    doc = synthetic_document(8, 40, stragglers=())
    doc["baseline"] = {"path": "/runs/good/results.json", "run_id": "good-run", "tolerance_pct": 5.0,
                       "values": {"tokens_per_sec_per_gpu": 8421.0}}
    for check in doc["checks"]:
        if check["check"] == "threshold" and check["metric"] == "tokens_per_sec_per_gpu":
            check["source"] = "baseline"
    page = _report.html_report(doc)
    assert "Thresholds from the baseline run good-run (/runs/good/results.json), tolerance 5%." in page
    assert "threshold 8000 from baseline run good-run" in page and "baseline 8421 (run good-run)" in page


def chart_of(page, title):
    """The SVG of the chart with this title."""
    start = page.index(">%s</text>" % title)
    return page[start:page.index("</svg>", start)]


def test_chart_without_data():
    assert "no data" in _report_html.svg_chart("loss", [], None, [], zero_based=False)
    page = _report.html_report({"verdict": "FAIL", "checks": []})
    assert "<svg" not in page, "never an empty chart"
    assert "<b>No curve:</b> the run stopped before any node printed a training step." in page


def test_nodes_without_a_throughput_value_are_grey():
    doc = synthetic_document(8, 40, stragglers=())
    doc["summary"]["nodes"]["node003"]["steady"] = {}
    doc["series"]["node003"] = {"loss": doc["series"]["node003"]["loss"]}
    page = _report.html_report(doc)
    assert 'background:%s;color:#1f2328" title="node003: no throughput value' % _report_html.NO_VALUE_COLOUR in page


def test_write_reports(tmp_path):
    paths = _report.write_reports(str(tmp_path / "run"), document())
    assert sorted(paths) == ["junit.xml", "report.html", "results.json"]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["run_id"] == "r1"
    assert not list((tmp_path / "run").glob("*.tmp"))


def test_three_reports_at_512_nodes(crash512, tmp_path):
    """The scale the reports are made for: 512 nodes of 100 steps (benchmarks/report_bench.py times it)."""
    started = time.perf_counter()
    paths = _report.write_reports(str(tmp_path), crash512)
    elapsed = time.perf_counter() - started
    page = open(paths["report.html"]).read()
    assert page.count('<div class="cell ') == 512 and CRASH_TEXT[:60] in page
    assert json.load(open(paths["results.json"]))["culprit"]["host"] == "node017"
    assert int(ET.parse(paths["junit.xml"]).getroot().find("testsuite").get("tests")) <= 8
    print("512 nodes, 100 steps: %.2f s" % elapsed)


def test_every_check_table_keeps_what_did_not_pass_at_scale(crash512):
    page = _report.html_report(crash512)
    table = page[page.index("<h2>Every check"):]
    assert "3584 checks, by node (the 1000 that did not pass first; 2584 more in results.json)" in table
    assert table.count("<tr>") == 1001 and '<td class="pass">' not in table
    small = _report.html_report(document())
    assert "<details open><summary>%d checks, by node</summary>" % len(document()["checks"]) in small


def test_band_of_curves_with_different_steps():
    curves = {"a": [(0.0, 10.0), (10.0, 20.0)], "b": [(0.0, 12.0), (5.0, 14.0), (10.0, 16.0)],
              "c": [(5.0, 30.0)]}
    band, at = _report_html.band_of(curves)
    assert band.steps == [0.0, 5.0, 10.0]
    assert at["a"] == {0: 10.0, 1: 15.0, 2: 20.0} and at["c"] == {1: 30.0}
    assert band.median == [11.0, 15.0, 18.0]
    assert band.low[1] == _report_html.percentile([15.0, 14.0, 30.0], 10)
    steps = [float(s) for s in range(1000)]
    thinned, dummy = _report_html.band_of({"a": [(s, s) for s in steps]})
    assert len(thinned.steps) == _report_html.BAND_STEPS_MAX and thinned.steps[-1] == 999.0


def test_outliers_are_the_nodes_far_from_the_median_and_the_culprit():
    curves = {"n%d" % i: [(0.0, 100.0), (10.0, 100.0)] for i in range(20)}
    curves["slow"] = [(0.0, 80.0), (10.0, 80.0)]
    curves["fast"] = [(0.0, 107.0), (10.0, 107.0)]
    band, at = _report_html.band_of(curves)
    picked = _report_html.outliers(band, at, 0.05, ["n3"])
    assert [host for host, dummy in picked] == ["slow", "fast", "n3"]
    assert abs(picked[0][1] + 0.2) < 1e-9


# -- what people look at: step time, TFLOP/s, wall clock, logs, each node, a run that stopped early ----------

def test_step_time_and_tflops_charts_with_the_nodes_band_and_outliers_named():
    page = _report.html_report(synthetic_document(64, 60, crash_at=41, stragglers=(5, 40)))
    step_time = chart_of(page, _report_html.STEP_TIME_TITLE)
    assert step_time.count("<polygon") == 1 and "<title>median</title>" in step_time
    assert {"node005", "node040"} <= set(re.findall(r"<title>(node\d+)</title>", step_time))
    tflops = chart_of(page, "tflops_per_sec_per_gpu (TFLOP/s/GPU)")
    assert tflops.count("<polygon") == 1 and "<title>node005</title>" in tflops
    legend = page[page.index(_report_html.STEP_TIME_TITLE):]
    assert re.search(r"node005 \+1\d\.\d% against the median", legend), "a slow node's steps take longer"


def test_every_chart_has_a_wall_clock_row_from_the_steps_durations():
    doc = synthetic_document(2, 40, stragglers=())
    page = _report.html_report(doc)
    throughput = chart_of(page, "tokens_per_sec_per_gpu (tokens/s/GPU)")
    assert "step; below it, the wall clock (since the first step)" in throughput
    assert re.search(r'fill="#59636e" text-anchor="middle" font-family="sans-serif">\+0:\d\d</text>', throughput)
    elapsed = doc["series"]["node001"]["elapsed"]
    assert elapsed[0][0] == 0 and elapsed[-1][1] > elapsed[0][1]
    for summary in doc["summary"]["nodes"].values():
        summary["started_at"] = 1795256400.0      # 2026-11-21 10:20:00 UTC
    clock = _report_html.clock_of(doc)
    assert clock.axis == "wall clock (UTC)" and clock.label(0).startswith("10:20:0")
    assert "wall clock (UTC)" in _report.html_report(doc)


def test_each_node_links_its_log_and_has_its_own_details(crash512):
    page = _report.html_report(crash512)
    assert page.count('<details class="node') == 512 + 4                 # and the culprit's and 3 failed nodes' above
    assert '<details class="every-node"><summary>every node (512)</summary>' in page
    assert page.count('href="logs/node017/training.log"') == 3          # its grid cell and its details (twice)
    small = _report.html_report(synthetic_document(8, 20, crash_at=10))
    assert small.count('<details class="node') == 8 and "every-node" not in small
    culprit = re.search(r'<details class="node s-culprit" open><summary><b>node017</b>.*?</details>', page).group(0)
    assert "errors crash: crash at line 4117" in culprit and "exit status</dt><dd>1</dd>" in culprit
    odd = synthetic_document(2, 20, stragglers=())
    odd["series"] = {"a b/c": odd["series"]["node001"]}
    assert 'href="logs/a%20b%2Fc/training.log"' in _report.html_report(odd)


def test_a_run_that_stopped_early_says_where_and_why_there_is_no_curve():
    from ansible_collections.clusterval.training.plugins.module_utils._results import document_of
    doc = document_of({"run_id": "r1", "config_name": "cfg"}, None, "node3: unreachable over SSH: no route to host",
                      None, "/tmp/r1")
    doc["stop"] = {"stage": "preflight", "hosts": ["node3"], "never_started": ["node1", "node2", "node3"]}
    page = _report.html_report(doc)
    assert "No check failed" not in page and "<svg" not in page and "(see above)" not in page
    assert "<h3>The run stopped in preflight, before any training step</h3>" in page
    assert "<b>nodes that never started:</b> node[1-3]" in page and "<b>nodes:</b> node3" in page
    assert "<b>No curve:</b> the run stopped in preflight before any node printed a training step." in page
    assert "The run stopped before any check could judge it:" in page
    assert '<li class="detail">node3: unreachable over SSH: no route to host</li>' in page


def test_a_fail_without_a_failed_check_never_says_no_check_failed():
    doc = dict(document(), verdict="FAIL", headline="FAIL: run: hang: no node printed a step for 600 s",
               failures=["run: hang: no node printed a step for 600 s"])
    doc["checks"] = [c for c in doc["checks"] if c["status"] != "fail"]
    page = _report.html_report(doc)
    assert "No check failed" not in page and "No single check failed, but the run did:" in page
    assert "run: hang: no node printed a step for 600 s" in page


def test_the_threshold_cell_and_where_it_differs_from_the_run_are_shown():
    doc = synthetic_document(2, 20, stragglers=())
    doc["threshold_file"] = {"path": "/c/x_threshold.json", "cell": "NNODES=2,GBS=128", "note": "",
                             "differences_text": ["GBS: the cell says 128, this run has 32"]}
    page = _report.html_report(doc)
    assert "<b>Threshold cell:</b> NNODES=2,GBS=128 judges this run (x_threshold.json)" in page
    assert "<li>GBS: the cell says 128, this run has 32</li>" in page


def test_every_page_is_one_self_contained_file():
    from ansible_collections.clusterval.training.plugins.module_utils._results import document_of
    for doc in (synthetic_document(2, 20), synthetic_document(64, 40, crash_at=30),
                document_of({"run_id": "r"}, None, "stopped", None, "/tmp/r")):
        page = _report.html_report(doc)
        assert "https://" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
        for needle in ("<script", "<link", "<img", "@import", "url(", "src=", "{{", "{%"):
            assert needle not in page
        assert ".grid>a" in page, "the style is not escaped"


def test_a_run_cause_when_no_node_stands_out_is_an_error_case_and_a_box():
    doc = dict(document(), verdict="FAIL", headline="FAIL: run: hang: no node stands out",
               failures=["run: hang: no node stands out"],
               run_cause={"class": "hang", "text": "no node stands out: every node stopped at step 7",
                          "evidence": {"node1": {"step": 7, "reason": "hang", "process": {"state": "S", "stack": "x"}},
                                       "node2": {"step": None, "reason": "hang", "process": {}}}})
    doc["checks"] = [c for c in doc["checks"] if c["status"] != "fail"]
    suite, cases = cases_of(_report.junit_xml(doc))
    assert cases[0] == ("clusterval.training.run", "run hang", "error") and suite.get("errors") == "1"
    assert ("clusterval.training.run", "verdict", "failure") not in cases
    page = _report.html_report(doc)
    assert "<h3>No node stands out: hang</h3><pre>no node stands out: every node stopped at step 7</pre>" in page
    assert "<tr><td>node1</td><td>7</td><td>hang</td><td>state=S</td></tr>" in page
    assert "<tr><td>node2</td><td></td><td>hang</td><td></td></tr>" in page


def test_a_curve_without_values_is_named_not_drawn_empty():
    doc = synthetic_document(4, 20, stragglers=())
    for series in doc["series"].values():
        series.pop("seconds")
    page = _report.html_report(doc)
    assert _report_html.STEP_TIME_TITLE not in page
    assert '<p class="muted">No step-time curve: the step lines carry no step time.</p>' in page
    assert page.count("<svg") == 3


def test_large_y_ticks_fit_the_left_margin():
    curve = [_report_html.Curve("node1", [(0.0, 10.0), (10.0, 12.0)], "#000000")]
    level = [_report_html.Level(1e9, "threshold 1000000000", "#cf222e", "6 4")]
    chart = _report_html.svg_chart("tflops", curve, None, level, zero_based=True)
    assert ">1e+09</text>" in chart and ">1000000000</text>" not in chart


def test_every_report_of_a_real_framework_run_says_what_was_real_and_what_was_simulated(junit_schema):
    from ansible_collections.clusterval.training.plugins.module_utils import _console
    doc = document()
    doc["realism"] = {"real": ["MaxText's own train.py (maxtext 0.2.5 from PyPI)"],
                      "simulated": ["the GPUs: JAX trains on the nodes' CPUs"]}
    sentence = "REAL: MaxText's own train.py (maxtext 0.2.5 from PyPI). SIMULATED: the GPUs: JAX trains on the nodes' CPUs."
    page = _report.html_report(doc)
    assert '<div class="realism">REAL: MaxText&#39;s own train.py' in page and "SIMULATED RUN" not in page
    xml = _report.junit_xml(doc, hostname="h")
    junit_schema.assertValid(etree.fromstring(xml.encode()))
    assert ET.fromstring(xml).find(".//property[@name='realism']").get("value") == sentence
    console = " ".join(line.strip() for line in _console.verdict_lines(doc))
    assert sentence in console
    assert "REAL:" not in " ".join(_console.verdict_lines(document()))


def test_results_json_lists_the_culprits_checks_first_and_marks_the_consequences():
    outcome = synthetic_document(4, 30, crash_at=10, culprit=3)
    document = _report.results_document(outcome, "2026-11-21T10:25:00Z")
    failed = [c for c in document["checks"] if c["status"] == "fail"]
    assert [c["node"] for c in document["checks"][:3]] == ["node003"] * 3 and document["checks"][0]["check"] == "errors"
    assert all("consequence_of" not in c for c in failed if c["node"] == "node003")
    assert {c["consequence_of"] for c in failed if c["node"] != "node003"} == {"node003"}
    assert len(document["checks"]) == len(outcome["checks"]) and "consequence_of" not in json.dumps(outcome["checks"])
