from __future__ import annotations

import json
import shlex

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


def test_a_pass_without_thresholds_says_how_to_set_each_with_the_exact_names():
    document = synthetic_document(2, 30, stragglers=())
    document.update(config_path="/c/jax.json", run_dir="/runs/r 1", unjudged=[
        {"metric": "tflops_per_sec_per_gpu", "reason": "no threshold set",
         "path": 'model_params.multi_node["llama3.1-70b"].mi300x.result_dict.tflops_per_sec_per_gpu'}])
    lines = _report_view.expectations(document, _report_view.view(document))
    assert lines[0] == "To judge tflops_per_sec_per_gpu, set what it must reach, in any of these ways:"
    assert lines[1] == ('the config /c/jax.json: '
                        'model_params.multi_node["llama3.1-70b"].mi300x.result_dict.tflops_per_sec_per_gpu')
    override = json.loads(shlex.split(lines[2].split(": ", 1)[1])[1])
    assert override == {"training_overrides_extra": {"model_params": {"multi_node": {"llama3.1-70b": {"mi300x": {
        "result_dict": {"tflops_per_sec_per_gpu": "<number>"}}}}}}}
    keep = shlex.split(lines[3].split(": ", 1)[1])
    assert keep == ["ansible-playbook", "clusterval.training.keep_baseline", "-e", "training_run_dir=/runs/r 1",
                    "-e", "training_baseline=/runs/baselines/synthetic_2.json"]
    assert lines[4].startswith("then, on the next run: -e training_baseline=/runs/baselines/synthetic_2.json ")


def test_the_threshold_file_and_its_cell_are_named_and_a_fail_or_a_judged_run_gets_no_advice():
    document = synthetic_document(2, 30, stragglers=())
    document.update(threshold_file={"path": "/c/t.json", "cell": None, "note": "t.json: no cell named NNODES=2,STEPS=30 "
                                    "(the sweep's cell; the file has X); its metrics are reported, not judged"},
                    unjudged=[{"metric": "tokens_per_sec_per_gpu", "reason": "no cell of t.json for this run"}])
    lines = _report_view.expectations(document, _report_view.view(document))
    assert lines[1] == ('the threshold file /c/t.json: in its cell NNODES=2,STEPS=30, "tokens_per_sec_per_gpu": '
                        '{"kind": "min", "value": <number>}')
    assert _report_view.expectations(dict(document, unjudged=[]), _report_view.view(dict(document, unjudged=[]))) == []
    crash = synthetic_document(4, 30, crash_at=10, culprit=2)
    assert _report_view.expectations(crash, _report_view.view(crash)) == []


def test_every_failed_check_counts_every_node_that_failed_it_the_culprits_first():
    shown = _report_view.view(synthetic_document(64, 60, crash_at=41))
    rows = {row.label: row for row in _report_view.failed_by_check(shown)}
    assert list(rows)[:3] == ["errors crash", "exit_code", "completion step"]
    assert (len(rows["completion step"].nodes), rows["completion step"].of) == (64, 64)
    assert _report_view.failed_check_text(rows["completion step"], shown.cause) == (
        "node[001-064] (64 of 64): node017 culprit; node[001-016,018-064] stopped as a consequence of node017")
    assert _report_view.failed_check_text(rows["straggler tokens_per_sec_per_gpu"], shown.cause) == \
        "node[005,040] (2 of 64)"
