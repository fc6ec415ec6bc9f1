"""Never a job left holding the nodes, one run per node at a time, every wait bounded (issue 10).

Real ansible-playbook, SSH and Docker daemons on the simulated cluster; each test ends with a check of what
is still running on the nodes."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_train_e2e import (ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, RUN_TIMEOUT_S, assert_no_training_container,
                            record_timing, run_train, sim_env, train_argv, training_containers, wait_for)

pytestmark = pytest.mark.cluster

PORT = 23456
SIMCLUSTER = REPO / "scripts" / "simcluster"


def env() -> dict:
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def start_train(cluster, run_dir, hosts, extra=None, more_vars=None) -> subprocess.Popen:
    argv = train_argv(cluster, JAX_MULTI, run_dir, hosts, extra)
    if more_vars:
        argv += ["-e", json.dumps(more_vars)]
    out = open(str(run_dir) + "-ansible.out", "w")
    return subprocess.Popen(argv, cwd=REPO, env=env(), stdout=out, stderr=subprocess.STDOUT)


def output_of(run_dir) -> str:
    return open(str(run_dir) + "-ansible.out").read()


def finish(proc: subprocess.Popen, timeout=RUN_TIMEOUT_S) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def running(cluster, node: str) -> dict:
    """name -> (id, run_id) of the node's running labelled containers."""
    out = cluster.docker(node, "ps", "--filter", "label=clusterval.run_id",
                         "--format", '{{.Names}} {{.ID}} {{.Label "clusterval.run_id"}}').stdout
    return {name: (cid, run_id) for name, cid, run_id in (line.split() for line in out.splitlines() if line.strip())}


def all_running(cluster, nodes) -> bool:
    return all(running(cluster, node) for node in nodes)


def teardown(cluster, hosts, *extra: str) -> subprocess.CompletedProcess:
    argv = [ANSIBLE_PLAYBOOK, "-i", str(cluster.inventory), str(REPO / "playbooks" / "teardown.yml"),
            "-e", "training_hosts=" + ":".join(hosts), *extra]
    return subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          check=False)


def leftover(cluster, node: str, run_id: str, name: str) -> None:
    cluster.docker(node, "run", "-d", "--name", name, "--label", f"clusterval.run_id={run_id}",
                   "--label", "clusterval.managed_by=clusterval.training", cluster.image, "sleep", "600")


@pytest.fixture
def nodes(simcluster) -> list[str]:
    chosen = simcluster.nodes[:3]
    teardown(simcluster, chosen)
    return chosen


def test_teardown_playbook_with_no_arguments_removes_a_leftover_job_and_says_so(simcluster, nodes):
    name = simcluster.unique_name("leftover")
    stranger = simcluster.unique_name("not-ours")
    leftover(simcluster, nodes[1], "20261125T000000Z-aaaaaa-old", name)
    simcluster.docker(nodes[1], "run", "-d", "--name", stranger, simcluster.image, "sleep", "600")
    try:
        proc = teardown(simcluster, nodes)
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert f"{nodes[1]} teardown removed (any run): container {name}" in proc.stdout
        assert f"{nodes[0]} teardown: nothing to remove (any run)" in proc.stdout
        assert "1 item(s) removed on 3 node(s), every run" in proc.stdout
        assert_no_training_container(simcluster, nodes)
        assert stranger in simcluster.docker(nodes[1], "ps", "--format", "{{.Names}}").stdout
    finally:
        simcluster.docker(nodes[1], "rm", "-f", stranger, check=False)
    again = teardown(simcluster, nodes)
    assert again.returncode == 0 and "nothing to remove on 3 node(s), every run" in again.stdout


def test_teardown_by_run_id_leaves_another_runs_container(simcluster, nodes):
    mine, other = simcluster.unique_name("mine"), simcluster.unique_name("other")
    leftover(simcluster, nodes[0], "run-mine", mine)
    leftover(simcluster, nodes[0], "run-other", other)
    proc = teardown(simcluster, nodes, "-e", "training_run_id=run-mine")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"container {mine} (run run-mine" in proc.stdout
    assert training_containers(simcluster, nodes[0]) == [other]
    teardown(simcluster, nodes)


