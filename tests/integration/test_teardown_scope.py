"""`teardown.yml` without a run id frees this cluster's nodes and never touches another cluster's runs (issue 19).

Two simulated clusters whose nodes have the same names (node1, node2) share the home directory their runs are
recorded in (`~/.cache/clusterval/`): each simulated node has its own /home, so the test mounts one directory
at the SSH user's ~/.cache/clusterval on every node of both clusters, as every node of two real clusters sees a home directory on NFS. Real
ansible-playbook, SSH and Docker daemons."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import SIMCLUSTER, bring_up
from test_safety import finish, output_of, start_train, teardown
from test_train_e2e import assert_no_training_container, results, sim_env, training_underway, wait_for

pytestmark = pytest.mark.cluster

# The second cluster: its own prefix, subnet, state and inventory; the same node names.
OTHER_PREFIX = os.environ.get("CLUSTERVAL_SIMCLUSTER_PREFIX", "cvsim") + "b"
OTHER = {"CLUSTERVAL_SIMCLUSTER_PREFIX": os.environ.get("CLUSTERVAL_SIMCLUSTER_OTHER_PREFIX", OTHER_PREFIX),
         "CLUSTERVAL_SIMCLUSTER_SUBNET": os.environ.get("CLUSTERVAL_SIMCLUSTER_OTHER_SUBNET", "10.214.0.0/24")}


@pytest.fixture(scope="module")
def other_cluster(simcluster):
    """A second simulated cluster of 2 nodes named like the first one's (brought down at the end)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in OTHER.items():
            patch.setenv(key, value)
        patch.delenv("CLUSTERVAL_SIMCLUSTER_STATE", raising=False)
        patch.delenv("CLUSTERVAL_SIMCLUSTER_INVENTORY", raising=False)
        cluster = bring_up(2)
    try:
        yield cluster
    finally:
        if os.environ.get("CLUSTERVAL_SIMCLUSTER_KEEP") != "1":
            subprocess.run([str(SIMCLUSTER), "down"], env=dict(os.environ, **OTHER), capture_output=True, text=True,
                           timeout=300, check=False)


@pytest.fixture
def shared_home(simcluster, other_cluster):
    """One ~/.cache/clusterval for every node of both clusters (an NFS home), unmounted at the end. It lives on
    the first cluster's shared directory: /tmp is private to each node."""
    shared = simcluster.shared_dir / simcluster.unique_name("home-cache")
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # the nodes' user writes there, as into its home
    target = f"/home/{simcluster.user}/.cache/clusterval"
    mounted = []
    for cluster, env in ((simcluster, {}), (other_cluster, OTHER)):
        for node in simcluster.nodes[:2]:
            cluster.ssh(node, f"mkdir -p {target}")
            subprocess.run([str(SIMCLUSTER), "exec", node, "--", "mount", "--bind", str(shared), target],
                           env=dict(os.environ, **env), check=True, capture_output=True, timeout=60)
            mounted.append((node, env))
    try:
        yield shared
    finally:
        for node, env in mounted:
            subprocess.run([str(SIMCLUSTER), "exec", node, "--", "umount", target], env=dict(os.environ, **env),
                           check=False, capture_output=True, timeout=60)
        shutil.rmtree(shared, ignore_errors=True)


def on_other(cluster, node: str, command: str) -> str:
    return cluster.ssh(node, command).stdout


def test_a_teardown_without_run_id_on_one_cluster_leaves_the_other_clusters_run_alone(simcluster, other_cluster,
                                                                                      shared_home, tmp_path):
    hosts = simcluster.nodes[:2]
    assert other_cluster.nodes == hosts and other_cluster.addresses != {h: simcluster.addresses[h] for h in hosts}
    teardown(simcluster, hosts)
    teardown(other_cluster, hosts)
    # The other cluster's own leftover: the teardown there must still remove it.
    stray = other_cluster.unique_name("leftover")
    other_cluster.ssh(hosts[0], "docker run -d --name %s --label clusterval.run_id=20261126T000000Z-bbbbbb-old "
                                "--label clusterval.managed_by=clusterval.training %s sleep 600"
                      % (stray, other_cluster.image))
    run_dir = tmp_path / "run"
    # 12 steps at 1.5 s: the teardown below happens while the run trains.
    proc = start_train(simcluster, run_dir, hosts, sim_env(STEP_SECONDS="1.5"))
    try:
        wait_for(lambda: training_underway(run_dir), 150)
        run_id = next(iter(run_dir.glob("watch/*"))).name
        began = time.monotonic()
        other = teardown(other_cluster, hosts)
        print("teardown.yml on the other cluster took %.1f s" % (time.monotonic() - began))
        assert other.returncode == 0, other.stdout[-3000:]
        assert f"{hosts[0]} teardown removed (any run): container {stray}" in other.stdout
        assert (f"left alone, recorded by another cluster in the shared run index: run {run_id} "
                f"({hosts[0]} at {simcluster.addresses[hosts[0]]} from ") in other.stdout
        assert not [line for line in other.stdout.splitlines() if run_id in line.split("; left alone")[0]]
        assert re.search(r"item\(s\) removed on 2 node\(s\), every run; [1-9]\d* run\(s\) of another cluster left "
                         r"alone", other.stdout), other.stdout[-2000:]
        assert on_other(other_cluster, hosts[0], "docker ps -aq --filter label=clusterval.run_id").strip() == ""
        # The run of the first cluster is unaffected: it still trains, and passes.
        rc = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = output_of(run_dir)
    assert rc == 0, output[-4000:]
    assert "VERDICT: PASS" in output
    assert results(run_dir)["verdict"] == "PASS"
    assert_no_training_container(simcluster, hosts)
    # The run's own teardown cleared its state; the index holds nothing of it.
    assert not list((simcluster.shared_dir / ".clusterval-status").glob(run_id))
    assert not [p for p in os.listdir(shared_home / "runs") if p.startswith(run_id)]
