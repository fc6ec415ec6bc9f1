from __future__ import annotations

from synthetic_results import synthetic_document

from ansible_collections.clusterval.training.plugins.module_utils import _report_view


def check(node, name, status, metric=None, actual=None, detail="", expected=None):
    return {"node": node, "check": name, "metric": metric, "expected": expected, "actual": actual,
            "status": status, "detail": detail or "%s %s" % (name, actual)}


def crash_document():
    return {"verdict": "FAIL", "headline": "FAIL: node3 crash at step 3: XlaRuntimeError: INTERNAL",
            "culprit": {"host": "node3", "class": "crash", "step": 3, "lineno": 80, "text": "XlaRuntimeError: INTERNAL"},
            "consequences": ["node1", "node2", "node4"],
            "checks": [
                check("node1", "errors", "fail", "coordination", "another task died"),
                check("node1", "straggler", "fail", "tokens_per_sec_per_gpu", 700.0),
                check("node1", "threshold", "fail", "tokens_per_sec_per_gpu", None, "missing"),
                check("node2", "errors", "fail", "coordination", "another task died"),
                check("node3", "completion", "fail", "step", 2),
                check("node3", "errors", "fail", "gpu", "HIP error"),
                check("node3", "errors", "fail", "crash", "XlaRuntimeError: INTERNAL"),
                check("node4", "errors", "fail", "coordination", "another task died"),
                check("node5", "exit_code", "fail", "exit_code", 1),
            ] + [check("node%d" % i, "convergence", "pass", "loss", -0.1) for i in range(1, 6)]}


def test_the_culprits_cause_comes_first():
    shown = _report_view.view(crash_document())
    assert shown.culprit["host"] == "node3"
    assert [(c["check"], c["metric"]) for c in shown.culprit_checks] == [
        ("errors", "crash"), ("errors", "gpu"), ("completion", "step")]


def test_how_the_stopped_nodes_ended_is_grouped_apart_from_what_they_measured():
    shown = _report_view.view(crash_document())
    assert [(g.label, g.nodes) for g in shown.consequential] == [
        ("errors coordination", ["node1", "node2", "node4"]), ("threshold tokens_per_sec_per_gpu", ["node1"])]
    assert [(g.label, g.nodes) for g in shown.failed] == [
        ("exit_code", ["node5"]), ("straggler tokens_per_sec_per_gpu", ["node1"])]


def test_checks_that_only_exist_when_failing_count_against_every_node():
    shown = _report_view.view(crash_document())
    coordination = shown.consequential[0]
    assert coordination.of == 5
    assert shown.passed[0].label == "convergence loss" and shown.passed[0].of == 5


def test_node_states_put_the_culprit_and_own_failures_above_consequences():
    states = _report_view.node_states(_report_view.view(crash_document()))
    assert states == {"node1": "fail", "node2": "consequence", "node3": "culprit", "node4": "consequence",
                      "node5": "fail"}


def test_a_document_without_the_new_keys():
    doc = crash_document()
    for key in ("headline", "culprit", "consequences"):
        del doc[key]
    shown = _report_view.view(doc)
    assert shown.culprit is None and shown.consequences == [] and shown.consequential == []
    assert shown.headline == "FAIL: node1: errors another task died (9 failed checks on node[1-5])"
    assert [g.label for g in shown.failed][:2] == ["errors coordination", "errors crash"]


def test_passed_groups_leave_out_checks_that_failed_somewhere():
    doc = synthetic_document(8, 30, stragglers=(3,))
    shown = _report_view.view(doc)
    assert "straggler tokens_per_sec_per_gpu" not in [g.label for g in shown.passed]
    assert [g.label for g in shown.failed] == ["threshold tokens_per_sec_per_gpu", "straggler tokens_per_sec_per_gpu"]
    assert shown.unjudged == [{"metric": "tflops_per_sec_per_gpu", "reason": "no threshold set"}]


def test_unjudged_derived_for_older_documents():
    doc = synthetic_document(2, 30, legacy=True)
    assert "unjudged" not in doc
    assert _report_view.view(doc).unjudged == [{"metric": "tflops_per_sec_per_gpu", "reason": "no threshold set"}]


def test_value_range_of_threshold_groups_only():
    doc = synthetic_document(4, 30, stragglers=())
    shown = _report_view.view(doc)
    ranges = {g.label: _report_view.value_range(g) for g in shown.passed}
    assert ranges["completion step"] == ""
    assert ranges["threshold tokens_per_sec_per_gpu"].endswith("(expected 8000)")


def test_throughput_per_node_and_relative_to_the_median():
    doc = synthetic_document(5, 30, stragglers=(2,))
    metric = _report_view.throughput_metric(doc)
    assert metric == "tokens_per_sec_per_gpu"
    values = _report_view.node_throughput(doc, metric)
    median, relative = _report_view.relative_to_median(values)
    assert sorted(values) == ["node%03d" % i for i in range(1, 6)]
    assert -0.2 < relative["node002"] < -0.1 and median == sorted(values.values())[2]
    del doc["summary"]
    assert _report_view.node_throughput(doc, metric).keys() == values.keys()   # from the series
    assert _report_view.relative_to_median({}) == (None, {})
