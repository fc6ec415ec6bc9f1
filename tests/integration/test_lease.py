# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The dead man's switch: a job nobody watches any more ends by itself on every node.

Every rank hangs, so only the lease can end the job: the controller is killed (SIGKILL) or terminated
(SIGTERM) mid-run, and no training container may run on any node after the lease timeout of the
simulated inventory plus the supervisor's stop grace and a margin.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

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
    """ansible-playbook processes of this run (its workers included: Ansible puts them in their own session)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        if entry.isdigit() and "ansible-playbook" in cmdline and str(run_dir) in cmdline:
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
