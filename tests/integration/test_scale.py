# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The cluster watch at more nodes than forks, and its job events under ansible-runner.

Needs 8 simulated nodes: CLUSTERVAL_SIMCLUSTER_NODES=8 (skipped with fewer).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from test_train_e2e import (JAX_MULTI, REPO, assert_no_training_container, record_timing, run_train, sim_env,
                            train_argv, watch_file)

NEEDED = 8


@pytest.fixture
def eight(simcluster) -> list[str]:
    if len(simcluster.nodes) < NEEDED:
        pytest.skip(f"needs {NEEDED} simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES={NEEDED})")
    return list(simcluster.nodes[:NEEDED])


def test_eight_nodes_with_two_forks_all_progress_and_a_crash_on_the_last_is_named(simcluster, eight, tmp_path):
    last = eight[-1]
    started = time.monotonic()
    proc = run_train(simcluster, JAX_MULTI, tmp_path, eight,
                     extra=sim_env(CRASH_AT_STEP="6", CRASH_RANK=str(len(eight) - 1)), args=["--forks", "2"])
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    abort = json.loads(watch_file(tmp_path, "abort.json").read_text())
    assert abort["host"] == last, abort
    states = {host: json.loads(watch_file(tmp_path, f"{host}.json").read_text()) for host in eight}
    assert all(state["last_step"] is not None and state["last_step"] >= 3 for state in states.values()), \
        {h: s["last_step"] for h, s in states.items()}
    progress = json.loads(watch_file(tmp_path, "progress.json").read_text())
    assert progress["rank_start_spread_s"] < 5, progress
    assert f"{last}:" in proc.stdout
    record_timing("8 nodes, 2 forks: a crash on the last named (whole run)", elapsed)
    assert_no_training_container(simcluster, eight)


def watch_events(hosts: list[str], simcluster, tmp_path: Path) -> tuple[int, int]:
    """(events of the watch task, its polls) of one passing run under ansible-runner."""
    ansible_runner = pytest.importorskip("ansible_runner")
    argv = train_argv(simcluster, JAX_MULTI, tmp_path / "run", hosts)
    extra = json.loads(argv[-1])
    extra["training_config"] = JAX_MULTI
    os.environ["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    tmp_path.mkdir(parents=True, exist_ok=True)
    private = tempfile.mkdtemp(dir=tmp_path)
    runner = ansible_runner.run(private_data_dir=private, playbook=str(REPO / "playbooks" / "train.yml"),
                                inventory=str(simcluster.inventory), extravars=extra, quiet=True,
                                project_dir=str(REPO))
    assert runner.rc == 0, runner.stdout.read()[-3000:]
    ours = [e for e in runner.events
            if "follow the whole cluster" in str((e.get("event_data") or {}).get("task", "")).lower()
            and e.get("event", "").startswith("runner_")]
    final = [e for e in ours if e["event"] in ("runner_on_ok", "runner_on_failed")]
    polls = final[0]["event_data"]["res"].get("attempts", 1) if final else 0
    return len(ours), polls


def test_job_events_grow_with_polls_not_with_nodes(simcluster, eight, tmp_path):
    two, two_polls = watch_events(eight[:2], simcluster, tmp_path / "two")
    six, six_polls = watch_events(eight[:6], simcluster, tmp_path / "six")
    assert 0 < two <= two_polls + 1 and 0 < six <= six_polls + 1, (two, two_polls, six, six_polls)
