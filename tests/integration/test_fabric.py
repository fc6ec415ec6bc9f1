"""The fabric gate on the simulated cluster: a real token bucket on one node's link is found and named
before any training container starts; the gate skipped by its variable lets training start directly.

The stand-in for rccl-tests (simulator/node/all_reduce_perf, simulated) moves real bytes over TCP between the
nodes' network namespaces, so `tc ... tbf rate 20mbit` inside node3's namespace is a real fault.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess

import pytest
from test_train_e2e import ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, assert_no_training_container, results, run_train

from ansible_collections.clusterval.training.plugins.module_utils import _fabric

pytestmark = pytest.mark.cluster

THROTTLE = ["tc", "qdisc", "replace", "dev", "simeth0", "root", "tbf", "rate", "20mbit", "burst", "32kbit",
            "latency", "400ms"]


@contextlib.contextmanager
def throttled(cluster, node: str):
    cluster.run(node, THROTTLE)
    try:
        yield
    finally:
        cluster.run(node, ["tc", "qdisc", "del", "dev", "simeth0", "root"], check=False)


def benchmark_processes(cluster, node: str) -> list[str]:
    """Command lines of the fabric stand-in's processes still in the node's network namespace."""
    netns = f"{os.environ.get('CLUSTERVAL_SIMCLUSTER_PREFIX', 'cvsim')}-{node}"
    listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False)
    assert listed.returncode == 0, listed.stderr
    pids = listed.stdout.split()
    lines = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                lines.append(handle.read().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return [line for line in lines if "_perf" in line]


def test_a_throttled_link_is_named_before_any_training_container(simcluster, four_nodes, tmp_path):
    slow = four_nodes[2]
    with throttled(simcluster, slow):
        proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes, fabric=True)
    out = proc.stdout
    assert proc.returncode != 0
    assert f"fabric gate FAIL: {slow} is slow in every pair while its partners are fast with other nodes" in out
    assert "Container | Start or replace the training container" not in out
    assert_no_training_container(simcluster, four_nodes)
    for node in four_nodes:
        assert benchmark_processes(simcluster, node) == []
    document = results(tmp_path)
    fabric = document["fabric"]
    assert [(n["kind"], n["name"]) for n in fabric["named"]] == [("node", slow)]
    # The gate's verdict, never the first node it ran from.
    assert document["stop"]["hosts"] == [slow], document["stop"]
    assert document["headline"].startswith("FAIL: stopped in fabric: fabric gate FAIL: %s is slow" % slow)
    assert fabric["simulated"] is True
    assert [r["name"] for r in fabric["rounds"]] == ["alone", "all", "pairs-1", "pairs-2"]
    row = fabric["matrix"]["busbw"][slow]
    assert sorted(row) == [four_nodes[1], four_nodes[3]] and all(value < 0.02 for value in row.values())
    assert fabric["matrix"]["busbw"][four_nodes[0]][four_nodes[1]] > 0.02
    html = (tmp_path / "report.html").read_text()
    assert '<section id="fabric"><h2>Fabric gate: FAIL</h2>' in html
    assert "bus bandwidth between pairs of nodes" in html


def test_the_gate_skipped_by_its_variable_lets_training_start_directly(simcluster, four_nodes, tmp_path):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes[:2], more_vars={"fabric_enabled": False},
                     fabric=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Fabric | Every node's part started" not in proc.stdout
    assert "Container | Start or replace the training container" in proc.stdout
    assert "fabric" not in results(tmp_path)


def test_a_healthy_cluster_passes_the_gate_with_figures_in_the_results(simcluster, four_nodes, tmp_path):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes[:2], fabric=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "fabric gate PASS on 2 nodes: all nodes all_reduce_perf" in proc.stdout
    fabric = json.loads((tmp_path / "results.json").read_text())["fabric"]
    assert fabric["failed"] is False and set(fabric["all"]) == {"all_reduce_perf", "alltoall_perf"}


def test_the_recommended_isolation_command_names_the_slowed_node(simcluster, four_nodes, tmp_path):
    """The command a verdict recommends when it cannot name the culprit, run as printed (shlex-split)."""
    advice = _fabric.isolation_advice("slow as a whole", str(simcluster.inventory), str(REPO / JAX_MULTI),
                                      ":".join(four_nodes))
    argv = shlex.split(advice.split("no training): ", 1)[1])
    argv[0] = ANSIBLE_PLAYBOOK
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    with throttled(simcluster, four_nodes[1]):
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0
    assert f"fabric gate FAIL: {four_nodes[1]} is slow in every pair while its partners are fast" in proc.stdout
    for node in four_nodes:
        assert benchmark_processes(simcluster, node) == []


def fabric_containers(cluster, node: str) -> list[str]:
    out = cluster.docker(node, "ps", "-a", "--filter", "label=clusterval.fabric", "--format", "{{.Names}}").stdout
    return [line for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("forks", [None, 1, 3])
def test_the_gate_runs_in_the_image_on_four_nodes_whatever_forks_is(simcluster, four_nodes, tmp_path, forks):
    """The defaults: rccl-tests in a container of the training image on every node, with the plan's network
    settings; the nodes' hosts have no rccl-tests and no MPI. Fewer forks than nodes still starts every rank."""
    for node in four_nodes:
        assert simcluster.run(node, ["sh", "-c", "command -v mpirun || ls /opt/rccl-tests"], check=False).returncode != 0
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes, fabric=True,
                     args=["--forks", str(forks)] if forks else None)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "fabric gate PASS on 4 nodes: all nodes all_reduce_perf" in proc.stdout
    fabric = results(tmp_path)["fabric"]
    assert [r["name"] for r in fabric["rounds"]] == ["alone", "all"]
    assert set(fabric["alone"]) == set(four_nodes) and fabric["all"]["alltoall_perf"] > 0.01
    assert fabric["env"]["NCCL_SOCKET_IFNAME"] == simcluster.ifname
    assert fabric["env"]["NCCL_IB_HCA"] == "bnxt_re0,bnxt_re1" and fabric["env"]["NCCL_IB_GID_INDEX"] == "3"
    for node in four_nodes:
        assert fabric_containers(simcluster, node) == []
        assert benchmark_processes(simcluster, node) == []


