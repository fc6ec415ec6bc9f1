"""Preflight on the simulated cluster: nodes that cannot run the job are refused before any container starts.

The nodes are reached as a user who is not root (scripts/simcluster: passwordless sudo, the docker group); `access`
takes either away on one node, as a site may."""
from __future__ import annotations

import json

import pytest
from test_train_e2e import JAX_MULTI, assert_no_training_container, results, run_train

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


@pytest.mark.parametrize("which, option, reason", [
    (1, "--no-sudo", "gpu_errors: reading the kernel log needs sudo, and {user} has none (sudo: a password is "
                     "required; set preflight_kernel_log: skip to go on without it)"),
    (0, "--no-docker-group", "docker: user {user} cannot reach the Docker socket /var/run/docker.sock (not in group "
                             "docker)"),
], ids=["no-sudo", "no-docker-group"])
def test_a_node_whose_user_lacks_a_privilege_is_named_before_any_container(simcluster, access, tmp_path, which,
                                                                           option, reason):
    nodes = simcluster.nodes[:2]
    lacking, other = nodes[which], nodes[1 - which]
    access(lacking, option)
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes)
    assert proc.returncode != 0
    reason = reason.format(user=simcluster.user)
    assert f"{lacking} preflight FAIL {reason}" in proc.stdout
    assert f"preflight failed on {lacking}: {reason}" in proc.stdout
    assert f"preflight failed on {other}" not in proc.stdout
    assert "Container | Start or replace the training container" not in proc.stdout
    assert_no_training_container(simcluster, nodes)


def test_skipping_the_kernel_log_lets_a_node_without_sudo_train(simcluster, access, tmp_path):
    nodes = simcluster.nodes[:2]
    access(nodes[1], "--no-sudo")
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, more_vars={"preflight_kernel_log": "skip"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert results(tmp_path)["verdict"] == "PASS"
    for node in nodes:
        assert f"{node} preflight OK   gpu_errors: the kernel log is not read (preflight_kernel_log: skip)" \
            in proc.stdout
