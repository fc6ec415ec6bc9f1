"""The results document on every path: verdict, stop before the verdict, teardown (issue 12, item 1)."""
from __future__ import annotations

import json

from ansible_collections.clusterval.training.plugins.module_utils import _report, _results

PLAN = {"run_id": "r1", "config_name": "c", "framework": "maxtext", "model": "llama3.1-70b", "gpu_arch": "mi300x",
        "mode": "multi_node", "final_step": 29, "total_steps": 30, "warmup_steps": 3, "simulated": True}


def test_a_run_stopped_in_preflight_gets_a_fail_document_with_its_reason(tmp_path):
    document = _results.document_of(PLAN, None, "preflight failed on node2: python_modules: ...", None, str(tmp_path))
    assert document["verdict"] == "FAIL"
    assert document["headline"] == "FAIL: stopped before the verdict: preflight failed on node2: python_modules: ..."
    assert document["run_id"] == "r1" and document["checks"] == [] and document["simulated"] is True
    paths = _report.write_reports(str(tmp_path), document)
    assert json.loads((tmp_path / "results.json").read_text())["headline"] == document["headline"]
    assert sorted(paths) == ["junit.xml", "report.html", "results.json"]


def test_a_failed_teardown_makes_a_pass_a_fail():
    verdict = {"verdict": "PASS", "headline": "PASS", "failures": [], "checks": []}
    teardown = {"node1": {"ok": True, "removed": ["c"], "msg": "removed"},
                "node2": {"ok": False, "unreachable": False, "removed": [], "msg": "Docker daemon dead"}}
    document = _results.document_of(PLAN, verdict, None, teardown, "/r")
    assert document["verdict"] == "FAIL"
    assert document["headline"] == "FAIL: teardown failed: node2: teardown: Docker daemon dead"
    assert document["teardown"] == teardown


def test_an_unreachable_node_at_teardown_is_named():
    verdict = {"verdict": "FAIL", "headline": "FAIL: node3 crash", "failures": ["node3: x"], "checks": []}
    document = _results.document_of(PLAN, verdict, None, {"node4": {"unreachable": True, "msg": "ssh timeout"}}, "/r")
    assert document["headline"] == "FAIL: node3 crash; teardown failed on 1 node(s)"
    assert document["failures"][-1] == "node4: teardown: unreachable (ssh timeout)"


def test_the_final_headline_has_one_writer_for_the_document_and_the_verdict_line():
    """results.json (with_teardown) and the VERDICT line (the callback) say the same of a failed teardown."""
    teardown = {"node2": {"ok": False, "msg": "Docker daemon dead"}}
    for verdict in ({"verdict": "PASS", "headline": "PASS: 2 nodes"}, {"verdict": "FAIL", "headline": "FAIL: node3 crash"}):
        document = _results.with_teardown(verdict, teardown)
        assert document["headline"] == _results.final_headline(verdict["headline"], _results.teardown_failures(teardown))
    assert _results.final_headline("PASS: 2 nodes", [], ["node2"]) == \
        "FAIL: the run failed after the verdict on node2 (see above)"
    assert _results.final_headline("FAIL: node3 crash", [], ["node2"]) == "FAIL: node3 crash"


def test_a_judged_run_keeps_its_verdict_and_gets_its_run_dir():
    verdict = {"verdict": "PASS", "headline": "PASS", "checks": [], "failures": []}
    document = _results.document_of(PLAN, verdict, "ignored", {"node1": {"ok": True}}, "/runs/r1")
    assert (document["verdict"], document["run_dir"]) == ("PASS", "/runs/r1")
