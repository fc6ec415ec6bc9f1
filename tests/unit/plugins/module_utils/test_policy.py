"""The verdict's policy has one owner (issue 29, item 4): decided once, written with the run, and the guard of an
interrupted run judges by it as training_assert judges the finished run."""
from __future__ import annotations

import json

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _policy, _report_guard, _run_watch, _verdict
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._results import LAUNCHED_FILE
from ansible_collections.clusterval.training.plugins.module_utils._run_records import new_state

RUN_ID = "20261129T000000Z-abc123-c"
HOSTS = ["node1", "node2", "node3", "node4"]
# node4 is 30 % slower than the others: a straggler at 10 %, not at 50 %.
SPEED = {"node1": 1000.0, "node2": 1000.0, "node3": 1000.0, "node4": 700.0}
# tflops has no threshold (<changeme>): reported, or a failure when thresholds are required.
PLAN = {"run_id": RUN_ID, "config_name": "c", "framework": "maxtext", "model": "m", "gpu_arch": "mi300x",
        "mode": "multi_node", "final_step": 9, "total_steps": 10, "warmup_steps": 3,
        "thresholds": [{"metric": "tflops_per_sec_per_gpu", "min": None}],
        "nodes": {host: {"host": host, "prints_steps": True} for host in HOSTS}}
STARTED_WITH = {"straggler_pct": 50.0, "warmup_steps": 1, "require_thresholds": True}


def finished_state(host):
    steps = [{"step": n, "loss": 10.0 - n / 10, "tokens_per_sec_per_gpu": SPEED[host],
              "tflops_per_sec_per_gpu": SPEED[host] / 10, "seconds": 1.0} for n in range(10)]
    return dict(new_state(host, 0.0), steps=steps, last_step=9, completed=True, exit_code=0, done=True,
                failed=False, reason="completed")


def watched_run(tmp_path):
    directory = _run_watch.watch_dir(str(tmp_path), RUN_ID)
    states = {host: finished_state(host) for host in HOSTS}
    memory = {"states": states, "events": []}
    _run_watch.write_json_atomically(f"{directory}/{_run_watch.RUN_FILE}", memory)
    return directory


def test_the_guard_judges_an_interrupted_run_as_the_finished_run_would(tmp_path):
    watched_run(tmp_path)
    record = _policy.launch_record(_policy.Policy.of(STARTED_WITH), 0.0)
    _report_guard.mark(str(tmp_path), RUN_ID, LAUNCHED_FILE, record)
    guarded = _report_guard.watched_verdict(dict(PLAN), str(tmp_path))
    concluded = _run_watch.conclude(str(tmp_path), RUN_ID, HOSTS)
    # training_assert's own options, as the results role gives them at the end of the finished run
    finished = _verdict.verdict(dict(PLAN), concluded.pop("states"), 50.0, 1, True, concluded)
    assert (guarded["verdict"], guarded["failures"]) == (finished["verdict"], finished["failures"])
    assert guarded["require_thresholds"] is True and guarded["warmup_steps"] == finished["warmup_steps"] == 1
    assert not any("straggler" in line for line in guarded["failures"]), guarded["failures"]


def test_a_run_that_wrote_no_policy_is_judged_by_the_defaults(tmp_path):
    watched_run(tmp_path)
    guarded = _report_guard.watched_verdict(dict(PLAN), str(tmp_path))
    assert guarded["require_thresholds"] is False and guarded["warmup_steps"] == 3
    assert any(line.startswith("node4: ") for line in guarded["failures"]), guarded["failures"]


def test_the_policy_round_trips_and_nulls_keep_the_defaults(tmp_path):
    policy = _policy.Policy.of(dict(STARTED_WITH, baseline=None, baseline_tolerance={"default": 3}))
    _report_guard.mark(str(tmp_path), RUN_ID, LAUNCHED_FILE, _policy.launch_record(policy, 0.0))
    directory = _run_watch.watch_dir(str(tmp_path), RUN_ID)
    assert _policy.read(directory) == policy
    assert json.loads((tmp_path / "watch" / RUN_ID / LAUNCHED_FILE).read_text())["policy"]["straggler_pct"] == 50.0
    assert _policy.read(str(tmp_path / "none")) == _policy.Policy()
    assert _policy.Policy().straggler_pct == _policy.POLICY_SPEC["straggler_pct"]["default"]


def test_the_actions_take_the_policy_by_the_same_options():
    from ansible_collections.clusterval.training.plugins.action import training_assert
    assert {key: training_assert.ARGUMENT_SPEC[key] for key in _policy.POLICY_SPEC} == _policy.POLICY_SPEC
    assert _policy.checked({"straggler_pct": "50", "require_thresholds": "true"}) == _policy.Policy(50.0, None, True)
    with pytest.raises(ConfigError, match=r"^policy: expected training_assert.s options"):
        _policy.checked({"straggler_pct": "many"})