def test_a_second_run_on_busy_nodes_is_refused_before_any_container_changes(simcluster, nodes, tmp_path):
    hosts = nodes[:2]
    # Long enough (12 steps of 5 s) that the first run still trains when the second, started on a loaded
    # machine, reaches its preflight.
    first = start_train(simcluster, tmp_path / "first", hosts, sim_env(STEP_SECONDS="5"))
    try:
        wait_for(lambda: all_running(simcluster, hosts), 120)
        before = {node: running(simcluster, node) for node in hosts}
        first_id = next(iter(before[hosts[0]].values()))[1]
        second = run_train(simcluster, JAX_MULTI, tmp_path / "second", hosts)
        assert second.returncode != 0
        assert f"{hosts[0]} is busy with run {first_id} (started " in second.stdout
        assert f"clusterval.training.teardown -e training_run_id={first_id}" in second.stdout
        assert "training_takeover=true" in second.stdout
        assert {node: running(simcluster, node) for node in hosts} == before, "the first run's containers changed"
        assert finish(first) == 0, output_of(tmp_path / "first")[-4000:]
    finally:
        finish(first, 5)
    assert "VERDICT: PASS" in output_of(tmp_path / "first")
    assert_no_training_container(simcluster, hosts)


def test_takeover_replaces_the_running_job_and_says_so(simcluster, nodes, tmp_path):
    hosts = nodes[:2]
    first = start_train(simcluster, tmp_path / "first", hosts, sim_env(STEP_SECONDS="3600"))
    try:
        wait_for(lambda: all_running(simcluster, hosts), 120)
        first_id = next(iter(running(simcluster, hosts[0]).values()))[1]
        second = run_train(simcluster, JAX_MULTI, tmp_path / "second", hosts, more_vars={"training_takeover": True})
        assert second.returncode == 0, second.stdout[-4000:]
        assert f"TAKEOVER of run {first_id}" in second.stdout
        assert finish(first) != 0
    finally:
        finish(first, 5)
    assert_no_training_container(simcluster, hosts)


def test_a_busy_coordinator_port_is_refused_naming_node_port_and_holder(simcluster, nodes, tmp_path):
    # The holder is a process of the nodes' user (a job left running): the user sees its own processes, never
    # another user's (/proc/PID/fd), so it can name this one.
    listener = subprocess.Popen([str(SIMCLUSTER), "exec", nodes[0], "--", "runuser", "-u", simcluster.user, "--",
                                 "python3", "-c",
                                 "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', %d)); s.listen(); "
                                 "time.sleep(300)" % PORT])
    try:
        time.sleep(2)
        extra = {"config": {"container_config": {"env_dict": {"JAX_COORDINATOR_PORT": str(PORT)}}}}
        proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes[:2], extra=extra)
    finally:
        listener.kill()
        listener.wait()
    assert proc.returncode != 0
    assert f"preflight failed on {nodes[0]}: coordinator_port: port {PORT} is in use" in proc.stdout
    assert "(python3)" in proc.stdout
    assert_no_training_container(simcluster, nodes[:2])


def test_a_dead_docker_daemon_on_one_node_fails_the_run_and_the_others_are_torn_down(simcluster, nodes, tmp_path):
    victim = nodes[1]
    pid_file = simcluster.state_dir / "nodes" / victim / "dockerd.pid"
    run = start_train(simcluster, tmp_path, nodes, sim_env(STEP_SECONDS="1", HANG_AT_STEP="3"),
                      more_vars={"train_hang_timeout": 8})
    try:
        wait_for(lambda: all_running(simcluster, nodes), 120)
        os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
        started = time.monotonic()
        rc = finish(run)
        elapsed = time.monotonic() - started
    finally:
        finish(run, 5)
        subprocess.run([str(SIMCLUSTER), "up", "--nodes", str(len(simcluster.nodes))], capture_output=True,
                       timeout=300, check=False)
    output = output_of(tmp_path)
    assert rc != 0
    assert f"{victim} teardown FAILED" in output
    assert "VERDICT: PASS" not in output
    record_timing("a dead Docker daemon reported, the others torn down", elapsed)
    assert_no_training_container(simcluster, [node for node in nodes if node != victim])
    wait_for(lambda: simcluster.docker(victim, "info", check=False).returncode == 0, 60)
    teardown(simcluster, [victim])
    assert_no_training_container(simcluster, [victim])


