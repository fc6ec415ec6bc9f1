# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The dead man's switch: a job nobody watches any more ends by itself on every node.

Every rank hangs, so only the lease can end the job: the controller is killed (SIGKILL) or terminated
(SIGTERM) mid-run, and no training container may run on any node after the lease timeout of the
simulated inventory plus the supervisor's stop grace and a margin. Killed while the containers start, the
containers that came up stop when their lease lapses, and remove the HF token's copy.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

import pytest

from test_train_e2e import (ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, record_timing, sim_env, train_argv,
                            training_containers, training_underway)

# inventories/simulated: train_lease_timeout 20; the container's stop grace is 10 s.
LEASE_TIMEOUT_S = 20
# Only a guard against a job that never stops: the time it takes is a figure (BENCHMARKS.md), never a bound.
NEVER_STOPS_S = 600


@pytest.fixture
def nodes(simcluster) -> list[str]:
    return list(simcluster.nodes[:4])


def controller_processes(run_dir) -> list[int]:
    """ansible-playbook processes of this run (its workers included: Ansible puts them in their own session), not
    its guard's collection of the nodes' logs (clusterval.training.collect_logs)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        if entry.isdigit() and "ansible-playbook" in cmdline and str(run_dir) in cmdline \
                and "collect_logs" not in cmdline:
            found.append(int(entry))
    return found


def running_anywhere(cluster, nodes: list[str]) -> list[str]:
    return [f"{node}:{name}" for node in nodes for name in training_containers(cluster, node)
            if cluster.docker(node, "inspect", "-f", "{{.State.Running}}", name, check=False).stdout.strip() == "true"]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_every_job_stops_within_the_lease_timeout_when_the_controller_goes(simcluster, nodes, tmp_path, how):
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, nodes, sim_env(HANG_AT_STEP="3", STEP_SECONDS="0.5"),
                      ["-e", '{"train_hang_timeout": 600}'])
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not training_underway(tmp_path):
            assert time.monotonic() < deadline and proc.poll() is None, "the run never got going"
            time.sleep(0.2)
        time.sleep(3)
        assert running_anywhere(simcluster, nodes), "the hung job should still run"
        proc.send_signal(how)
        stopped_at = time.monotonic()
        proc.wait(timeout=60)
        while running_anywhere(simcluster, nodes):
            assert time.monotonic() - stopped_at < NEVER_STOPS_S, running_anywhere(simcluster, nodes)
            time.sleep(1)
    finally:
        if proc.poll() is None:
            proc.kill()
    elapsed = time.monotonic() - stopped_at
    assert elapsed > LEASE_TIMEOUT_S / 2, f"stopped after {elapsed:.0f}s: not by the lease?"
    record_timing(f"every job stopped by the lease after the controller's {how.name}", elapsed)
    exited = [simcluster.docker(node, "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
              for node in nodes for name in training_containers(simcluster, node)]
    # 124: the supervisor stopped the job (no container left at all is fine too: a teardown on SIGTERM).
    assert all(code == "124" for code in exited), exited
    # A worker left behind by a killed ansible-playbook would renew the lease: it must have exited by now.
    assert controller_processes(tmp_path) == [], "processes of the killed controller are still there"
    # The lock of the killed run stays until a teardown: the next test's run would be refused.
    cleanup = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(simcluster.inventory), str(REPO / "playbooks" / "teardown.yml"),
                              "-e", "training_hosts=" + ":".join(nodes)], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300, check=False)
    assert cleanup.returncode == 0, cleanup.stdout[-2000:]


def status_streams(cluster) -> set:
    return set((cluster.shared_dir / ".clusterval-status").glob("*/nodes/*.jsonl"))


def last_record(stream) -> dict:
    lines = [line for line in stream.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1])


def test_a_controller_killed_during_the_container_start_leaves_no_container_and_no_token_copy(
        simcluster, nodes, tmp_path):
    """kill -9 while the containers start (one at a time: forks 1): the containers that came up never see the
    gang start; each stops when its lease lapses (the gang timeout is an hour: only the lease can stop it within
    the test's guard) and removes the HF token's copy the controller handed over."""
    token = tmp_path / "hf_token"
    token.write_text("hf_clusterval_killed")
    argv = train_argv(simcluster, JAX_MULTI, tmp_path / "run", nodes, None,
                      ["-e", f"training_hf_token_controller_file={token}", "-e", '{"train_gang_timeout": 3600}'])
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS="1")
    before = status_streams(simcluster)
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        guard = time.monotonic() + NEVER_STOPS_S
        while not status_streams(simcluster) - before:
            assert time.monotonic() < guard and proc.poll() is None, "no container ever came up"
            time.sleep(0.1)
        proc.kill()
        proc.wait(timeout=60)
        while running_anywhere(simcluster, nodes):
            assert time.monotonic() < guard, running_anywhere(simcluster, nodes)
            time.sleep(1)
    finally:
        if proc.poll() is None:
            proc.kill()
    started = {stream.stem: stream for stream in status_streams(simcluster) - before}
    assert started and len(started) < len(nodes), f"not killed during the container start: {sorted(started)}"
    for node, stream in started.items():
        (name,) = training_containers(simcluster, node)
        run_id = simcluster.docker(node, "inspect", "-f", '{{index .Config.Labels "clusterval.run_id"}}',
                                   name).stdout.strip()
        assert last_record(stream)["reason"] == "lease", f"{node}: {last_record(stream)}"
        assert "start" not in [json.loads(line)["t"] for line in stream.read_text().splitlines()], node
        assert simcluster.docker(node, "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip() == "124"
        copy = f"/tmp/clusterval-logs/clusterval/{run_id}/.hf_token"
        assert simcluster.ssh(node, f"test -e {copy}", check=False).returncode == 1, f"{node} kept {copy}"
    for node in set(nodes) - set(started):
        # Preflight handed it over; no supervisor ever ran there to remove it.
        copy = f"/tmp/clusterval-logs/clusterval/{run_id}/.hf_token"
        assert simcluster.ssh(node, f"test -e {copy}", check=False).returncode == 0, f"{node} has no {copy}"
    assert controller_processes(tmp_path) == [], "processes of the killed controller are still there"
    cleanup = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(simcluster.inventory), str(REPO / "playbooks" / "teardown.yml"),
                              "-e", "training_hosts=" + ":".join(nodes)], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300, check=False)
    assert cleanup.returncode == 0, cleanup.stdout[-2000:]
    for node in nodes:
        assert simcluster.ssh(node, "ls -a /tmp/clusterval-logs/clusterval/*/ 2>/dev/null | grep -c '^.hf_token$'",
                              check=False).stdout.strip() == "0", f"the teardown left {node} a token copy"


def test_a_run_after_ctrl_c_on_the_same_nodes_starts_without_a_manual_teardown(simcluster, nodes, tmp_path):
    """After Ctrl-C the supervisors stop their jobs when the lease lapses, and the run's guard brings back the
    nodes' logs before it writes the reports; the next run finds the interrupted run's containers exited and its
    lease lapsed, takes its lock as stale, says so, and trains."""
    first_dir, second_dir = tmp_path / "interrupted", tmp_path / "next"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = train_argv(simcluster, JAX_MULTI, first_dir, nodes, sim_env(HANG_AT_STEP="3", STEP_SECONDS="0.5"),
                      ["-e", '{"train_hang_timeout": 600}'])
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        guard = time.monotonic() + NEVER_STOPS_S
        while not training_underway(first_dir):
            assert time.monotonic() < guard and proc.poll() is None, "the run never got going"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=NEVER_STOPS_S)
        while running_anywhere(simcluster, nodes):
            assert time.monotonic() < guard, running_anywhere(simcluster, nodes)
            time.sleep(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    interrupted = json.loads((first_dir / "plan.json").read_text())["run_id"]
    assert all(training_containers(simcluster, node) for node in nodes), "no teardown ran: the containers exited"
    # The guard fetched the logs the teardown never collected, then wrote the reports, which link only those.
    while not (first_dir / "watch" / interrupted / "reported.json").exists():
        assert time.monotonic() < guard, "the guard never wrote the reports"
        time.sleep(1)
    for node in nodes:
        assert "completed step: " in (first_dir / "logs" / node / "training.log").read_text(), node
    links = re.findall(r'href="(logs/[^"]+)"', (first_dir / "report.html").read_text())
    assert links and all((first_dir / urllib.parse.unquote(link)).exists() for link in links), links
    second = subprocess.run(train_argv(simcluster, JAX_MULTI, second_dir, nodes), cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=NEVER_STOPS_S, check=False)
    try:
        assert second.returncode == 0, second.stdout[-3000:]
        assert f"took over the stale lock of run {interrupted}" in second.stdout, second.stdout[-3000:]
        assert "its lease was last renewed" in second.stdout
    finally:
        cleanup = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(simcluster.inventory),
                                  str(REPO / "playbooks" / "teardown.yml"), "-e", "training_hosts=" + ":".join(nodes)],
                                 cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert cleanup.returncode == 0, cleanup.stdout[-2000:]
