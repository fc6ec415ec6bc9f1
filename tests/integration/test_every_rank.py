# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every rank's end is required: Megatron-LM prints on its last rank only, and a silent rank 0 that hangs
fails the run, named, although the printing node reached its final step."""
from __future__ import annotations

import json

from test_train_e2e import (MEGATRON_ARGS, MEGATRON_MULTI, assert_no_training_container, run_train, sim_env,
                            watch_file)


def test_a_hung_silent_rank_0_fails_the_run_naming_it(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    proc = run_train(simcluster, MEGATRON_MULTI, tmp_path, nodes, extra=sim_env(HANG_AT_STEP="3", HANG_RANK="0"),
                     args=MEGATRON_ARGS)
    assert proc.returncode != 0
    assert "VERDICT: PASS" not in proc.stdout
    rank0 = json.loads(watch_file(tmp_path, f"{nodes[0]}.json").read_text())
    assert rank0["failed"] and rank0["reason"] == "hang", rank0["msg"]
    assert rank0["msg"].startswith(f"{nodes[0]}:") and "did not exit" in rank0["msg"]
    # Rank 0 and the printing node both wait at the end; nothing singles either out (both processes sleep), so
    # the verdict names neither, and never the printing node, with where each stopped.
    outcome = json.loads(watch_file(tmp_path, "outcome.json").read_text())
    if outcome["culprit"] is None:
        assert "no node stands out" in outcome["run_cause"]["text"]
        assert set(outcome["run_cause"]["evidence"]) == set(nodes)
        assert "VERDICT: FAIL: hang: all 2 nodes stopped" in proc.stdout
    else:
        assert outcome["culprit"]["host"] == nodes[0], outcome
    assert_no_training_container(simcluster, nodes)
