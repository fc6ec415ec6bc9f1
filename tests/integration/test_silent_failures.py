"""Silent failures on 4 simulated nodes: the node that went silent is named, or no node when none stands out.

Each case runs the real train.yml, injects a fault from outside while the job trains, and checks that the
VERDICT line, results.json, junit.xml and report.html agree on the one decision, and that nothing is left
running on any node.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_lease import controller_processes
from test_train_e2e import (ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, record_timing, sim_env, train_argv, training_underway,
                            wait_for)

pytestmark = pytest.mark.cluster

RUN_TIMEOUT_S = 300
# Short bounds keep each case near a minute; every fault is detected by one of them.
FAST_WATCH = {"training_iterations": 60, "train_stale_timeout": 10, "train_lease_timeout": 20,
              "train_hang_timeout": 15, "train_direct_timeout": 40}


@pytest.fixture(scope="module")
def four(simcluster) -> list[str]:
    if len(simcluster.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    return simcluster.nodes[:4]


RUNS: list[Path] = []


@pytest.fixture(autouse=True)
def clean_nodes(simcluster, four):
    """Each case ends with nothing of its runs on the nodes, whatever it left (a failed assertion included):
    a teardown of each of its runs by run id, which touches no other run on any cluster."""
    RUNS.clear()
    yield
    for run_dir in RUNS:
        plan = run_dir / "plan.json"
        if plan.is_file():
            teardown_run(simcluster, four, json.loads(plan.read_text())["run_id"])


class Run:
    """ansible-playbook train.yml in the background, its output in a file."""

    def __init__(self, cluster, run_dir: Path, hosts: list[str], knobs: dict | None = None,
                 more_vars: dict | None = None) -> None:
        argv = train_argv(cluster, JAX_MULTI, run_dir, hosts, sim_env(STEP_SECONDS="1", **(knobs or {})))
        argv += ["-e", json.dumps(dict(FAST_WATCH, **(more_vars or {})))]
        self.out_path = run_dir.parent / (run_dir.name + "-ansible.out")
        self.run_dir = run_dir
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        with open(self.out_path, "w") as out:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.started = time.monotonic()
        RUNS.append(run_dir)

    def wait_training(self) -> None:
        wait_for(lambda: training_underway(self.run_dir) or self.proc.poll() is not None, 180)
        assert self.proc.poll() is None, self.output()[-3000:]

    def finish(self) -> float:
        """Seconds from now until the controller exits."""
        started = time.monotonic()
        try:
            self.proc.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        return time.monotonic() - started

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def verdict(self) -> str:
        lines = [line for line in self.output().splitlines() if line.startswith("VERDICT: ")]
        assert lines, self.output()[-4000:]
        return lines[-1]


def agreed_culprit(run: Run) -> str | None:
    """The node every output names (None: no node); they must all agree."""
    document = json.loads((run.run_dir / "results.json").read_text())
    culprit = (document.get("culprit") or {}).get("host")
    verdict = run.verdict()
    assert document["verdict"] == "FAIL" and verdict.startswith("VERDICT: FAIL")
    suite = ET.parse(run.run_dir / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    html = (run.run_dir / "report.html").read_text()
    if culprit is None:
        assert document.get("run_cause"), document.get("headline")
        assert "culprit" not in props and "run_cause" in props
        assert "No node stands out" in html
        assert any(case.find("error") is not None for case in suite.iter("testcase"))
    else:
        assert verdict.startswith(f"VERDICT: FAIL: {culprit} "), verdict
        assert props.get("culprit") == culprit
        assert f"Culprit: {culprit}" in html
    outcome = json.loads(next(run.run_dir.glob("watch/*/outcome.json")).read_text())
    assert (outcome.get("culprit") or {}).get("host") == culprit
    return culprit


def assert_no_node_named(cluster, nodes: list[str], run: Run, verdict_start: str) -> None:
    """The run failed with a cause outside every node, said as such everywhere; nothing is left running."""
    assert run.proc.returncode != 0
    assert agreed_culprit(run) is None
    assert run.verdict().startswith(verdict_start), run.verdict()
    assert_nothing_running(cluster, nodes)


def running_training(cluster, nodes: list[str]) -> dict[str, list[str]]:
    running = {}
    for node in nodes:
        out = cluster.docker(node, "ps", "--filter", "label=clusterval.run_id", "--format", "{{.Names}}",
                             check=False).stdout
        names = [line for line in out.splitlines() if line.strip()]
        if names:
            running[node] = names
    return running


def assert_nothing_running(cluster, nodes: list[str], within_s: float = 5) -> None:
    wait_for(lambda: not running_training(cluster, nodes), within_s)


def node_pids(cluster, node: str) -> list[str]:
    netns = f"{os.environ.get('CLUSTERVAL_SIMCLUSTER_PREFIX', 'cvsim')}-{node}"
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return [pid for pid in out.split() if pid.strip()]


def signal_node(cluster, node: str, sig: str) -> None:
    """Every process of the node (its namespace): sshd, dockerd, containerd, the job."""
    pids = node_pids(cluster, node)
    assert pids
    subprocess.run(["kill", f"-{sig}", *pids], capture_output=True, check=False)


def teardown_run(cluster, nodes: list[str], run_id: str) -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(cluster.inventory), str(REPO / "playbooks" / "teardown.yml"),
                           "-e", "training_hosts=" + ":".join(nodes), "-e", f"training_run_id={run_id}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]


def restore(cluster) -> None:
    """Bring back a node whose processes a case killed (idempotent for the others)."""
    subprocess.run([str(REPO / "scripts" / "simcluster"), "up", "--nodes", str(len(cluster.nodes))],
                   capture_output=True, text=True, timeout=900, check=True)


def test_a_node_whose_every_process_is_killed_is_named(simcluster, four, tmp_path):
    run = Run(simcluster, tmp_path, four)
    try:
        run.wait_training()
        signal_node(simcluster, four[1], "KILL")
        elapsed = run.finish()
    finally:
        restore(simcluster)
    assert run.proc.returncode != 0
    assert agreed_culprit(run) == four[1], run.verdict()
    record_timing("a node whose every process is killed named", elapsed)
    assert_nothing_running(simcluster, four)


def test_a_frozen_node_is_named_and_the_controller_does_not_wait_for_it(simcluster, four, tmp_path):
    frozen = four[2]
    run = Run(simcluster, tmp_path, four)
    try:
        run.wait_training()
        signal_node(simcluster, frozen, "STOP")
        elapsed = run.finish()
    finally:
        signal_node(simcluster, frozen, "CONT")
    assert run.proc.returncode != 0
    assert agreed_culprit(run) == frozen, run.verdict()
    record_timing("a frozen node named", elapsed)
    # Thawed, its supervisor finds the lease lapsed and stops its job by itself.
    assert_nothing_running(simcluster, four, within_s=60)


def test_a_node_whose_link_goes_down_is_named(simcluster, four, tmp_path):
    lost = four[1]
    run = Run(simcluster, tmp_path, four)
    try:
        run.wait_training()
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "down"])
        elapsed = run.finish()
    finally:
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "up"], check=False)
    assert run.proc.returncode != 0
    assert agreed_culprit(run) == lost, run.verdict()
    record_timing("a node whose link goes down named", elapsed)
    wait_for(lambda: simcluster.ssh(lost, "true", check=False).returncode == 0, 60)
    assert_nothing_running(simcluster, four, within_s=60)


def test_a_node_whose_log_disk_fills_up_is_named_for_its_disk(simcluster, four, tmp_path):
    """The node's run directory (its training log) on a small file system that something else fills while the job
    trains: the framework can write no line, its own failure included; the supervisor names the full disk."""
    full = four[2]
    run_id = "20261126T000000Z-d15c00-node-disk"
    run_dir = "/tmp/clusterval-logs/clusterval/" + run_id
    simcluster.ssh(full, f"mkdir -p {run_dir} && sudo mount -t tmpfs -o size=2m tmpfs {run_dir}")
    try:
        # Preflight would refuse a file system this small for the log a run writes: the disk fills up later.
        run = Run(simcluster, tmp_path, four, more_vars={"training_run_id": run_id, "preflight_min_free_mib": 0,
                                                         "preflight_log_base_mib": 0, "preflight_log_kib_per_step": 0})
        run.wait_training()
        simcluster.ssh(full, f"dd if=/dev/zero of={run_dir}/filler bs=64k 2>/dev/null; true")
        run.finish()
    finally:
        simcluster.ssh(full, f"sudo umount -l {run_dir}", check=False)
    assert run.proc.returncode != 0
    assert agreed_culprit(run) == full, run.verdict()
    assert run.verdict().startswith(f"VERDICT: FAIL: {full} disk "), run.verdict()
    assert "No space left on device" in run.verdict()
    assert_nothing_running(simcluster, four)


def signal_controller(run: Run, sig: int) -> None:
    """ansible-playbook and every worker of it: ansible-core 2.19's workers start their own session, so its
    process group alone leaves the watch's worker polling and renewing the lease."""
    for pid in controller_processes(run.run_dir):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_the_controller_away_past_the_lease_blames_no_node(simcluster, four, tmp_path):
    run = Run(simcluster, tmp_path, four)
    run.wait_training()
    signal_controller(run, signal.SIGSTOP)
    time.sleep(FAST_WATCH["train_lease_timeout"] + 15)
    signal_controller(run, signal.SIGCONT)
    run.finish()
    assert_no_node_named(simcluster, four, run, "VERDICT: FAIL: controller: the controller was away for ")