@pytest.fixture()
def image_without_rccl_tests(simcluster, four_nodes):
    """An image on the nodes that has a shell and nothing else (as ROCm's JAX image has no rccl-tests)."""
    image = "clusterval/no-rccl-tests:test"
    for node in four_nodes[:2]:
        simcluster.run(node, ["sh", "-c", f"tar -C / -c bin/busybox | docker import - {image} >/dev/null"])
    yield image
    for node in four_nodes[:2]:
        simcluster.docker(node, "rmi", "-f", image, check=False)


def test_an_image_without_rccl_tests_is_said_once_and_training_goes_on(
        simcluster, four_nodes, tmp_path, image_without_rccl_tests):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes[:2], fabric=True,
                     more_vars={"fabric_image": image_without_rccl_tests})
    assert proc.returncode == 0, proc.stdout[-3000:]
    message = (f"fabric gate not run: /opt/rccl-tests/build/all_reduce_perf and /opt/rccl-tests/build/alltoall_perf "
               f"are not in {image_without_rccl_tests}")
    said = [line.strip().strip('"') for line in proc.stdout.splitlines() if "fabric gate not run" in line]
    # once for the cluster by the gate, once in the verdict block (wrapped to the console's width)
    assert len(said) == 2 and said[0] == message
    assert f"{message} (the fabric was not measured)" in " ".join(proc.stdout.split())
    assert "Fabric | Every node's part started" not in proc.stdout
    assert "Container | Start or replace the training container" in proc.stdout
    document = results(tmp_path)
    assert document["verdict"] == "PASS"
    fabric = document["fabric"]
    assert fabric["not_run"] == message and fabric["failed"] is False and fabric["named"] == []
    assert not any(node in fabric["not_run"] for node in four_nodes)
    assert {s["stage"]: s["outcome"] for s in document["stages"]}["fabric"] == "skipped"
    assert f'<skipped message="{message}"' in (tmp_path / "junit.xml").read_text()
    assert "<h2>Fabric gate: NOT RUN (the fabric was not measured)</h2>" in (tmp_path / "report.html").read_text()


def test_ranks_that_meet_only_through_mpi_are_not_measured_across_nodes(simcluster, four_nodes, tmp_path):
    """The stand-in made to behave as stock rccl-tests do without an MPI launch: each node's process runs alone."""
    env = {"config": {"container_config": {"env_dict": {"CLUSTERVAL_SIM_FABRIC_MPI_ONLY": "1"}}}}
    proc = run_train(simcluster, JAX_MULTI, tmp_path, four_nodes[:2], fabric=True,
                     more_vars={"training_overrides_extra": env})
    assert proc.returncode == 0, proc.stdout[-3000:]
    fabric = results(tmp_path)["fabric"]
    assert fabric["failed"] is False and fabric["named"] == [] and fabric["all"] == {}
    assert fabric["not_measured"][0].startswith("all_reduce_perf across nodes: its ranks did not meet: rank 0 lists "
                                                "ranks on 1 host of the group's 2 nodes")
    assert "fabric not measured: all_reduce_perf across nodes: its ranks did not meet" in proc.stdout


def test_the_fabric_playbook_fails_when_its_gate_cannot_run(simcluster, four_nodes, tmp_path, image_without_rccl_tests):
    argv = [ANSIBLE_PLAYBOOK, "-i", str(simcluster.inventory), str(REPO / "playbooks" / "fabric.yml"),
            "-e", f"training_config={JAX_MULTI}", "-e", "training_hosts=" + ":".join(four_nodes[:2]),
            "-e", f"fabric_image={image_without_rccl_tests}"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert (f'"msg": "fabric gate not run: /opt/rccl-tests/build/all_reduce_perf and '
            f'/opt/rccl-tests/build/alltoall_perf are not in {image_without_rccl_tests}"') in proc.stdout
    assert "Fabric | Every node's part started" not in proc.stdout
