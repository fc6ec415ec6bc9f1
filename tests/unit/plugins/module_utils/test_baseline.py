"""Thresholds from a known-good run's results.json (issue 9, item 4)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _baseline, _verdict

from test_verdict import healthy, plan


def results_json(tmp_path, means):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"run_id": "20261125T010000Z-good", "verdict": "PASS",
                                "summary": {"nodes": {}, "cluster": {m: {"mean": v} for m, v in means.items()}}}))
    return str(path)


UNSET = {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": None, "set": False, "direction": "higher"}


def test_unset_throughput_threshold_comes_from_the_baseline_within_tolerance(tmp_path):
    path = results_json(tmp_path, {"tokens_per_sec_per_gpu": 1000.0, "seconds": 2.0})
    derived = _baseline.apply(plan([UNSET]), _baseline.load(path), path, 5)
    threshold = derived["thresholds"][0]
    assert (threshold["kind"], threshold["value"], threshold["source"]) == ("min", 950.0, "baseline")
    assert derived["baseline"] == {"path": path, "run_id": "20261125T010000Z-good", "tolerance_pct": 5.0,
                                   "metrics": ["tokens_per_sec_per_gpu"]}


def test_a_five_times_slower_run_fails_against_its_baseline(tmp_path):
    path = results_json(tmp_path, {"tokens_per_sec_per_gpu": 5000.0})
    derived = _baseline.apply(plan([UNSET], hosts=("node1", "node2")), _baseline.load(path), path)
    outcome = _verdict.verdict(derived, {h: healthy() for h in ("node1", "node2")})
    assert outcome["verdict"] == "FAIL"
    assert outcome["judged"] == ["tokens_per_sec_per_gpu"]
    assert "tokens_per_sec_per_gpu 1000.0 < 4750.0" in outcome["failures"][0]
    assert outcome["baseline"]["path"] == path


def test_lower_is_better_metrics_get_a_max_and_per_metric_tolerance(tmp_path):
    path = results_json(tmp_path, {"seconds": 2.0})
    unset = {"metric": "seconds", "kind": "max", "value": None, "set": False}
    derived = _baseline.apply(plan([unset]), _baseline.load(path), path, {"seconds": 10, "default": 5})
    assert (derived["thresholds"][0]["kind"], derived["thresholds"][0]["value"]) == ("max", 2.2)


def test_thresholds_the_config_sets_stay(tmp_path):
    path = results_json(tmp_path, {"tokens_per_sec_per_gpu": 5000.0})
    explicit = {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 900.0, "set": True}
    derived = _baseline.apply(plan([explicit]), _baseline.load(path), path)
    assert derived["thresholds"] == [explicit]


@pytest.mark.parametrize("content,message", [
    (None, "cannot read"), ("not json", "is not JSON"), (json.dumps({"verdict": "PASS"}), "expected a results.json"),
])
def test_bad_baselines_are_refused_naming_the_file(tmp_path, content, message):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(_baseline.BaselineError, match=message):
        _baseline.load(str(path))


def test_bad_tolerance_is_refused():
    with pytest.raises(_baseline.BaselineError, match=r"training_baseline_tolerance.seconds: expected 0 <= percent"):
        _baseline.tolerance_of("seconds", {"seconds": 150})


def test_a_single_node_baseline_is_what_scaling_efficiency_is_measured_against(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"run_id": "one-node", "summary": {"nodes": {"node9": {}}, "cluster": {
        "tokens_per_sec_per_gpu": {"mean": 1000.0}, "tokens_per_sec_total": {"mean": 8000.0}}}}))
    scaling = {"metric": "scaling_efficiency_pct", "kind": "min", "value": 90.0, "set": False,
               "unset_reason": "no scaling baseline (scaling_baseline.tokens_per_sec_total is 0 or missing)"}
    two_nodes = dict(plan([scaling], hosts=("node1", "node2")), gpus_per_node=8,
                     jobs=[{"name": "job0", "hosts": ["node1", "node2"], "nnodes": 2}])
    two_nodes["nodes"] = {h: {"prints_steps": True, "job": "job0"} for h in ("node1", "node2")}
    derived = _baseline.apply(two_nodes, _baseline.load(str(path)), str(path))
    assert derived["scaling_baseline"] == {"tokens_per_sec_total": 8000.0, "num_nodes": 1.0, "source": str(path)}
    outcome = _verdict.verdict(derived, {h: healthy() for h in ("node1", "node2")})
    efficiency = [c for c in outcome["checks"] if c["metric"] == "scaling_efficiency_pct"]
    # 1000 tokens/s/GPU x 8 GPUs x 2 nodes against 2 x 8000: 100 %
    assert [(c["node"], c["status"], round(c["actual"], 1)) for c in efficiency] == \
        [("node1", "pass", 100.0), ("node2", "pass", 100.0)]
    assert "scaling_efficiency_pct" in outcome["judged"] and outcome["scaling_baseline"]["num_nodes"] == 1.0