def test_a_fifo_as_the_log_fails_the_run_in_bounded_time_naming_it(simcluster, nodes, tmp_path):
    hosts = nodes[:2]
    run = start_train(simcluster, tmp_path, hosts, sim_env(STEP_SECONDS="1"))
    try:
        wait_for(lambda: all_running(simcluster, hosts), 120)
        plan = json.loads(simcluster.docker(hosts[1], "inspect", next(iter(running(simcluster, hosts[1])))).stdout)
        log = plan[0]["Config"]["Labels"]["clusterval.run_dir"] + "/training.log"
        simcluster.ssh(hosts[1], f"rm -f {log} && mkfifo {log}")
        started = time.monotonic()
        rc = finish(run)
        elapsed = time.monotonic() - started
    finally:
        finish(run, 5)
    output = output_of(tmp_path)
    assert rc != 0
    assert f"{log} is a FIFO, not a regular file" in output
    record_timing("a FIFO as the log reported", elapsed)
    assert_no_training_container(simcluster, hosts)


def interrupted_while_watched(simcluster, hosts, tmp_path):
    wait_for(lambda: all_running(simcluster, hosts), 120)
    wait_for(lambda: list(tmp_path.glob("watch/*/progress.json")), 120)


def interrupted_while_starting(simcluster, hosts, tmp_path):
    # ansible-core has been seen to hang here for good: a worker killed while it wrote its result holds the
    # result queue's lock (the training_report callback then exits the controller itself).
    wait_for(lambda: "Start or replace the training container" in output_of(tmp_path), 120)


@pytest.mark.parametrize("when", [interrupted_while_watched, interrupted_while_starting], ids=["watched", "starting"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_an_interrupted_controller_says_how_the_nodes_stop(simcluster, nodes, tmp_path, signum, when):
    hosts = nodes[:2]
    run = start_train(simcluster, tmp_path, hosts, sim_env(STEP_SECONDS="3600"))
    try:
        when(simcluster, hosts, tmp_path)
        run.send_signal(signum)
        stopped = time.monotonic()
        finish(run, 60)
        elapsed = time.monotonic() - stopped
    finally:
        finish(run, 5)
    output = output_of(tmp_path)
    run_id = output.split("-e training_run_id=", 1)[1].split()[0]
    # it stopped by itself, not killed by finish() at its 60-s guard
    assert run.returncode not in (0, -signal.SIGKILL), run.returncode
    record_timing(f"the controller stopped after {signal.Signals(signum).name} ({when.__name__})", elapsed)
    assert f"clusterval: {signal.Signals(signum).name}: the controller stops here" in output
    assert "within the lease timeout (train_lease_timeout)" in output
    assert f"ansible-playbook -i {simcluster.inventory} clusterval.training.teardown " in output
    # Every stop is reported: the run's guard wrote the three reports after the controller ended, then exited.
    watch = tmp_path / "watch" / run_id
    wait_for((watch / "reported.json").exists, 30)
    document = json.loads((tmp_path / "results.json").read_text())
    stage = "training" if when is interrupted_while_watched else "container start"
    assert document["verdict"] == "FAIL" and document["stop"]["interrupted"] == signal.Signals(signum).name
    assert document["headline"].startswith(f"FAIL: stopped in {stage}: the controller (ansible-playbook, pid ")
    assert {s["stage"]: s["outcome"] for s in document["stages"]}[stage] == "interrupted"
    assert "<error" in (tmp_path / "junit.xml").read_text()
    assert "No check failed" not in (tmp_path / "report.html").read_text()
    guard = json.loads((watch / "guard.json").read_text())
    assert guard["controller_pid"] != os.getpid()
    # ... and exited: nothing of the run is left running on the controller either.
    wait_for(lambda: subprocess.run(["pgrep", "-f", str(watch / "guard.json")], check=False).returncode == 1, 10)
    proc = teardown(simcluster, hosts, "-e", f"training_run_id={run_id}")
    assert proc.returncode == 0 and f"run {run_id}" in proc.stdout
    assert_no_training_container(simcluster, hosts)
    for node in hosts:  # the teardown it names frees the node, also before any container carried the run
        locks = simcluster.ssh(node, "find /tmp/clusterval-logs -name clusterval.lock 2>/dev/null || true").stdout
        assert locks.strip() == "", f"{node} is still locked: {locks}"


def test_teardown_goes_on_past_an_unreachable_node_and_names_it(simcluster, nodes):
    lost = nodes[2]
    name = simcluster.unique_name("leftover")
    leftover(simcluster, nodes[0], "run-x", name)
    simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "down"])
    try:
        started = time.monotonic()
        proc = teardown(simcluster, nodes)
        elapsed = time.monotonic() - started
    finally:
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "up"], check=False)
    assert proc.returncode != 0
    assert f"container {name} (run run-x" in proc.stdout
    assert f"{lost} teardown FAILED: unreachable" in proc.stdout
    record_timing("a teardown past an unreachable node", elapsed)
    assert_no_training_container(simcluster, nodes[:2])


