from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from ansible_collections.clusterval.training.plugins.module_utils import _metrics, _report


def document(simulated=False):
    steps = [{"step": i, "loss": 10.0 - 0.1 * i, "tokens_per_sec_per_gpu": 8600.0 + i} for i in range(30)]
    steps[5]["loss"] = float("nan")
    plan = {"framework": "maxtext", "final_step": 29, "warmup_steps": 3, "simulated": simulated, "run_id": "r1",
            "config_name": "cfg", "thresholds": [{"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 9000.0,
                                                  "set": True}]}
    outcome = _metrics.evaluate(plan, {"node1": {"steps": steps, "errors": [], "exit_code": 0}})
    return dict(outcome, run_id="r1", config_name="cfg", framework="maxtext")


def test_results_json_is_strict_json_with_nan_as_text():
    text = _report.results_json(document())
    loaded = json.loads(text)
    assert loaded["verdict"] == "FAIL"
    assert [5, "nan"] in loaded["series"]["node1"]["loss"]
    assert loaded["checks"][0]["node"] == "node1"


def test_junit_has_one_testcase_per_check_and_failure_messages():
    doc = document()
    root = ET.fromstring(_report.junit_xml(doc))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(doc["checks"])
    failed = [c for c in cases if c.find("failure") is not None]
    assert suite.get("failures") == str(len(failed)) == str(len(doc["failures"]))
    messages = {c.find("failure").get("message") for c in failed}
    assert "tokens_per_sec_per_gpu 8616.0 < 9000.0 (min, steady mean over steps 3-29)" in messages
    assert {c.get("classname") for c in cases} == {"node1"}


def test_html_is_self_contained_with_two_svg_curves():
    page = _report.html_report(document())
    assert page.count("<svg") == 2 and page.count("<polyline") == 2
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page and "SIMULATED" not in page
    assert _report.LOSS_COLOURS[0] in page and _report.THROUGHPUT_COLOURS[0] in page


def test_html_says_simulated_prominently():
    page = _report.html_report(document(simulated=True))
    assert '<div class="simulated">SIMULATED RUN' in page


def test_html_escapes_log_text():
    doc = document()
    doc["checks"].append({"node": "n<1>", "check": "errors", "metric": None, "expected": None, "actual": None,
                          "status": "fail", "detail": "<script>alert(1)</script>"})
    page = _report.html_report(doc)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_chart_without_data():
    assert "no data" in _report.svg_chart("loss", {"n": [[1, float("nan")]]}, _report.LOSS_COLOURS)


def test_write_reports(tmp_path):
    paths = _report.write_reports(str(tmp_path / "run"), document())
    assert sorted(paths) == ["junit.xml", "report.html", "results.json"]
    assert json.loads((tmp_path / "run" / "results.json").read_text())["run_id"] == "r1"


def test_progress_summary_names_the_slowest_node_and_counts_failures():
    from ansible_collections.clusterval.training.plugins.callback.training_report import progress_summary
    latest = {
        "node%d" % i: {"host": "node%d" % i,
                       "progress": {"step": 10 + i, "final_step": 29, "tokens_per_sec": 8000.0 + i,
                                    "loss": 9.0, "eta_s": 60 - i}}
        for i in range(1, 12)
    }
    latest["node3"] = dict(latest["node3"], done=True, failed=True)
    line = progress_summary(latest)
    assert line.startswith("[progress] 11 nodes  step 11..21/29 (median 16), slowest node1")
    assert "8006 tok/s/gpu median" in line and "ETA 0:00:59" in line and "done 1, failed 1" in line
