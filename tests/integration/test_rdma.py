"""RDMA inside the container on the simulated cluster (the simulator's ibv_devinfo lists the HCAs of
NCCL_IB_HCA, less CLUSTERVAL_SIM_MISSING_HCA on rank CLUSTERVAL_SIM_MISSING_HCA_RANK)."""
from __future__ import annotations

import pytest

from test_train_e2e import JAX_MULTI, assert_no_training_container, results, run_train, sim_env

pytestmark = pytest.mark.cluster


def test_every_rank_checks_its_hcas_in_the_container_before_the_framework(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for node in nodes:
        log = (tmp_path / "logs" / node / "training.log").read_text()
        assert "[clusterval] RDMA: ibv_devinfo in the container lists bnxt_re0 bnxt_re1" in log, node
    assert_no_training_container(simcluster, nodes)


def test_an_hca_missing_in_the_container_fails_that_node_with_the_rdma_message(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes,
                     extra=sim_env(MISSING_HCA="bnxt_re1", MISSING_HCA_RANK="1"))
    assert proc.returncode != 0
    culprit = results(tmp_path)["culprit"]
    assert culprit["host"] == nodes[1] and culprit["class"] == "network", culprit
    assert culprit["text"].startswith("[clusterval] RDMA failure: ibv_devinfo in the container does not list HCA "
                                      "bnxt_re1 of NCCL_IB_HCA"), culprit
    assert f"VERDICT: FAIL: {nodes[1]} network" in proc.stdout
    assert_no_training_container(simcluster, nodes)
