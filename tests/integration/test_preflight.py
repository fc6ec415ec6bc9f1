"""Preflight on the simulated cluster: nodes that cannot run the job are refused before any container starts."""
from __future__ import annotations

import json

import pytest
from test_train_e2e import JAX_MULTI, assert_no_training_container, run_train

pytestmark = pytest.mark.cluster

BARE = "/tmp/clusterval-bare-python"  # the node's private /tmp


@pytest.fixture()
def bare_python(simcluster):
    """A virtual environment on the second node: its Python has the standard library, not requests."""
    node = simcluster.nodes[1]
    simcluster.ssh(node, f"python3 -m venv --without-pip {BARE}", timeout=120)
    yield node, f"{BARE}/bin/python3"
    simcluster.ssh(node, f"rm -rf {BARE}", check=False)


def test_a_node_whose_python_lacks_requests_fails_preflight_before_any_container(simcluster, bare_python, tmp_path):
    nodes = simcluster.nodes[:2]
    node, python = bare_python
    inventory = tmp_path / "bare-python.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {node: {"ansible_python_interpreter": python}}}}))
    proc = run_train(simcluster, JAX_MULTI, tmp_path / "run", nodes, args=["-i", str(inventory)])
    assert proc.returncode != 0
    assert f"{nodes[0]} preflight OK   python_modules: /usr/bin/python3 imports requests" in proc.stdout
    assert f"{node} preflight FAIL python_modules: {python} cannot import requests (ModuleNotFoundError" in proc.stdout
    assert f"preflight failed on {node}: python_modules" in proc.stdout
    assert "Launch the framework" not in proc.stdout
    assert_no_training_container(simcluster, nodes)


def test_shm_size_beyond_the_nodes_memory_fails_preflight(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, {"config": {"shm_size": "64P"}})
    assert proc.returncode != 0
    for node in nodes:
        assert f"{node} preflight FAIL shm_size: config.shm_size 64P (67108864.0 GiB) exceeds the node's" in proc.stdout
    assert f"preflight failed on {nodes[0]}: shm_size" in proc.stdout
    assert "Launch the framework" not in proc.stdout
    assert_no_training_container(simcluster, nodes)