@pytest.fixture
def fresh_ssh(monkeypatch):
    """A run that starts on a dead link connects afresh: the SSH ControlMaster an earlier test's run left to the
    node would wait ServerAliveInterval x ServerAliveCountMax (ansible.cfg) before giving up. A short directory:
    a socket's path has at most 107 bytes, and pytest's temporary paths under xdist are longer."""
    directory = tempfile.mkdtemp(prefix="cv-ssh-")
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", directory)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_node_unreachable_before_the_run_is_named_in_all_three_reports(simcluster, nodes, tmp_path, fresh_ssh):
    hosts, lost = nodes[:2], nodes[1]
    simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "down"])
    try:
        started = time.monotonic()
        proc = run_train(simcluster, JAX_MULTI, tmp_path, hosts)
        elapsed = time.monotonic() - started
    finally:
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "up"], check=False)
    assert proc.returncode != 0
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["stop"]["stage"] == "preflight" and document["stop"]["hosts"] == [lost]
    assert document["headline"].startswith(f"FAIL: stopped in preflight: {lost}: unreachable")
    assert document["stop"]["never_started"] == sorted(hosts)
    junit = (tmp_path / "junit.xml").read_text()
    assert 'classname="clusterval.training.run" name="stopped in preflight"' in junit and lost in junit and ' errors="1"' in junit
    html = (tmp_path / "report.html").read_text()
    assert "No check failed" not in html and f"{lost}: unreachable" in html
    assert f"VERDICT: FAIL: stopped in preflight: {lost}: unreachable" in proc.stdout
    assert "stopped in preflight:" in proc.stdout and f"  {lost}: unreachable" in proc.stdout
    record_timing("a node unreachable before the run reported", elapsed)
    assert_no_training_container(simcluster, hosts)


def test_no_node_answering_over_ssh_names_no_node_and_the_playbook_writes_the_reports(
        simcluster, nodes, tmp_path, fresh_ssh):
    """A first run with a wrong key or a network down: every node is unreachable, so Ansible takes each out of
    the play, its rescue and always included. The reports are the playbook's own, before it exits (not a
    guard's later story of a killed controller), and no node stands out."""
    hosts = nodes[:2]
    for host in hosts:
        simcluster.run(host, ["ip", "link", "set", simcluster.ifname, "down"])
    try:
        proc = run_train(simcluster, JAX_MULTI, tmp_path, hosts)
    finally:
        for host in hosts:
            simcluster.run(host, ["ip", "link", "set", simcluster.ifname, "up"], check=False)
    assert proc.returncode != 0
    cause = "no node answered over SSH (node[1-2]); no node stands out"
    assert f"VERDICT: FAIL: stopped in preflight: {cause}" in proc.stdout, proc.stdout[-3000:]
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["headline"].startswith(f"FAIL: stopped in preflight: {cause}")
    assert document["stop"]["hosts"] == [] and document["culprit"] is None
    assert document["stop"]["never_started"] == hosts
    for host in hosts:
        assert any(line.startswith(f"{host}: unreachable (ssh: connect to host") for line in document["stop"]["lines"])
    assert 'classname="clusterval.training.run" name="stopped in preflight"' in (tmp_path / "junit.xml").read_text()
    assert cause in (tmp_path / "report.html").read_text()
    guard_out = next((tmp_path / "watch").glob("*/guard.out"))
    wait_for(lambda: not alive_guard(guard_out.parent), 60)
    assert json.loads((tmp_path / "results.json").read_text())["headline"] == document["headline"], "rewritten"
    assert_no_training_container(simcluster, hosts)


def alive_guard(watch_dir) -> bool:
    """Whether a process still works in the run's watch directory (the guard's working directory)."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(proc / "cwd") == str(watch_dir):
                return True
        except OSError:
            continue
    return False
