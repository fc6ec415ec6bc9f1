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
    assert sum(1 for line in lines if re.match(r'    "node\d{3}": \{"loss"', line)) == 512


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

def test_junit_has_one_testcase_per_check_and_failure_messages(junit_schema):
    doc = document()
    text = _report.junit_xml(doc, hostname="controller")
    junit_schema.assertValid(etree.fromstring(text.encode()))
    suite = ET.fromstring(text).find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(doc["checks"])
    failed = [c for c in cases if c.find("failure") is not None]
    assert suite.get("failures") == str(len(failed)) == str(len(doc["failures"]))
    assert suite.get("errors") == "0" and suite.get("hostname") == "controller"
    assert suite.get("skipped") == str(sum(c["status"] in ("no_threshold", "info") for c in doc["checks"]))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.get("timestamp"))
    messages = {c.find("failure").get("message") for c in failed}
    assert "tokens_per_sec_per_gpu 8616.0 < 9000.0 (min, steady mean over steps 3-29)" in messages
    assert {c.get("classname") for c in cases} == {"node1"}


@pytest.mark.parametrize("nodes, crash_at, legacy", [(2, None, False), (64, 41, False), (512, 81, False),
                                                     (64, None, True)])
def test_junit_validates_against_the_jenkins_xunit_schema(junit_schema, nodes, crash_at, legacy):
    doc = synthetic_document(nodes, 100, crash_at=crash_at, legacy=legacy)
    root = etree.fromstring(_report.junit_xml(doc).encode())
    junit_schema.assertValid(root)
    suite = root.find("testsuite")
    assert int(suite.get("tests")) == len(doc["checks"]) == len(suite.findall("testcase"))


def test_junit_leads_with_the_culprit_and_marks_a_simulated_run(crash512):
    suite = ET.fromstring(_report.junit_xml(crash512)).find("testsuite")
    first = suite.find("testcase")
    assert first.get("classname") == "node017" and first.get("name") == "errors crash"
    assert first.find("failure").text.startswith(crash512["headline"])
    assert suite.get("name").endswith("[SIMULATED]")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["simulated"] == "true" and properties["culprit"] == "node017"
    assert properties["consequences"] == "node[001-016,018-512]"
    assert properties["headline"] == crash512["headline"] and properties["effective_model"] == "llama3.1-70b"
    failed = [c.get("classname") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed[:3] == ["node017"] * 3
    assert failed.index("node005") < failed.index("node001")   # own failures before the consequences


def test_junit_at_512_nodes_stays_small(crash512):
    text = _report.junit_xml(crash512)
    suite = ET.fromstring(text).find("testsuite")
    passing = [c for c in suite.findall("testcase") if len(c) == 0]
    assert passing and all(not c.text for c in passing)
    assert len(text) < 250 * len(crash512["checks"])


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
    assert "Stopped as a consequence of node017: 511 nodes" in failures
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
    throughput = page[page.index("tokens_per_sec_per_gpu (tokens/s/GPU)</text>"):page.index("loss</text>")]
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
    throughput = page[page.index("(tokens/s/GPU)</text>"):page.index("loss</text>")]
    assert "<polygon" not in throughput
    assert re.findall(r"<title>(node\d+)</title>", throughput) == ["node001", "node002", "node003"]


def test_html_pass_says_what_was_not_judged_and_shows_the_model():
    page = _report.html_report(synthetic_document(2, 40, stragglers=()))
    assert '<div class="verdict PASS"><b>PASS</b>(throughput not judged' in page
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


def test_chart_without_data():
    assert "no data" in _report_html.svg_chart("loss", [], None, [], zero_based=False)
    page = _report.html_report({"verdict": "FAIL", "checks": []})
    assert "No step series" in page


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
    assert ET.parse(paths["junit.xml"]).getroot().find("testsuite").get("tests") == str(len(crash512["checks"]))
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


def test_every_report_of_a_real_framework_run_says_what_was_real_and_what_was_simulated(junit_schema):
    from ansible_collections.clusterval.training.plugins.module_utils import _console
    doc = document()
    doc["realism"] = {"real": ["MaxText's own train.py (maxtext 0.2.5 from PyPI)"],
                      "simulated": ["the GPUs: JAX trains on the nodes' CPUs"]}
    sentence = "REAL: MaxText's own train.py (maxtext 0.2.5 from PyPI). SIMULATED: the GPUs: JAX trains on the nodes' CPUs."
    page = _report.html_report(doc)
    assert '<div class="realism">REAL: MaxText&#x27;s own train.py' in page and "SIMULATED RUN" not in page
    xml = _report.junit_xml(doc, hostname="h")
    junit_schema.assertValid(etree.fromstring(xml.encode()))
    assert ET.fromstring(xml).find(".//property[@name='realism']").get("value") == sentence
    console = " ".join(line.strip() for line in _console.verdict_lines(doc))
    assert sentence in console
    assert "REAL:" not in " ".join(_console.verdict_lines(document()))
