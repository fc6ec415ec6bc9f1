"""Isolation on the simulated cluster (playbooks/isolate.yml): a lock-step job slowed on one node, whose verdict
can name no node (every node reports the slowest's pace), is re-run for a few steps on halves of the nodes and
the isolation names that node; nothing is left running on any node.

The slow node is simulated: the stand-in's CLUSTERVAL_SIM_SLOW_FACTOR in node3's container only (a host variable
of a second inventory file: container_spec_overrides.env), so it follows node3 whatever its rank in a subset.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest
from test_train_e2e import ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, assert_no_training_container, sim_env, wait_for

from ansible_collections.clusterval.training.plugins.module_utils import _isolate

pytestmark = pytest.mark.cluster

STEPS = 6  # MaxText's warm-up is 3 steps: 3 steady steps judge each subset


def slow_node_inventory(path, node: str, factor: str = "4") -> str:
    """node3's containers get the simulator's slow factor (beside the simulated inventory's own overrides)."""
    overrides = {"capabilities": [], "groups": [], "ulimits": ["stack:67108864:67108864"],
                 "env": {"CLUSTERVAL_SIM_SLOW_FACTOR": factor}}
    path.write_text(json.dumps({"all": {"hosts": {node: {"container_spec_overrides": overrides}}}}))
    return str(path)


def isolate_processes(run_dir) -> list[str]:
    """ansible-playbook processes of this isolation still alive on the controller."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                line = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(run_dir) in line:
            found.append(line)
    return found


def test_a_lock_step_job_slowed_on_one_node_is_isolated_to_that_node(simcluster, four_nodes, tmp_path):
    slow = four_nodes[2]
    inventories = [str(simcluster.inventory), slow_node_inventory(tmp_path / "slow.json", slow)]
    # The command a verdict recommends, as it gives it, with the simulated run's short steps.
    advice = _isolate.isolation_advice("slow as a whole", inventories, JAX_MULTI, ":".join(four_nodes))
    argv = shlex.split(advice.split("rounds): ", 1)[1])
    assert argv[0] == "ansible-playbook" and "clusterval.training.isolate" in argv
    run_dir = tmp_path / "isolation"
    argv = [ANSIBLE_PLAYBOOK, *argv[1:], "-e", json.dumps({
        "training_run_dir": str(run_dir), "isolate_iterations": STEPS,
        "training_overrides_extra": sim_env(STEP_SECONDS="0.15")})]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False)
    elapsed = time.monotonic() - started
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    assert f"ISOLATION: {slow} named: {slow} is bad in every group it joined" in out, out[-3000:] + proc.stderr
    document = json.loads((run_dir / "isolation.json").read_text())
    assert document["conclusion"]["named"] == [slow] and document["simulated"] is True
    rounds = [[(g["hosts"], g["judgement"]) for g in entry["groups"]] for entry in document["rounds"]]
    a, b, c, d = four_nodes
    assert rounds == [[([a, b], "healthy"), ([c, d], "slow")], [([a, c], "slow"), ([b, d], "healthy")]], rounds
    # each round's evidence on the console: the subset, its step time and throughput, the judgement
    assert f"isolate round 2 {c} (with {a}, healthy): SLOW (step " in out
    assert re.search(r"isolate round 1 %s: SLOW \(step [0-9.]+ s\) - [0-9.]+ tokens_per_sec_per_gpu, [0-9]+%% below %s"
                     % (re.escape(_isolate.label([c, d])), re.escape(_isolate.label([a, b]))), out), out[-3000:]
    for entry in document["rounds"]:
        for group in entry["groups"]:
            assert (run_dir / "rounds" / group["name"] / "results.json").is_file()
    assert_no_training_container(simcluster, four_nodes)
    # Each sub-run's report guard exits within a poll of its controller's end.
    wait_for(lambda: isolate_processes(run_dir) == [], 10)
    print(f"isolation of 4 nodes: {len(document['rounds'])} rounds, {elapsed:.0f}s")
