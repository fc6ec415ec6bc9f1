"""The verdict of issue 9 on the simulated cluster: the culprit first, no unearned PASS."""
from __future__ import annotations

import json
import re

import pytest

from test_train_e2e import JAX_MULTI, assert_no_training_container, results, run_train, sim_env

pytestmark = pytest.mark.cluster


def verdict_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith("VERDICT:")]
    assert lines, stdout[-3000:]
    return lines[-1]


@pytest.fixture(scope="module")
def four(simcluster) -> list[str]:
    if len(simcluster.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    return simcluster.nodes[:4]


def test_a_crash_on_node3_of_four_leads_the_verdict_and_the_rest_are_its_consequences(simcluster, four, tmp_path):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four, extra=sim_env(CRASH_AT_STEP="3", CRASH_RANK="2"))
    assert proc.returncode != 0
    document = results(tmp_path)
    culprit = document["culprit"]
    assert culprit["host"] == four[2], culprit
    # The crash comes during step 3: the last step node3 completed is 2.
    assert culprit["step"] == 2 and "XlaRuntimeError" in culprit["text"], culprit
    assert not culprit["text"].startswith("Traceback"), "the cause is the exception line, not the traceback's head"
    assert sorted(document["consequences"]) == sorted(set(four) - {four[2]}), document["consequences"]
    line = verdict_line(proc.stdout)
    assert line.startswith("VERDICT: FAIL: %s " % four[2]), line
    assert "XlaRuntimeError" in line and "at step 2" in line and "3 other nodes stopped as a consequence" in line, line
    assert_no_training_container(simcluster, four)


def test_a_reused_run_directory_never_reads_the_earlier_runs_state(simcluster, four, tmp_path):
    nodes = four[:2]
    first = run_train(simcluster, JAX_MULTI, tmp_path, nodes)
    assert first.returncode == 0, first.stdout[-3000:]
    second = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra=sim_env(CRASH_AT_STEP="3", CRASH_RANK="1"))
    assert second.returncode != 0, "a crash on %s after a passing run in the same run dir reported success" % nodes[1]
    assert results(tmp_path)["verdict"] == "FAIL"
    assert verdict_line(second.stdout).startswith("VERDICT: FAIL: %s" % nodes[1])
    assert len(list(tmp_path.glob("watch/*/"))) == 2, "each run has its own watch directory"
    assert_no_training_container(simcluster, nodes)


def test_a_cluster_five_times_slower_without_thresholds_is_never_a_plain_pass(simcluster, four, tmp_path):
    nodes = four[:2]
    slow = sim_env(SLOW_FACTOR="5", STEP_SECONDS="0.1")
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra=slow)
    assert proc.returncode == 0, proc.stdout[-3000:]
    line = verdict_line(proc.stdout)
    assert re.match(r"VERDICT: PASS \(throughput not judged: no thresholds for .*tokens_per_sec_per_gpu", line), line
    assert "tokens_per_sec_per_gpu" in [item["metric"] for item in results(tmp_path)["unjudged"]]

    strict = run_train(simcluster, JAX_MULTI, tmp_path / "strict", nodes, extra=slow,
                       more_vars={"training_require_thresholds": True})
    assert strict.returncode != 0
    assert verdict_line(strict.stdout).startswith("VERDICT: FAIL"), verdict_line(strict.stdout)
    assert_no_training_container(simcluster, nodes)


def test_a_run_slower_than_its_baseline_fails_naming_the_metric(simcluster, four, tmp_path):
    nodes = four[:2]
    reference = run_train(simcluster, JAX_MULTI, tmp_path / "reference", nodes)
    assert reference.returncode == 0, reference.stdout[-3000:]
    baseline = tmp_path / "reference" / "results.json"
    proc = run_train(simcluster, JAX_MULTI, tmp_path / "slow", nodes, extra=sim_env(SLOW_FACTOR="3"),
                     more_vars={"training_baseline": str(baseline)})
    assert proc.returncode != 0, proc.stdout[-3000:]
    document = results(tmp_path / "slow")
    failed = [c for c in document["checks"] if c["status"] == "fail"]
    assert any(c.get("metric") == "tokens_per_sec_per_gpu" or "tokens_per_sec_per_gpu" in json.dumps(c)
               for c in failed), failed
    assert document["baseline"]["path"] == str(baseline)
    assert verdict_line(proc.stdout).startswith("VERDICT: FAIL"), verdict_line(proc.stdout)
    assert_no_training_container(simcluster, nodes)
