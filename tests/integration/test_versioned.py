"""The validation suite's versioned format (schema_version 1) run end to end on the simulated cluster: the
suite's own configs (tests/fixtures/cvs) with a threshold file written beside them, judged by the cell whose
settings the run has, with the whole-run metrics of the suite's threshold files."""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from test_train_e2e import REPO, assert_no_training_container, results, run_train

pytestmark = pytest.mark.cluster

SUITE = REPO / "tests" / "fixtures" / "cvs"
JAX = SUITE / "jaxmaxtext" / "mi300x_jaxmaxtext_llama-3.3-70b_distributed.json"
MEGATRON = SUITE / "megatron" / "mi325x_megatron_llama-3.3-70b_distributed.json"
JAX_CELL = "NNODES=2,STEPS=10,PRECISION=BF16,BATCH=2,GBS=32,SEQLEN=8192"
MEGATRON_CELL = "MBS=1,GBS=64,PRECISION=FP8"


def with_thresholds(config: Path, directory: Path, cell: str, metrics: dict) -> str:
    """The suite's config unchanged, beside a threshold file of one cell."""
    copy = directory / config.name
    shutil.copy(config, copy)
    cells = {"_comment": "written by the test", cell: {
        "training." + name: {"kind": kind, "value": value} for name, (kind, value) in metrics.items()}}
    (directory / json.loads(config.read_text())["threshold_json"]).write_text(json.dumps(cells))
    return str(copy)


def check(document: dict, node: str, metric: str) -> dict:
    return next(c for c in document["checks"] if c["node"] == node and c["metric"] == metric
                and c["check"] == "threshold")


def test_a_versioned_maxtext_config_is_judged_by_its_cell_with_the_suites_metrics(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    config = with_thresholds(JAX, tmp_path, JAX_CELL, {
        "tokens_per_sec_per_gpu": ("min", 1.0), "final_loss": ("max", 15.0), "loss_decreased": ("min", 1),
        "step_time_p95_ms": ("max", 1e9), "tokens_per_sec_total": ("info", 0), "eval_loss": ("info", 100.0),
        "tflops_per_sec_per_gpu": ("min", 1e9)})
    # The simulated nodes have no RDMA provider library to mount (tests/integration/test_rdma.py runs its copy).
    proc = run_train(simcluster, config, tmp_path / "run", nodes, extra={"config": {"rdma_lib": None}},
                     args=["-e", "training_iterations=10"])
    document = results(tmp_path / "run")
    assert document["sweep"] == JAX_CELL and document["threshold_file"]["cell"] == JAX_CELL
    assert proc.returncode != 0 and document["verdict"] == "FAIL"
    assert {line.split(": ")[1].split(" ")[0] for line in document["failures"]} == {"tflops_per_sec_per_gpu"}, \
        document["failures"]
    for node in nodes:
        run = document["summary"]["nodes"][node]["run"]
        assert run["loss_decreased"] == 1.0 and run["final_loss"] < 15.0
        assert run["step_time_p50_ms"] > 0 and run["step_time_p95_ms"] >= run["step_time_p50_ms"]
        per_gpu = document["summary"]["nodes"][node]["steady"]["tokens_per_sec_per_gpu"]["mean"]
        assert run["tokens_per_sec_total"] == pytest.approx(per_gpu * 8 * 2)
        assert check(document, node, "final_loss")["status"] == "pass"
        assert check(document, node, "eval_loss")["status"] == "info"
    assert "tflops_per_sec_per_gpu" in proc.stdout.split("VERDICT:")[1].splitlines()[0]
    assert_no_training_container(simcluster, nodes)


@contextlib.contextmanager
def gpus_of(cluster, nodes: list[str], model: str):
    """The nodes' simulated GPUs are `model`s (their GPU tools say so) for the test."""
    files = [cluster.state_dir / "nodes" / node / "sim" / "gpus.json" for node in nodes]
    before = [path.read_text() for path in files]
    for path in files:
        path.write_text(json.dumps({**json.loads(path.read_text()), "model": model}))
    try:
        yield
    finally:
        for path, text in zip(files, before):
            path.write_text(text)


def test_a_versioned_megatron_config_runs_its_combination_and_passes_its_cell(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    config = with_thresholds(MEGATRON, tmp_path, MEGATRON_CELL, {
        "tokens_per_gpu": ("min", 1.0), "elapsed_time_per_iteration": ("max", 1e9),
        "scaling_efficiency_pct": ("min", 85.0), "final_loss": ("max", 1e9)})
    # an MI325X config: preflight checks the nodes' GPUs are MI325X
    with gpus_of(simcluster, nodes, "AMD Instinct MI325X"):
        proc = run_train(simcluster, config, tmp_path / "run", nodes)
    assert proc.returncode == 0, proc.stdout[-3000:]
    document = results(tmp_path / "run")
    assert document["verdict"] == "PASS" and document["threshold_file"]["cell"] == MEGATRON_CELL
    last = nodes[-1]
    assert check(document, last, "tokens_per_gpu")["status"] == "pass"
    assert {"metric": "scaling_efficiency_pct", "reason": "no scaling baseline (scaling_baseline.tokens_per_sec_total "
            "is 0 or missing)"} in document["unjudged"]
    assert "not judged (no scaling baseline" in proc.stdout.split("VERDICT:")[1].splitlines()[0]
    assert document["summary"]["nodes"][last]["run"]["tokens_per_sec_total"] > 0
    assert_no_training_container(simcluster, nodes)