def test_a_run_taken_over_says_so_and_by_which_run(simcluster, four, tmp_path):
    first = Run(simcluster, tmp_path / "first", four[:2])
    first.wait_training()
    second = Run(simcluster, tmp_path / "second", four[:2], more_vars={"training_takeover": True,
                                                                       "training_iterations": 8})
    second.finish()
    first.finish()
    taker = json.loads((tmp_path / "second" / "plan.json").read_text())["run_id"]
    assert second.proc.returncode == 0, second.output()[-3000:]
    assert_no_node_named(simcluster, four, first, f"VERDICT: FAIL: takeover: the run was taken over by run {taker}")


def test_the_status_directory_removed_is_named_as_such_not_as_a_node(simcluster, four, tmp_path):
    run = Run(simcluster, tmp_path, four)
    run.wait_training()
    run_id = json.loads((tmp_path / "plan.json").read_text())["run_id"]
    status = simcluster.shared_dir / ".clusterval-status" / run_id
    assert status.is_dir()
    subprocess.run(["rm", "-rf", str(status)], check=True)
    run.finish()
    assert_no_node_named(simcluster, four, run, "VERDICT: FAIL: removed: the run's status directory")


def test_a_busy_refusal_names_the_busy_node(simcluster, four, tmp_path):
    holder = Run(simcluster, tmp_path / "holder", four[3:4])
    holder.wait_training()
    refused = Run(simcluster, tmp_path / "refused", four[2:4])
    refused.finish()
    try:
        verdict = refused.verdict()
        assert refused.proc.returncode != 0
        assert four[3] in verdict and "busy" in verdict, verdict
        document = json.loads((tmp_path / "refused" / "results.json").read_text())
        assert four[3] in document["headline"] and "busy" in document["headline"]
    finally:
        os.killpg(holder.proc.pid, signal.SIGINT)
        holder.finish()
    for run_dir in RUNS:
        teardown_run(simcluster, four, json.loads((run_dir / "plan.json").read_text())["run_id"])
    assert_nothing_running(simcluster, four)
