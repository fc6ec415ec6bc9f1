"""What AWX gets as the job's artifacts from the run's final reports: the verdict, the culprit, the headline and
the stage a run that stopped early stopped in, on every path."""
from __future__ import annotations

from ansible_collections.clusterval.training.plugins.action.training_results import run_stats


def test_a_judged_run_gives_its_culprit_and_no_stage():
    document = {"verdict": "FAIL", "headline": "FAIL: node3 crash at step 5", "culprit": {"host": "node3"},
                "run_id": "r1"}
    assert run_stats(document, "/runs/r1") == {"verdict": "FAIL", "culprit": "node3", "stopped_in": None,
                                               "headline": "FAIL: node3 crash at step 5", "run_dir": "/runs/r1",
                                               "run_id": "r1"}


def test_a_stop_in_preflight_gives_the_stage_and_the_one_node_that_stopped_it():
    document = {"verdict": "FAIL", "headline": "FAIL: stopped in preflight: node2: shared_cache", "culprit": None,
                "stop": {"stage": "preflight", "hosts": ["node2"]}}
    stats = run_stats(document, "/runs/r2")
    assert (stats["verdict"], stats["culprit"], stats["stopped_in"]) == ("FAIL", "node2", "preflight")


def test_a_stop_that_no_single_node_caused_names_none():
    document = {"verdict": "FAIL", "headline": "FAIL: stopped in training: 2 node(s) stopped the run", "culprit": None,
                "stop": {"stage": "training", "hosts": ["node1", "node2"]}}
    stats = run_stats(document, "/runs/r3")
    assert stats["culprit"] is None and stats["stopped_in"] == "training"


def test_a_pass_names_no_node_and_no_stage():
    stats = run_stats({"verdict": "PASS", "headline": "PASS: 4 nodes", "culprit": None}, "/runs/r4")
    assert (stats["verdict"], stats["culprit"], stats["stopped_in"]) == ("PASS", None, None)
