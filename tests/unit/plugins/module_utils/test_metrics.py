from __future__ import annotations

import math

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _metrics, _steady


def maxtext_steps(tokens=8600.0, last=29, loss0=12.0, drop=0.1):
    steps = []
    for step in range(last + 1):
        rate = tokens * (20 if step == 1 else 0.1 if step == 0 else 1.0)
        steps.append({"step": step, "seconds": 5.6, "tokens_per_sec_per_gpu": rate,
                      "tflops_per_sec_per_gpu": rate / 64.0, "loss": loss0 - drop * step})
    return steps


def plan(**overrides):
    base = {"framework": "maxtext", "final_step": 29, "warmup_steps": 3, "simulated": False,
            "thresholds": [{"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 900.0, "set": True}],
            "nodes": {"node1": {"prints_steps": True}, "node2": {"prints_steps": True}}}
    base.update(overrides)
    return base


def node(steps=None, **extra):
    state = {"steps": maxtext_steps() if steps is None else steps, "errors": [], "exit_code": 0}
    state.update(extra)
    return state


def statuses(outcome, check):
    return {(c["node"], c.get("metric")): c["status"] for c in outcome["checks"] if c["check"] == check}


class TestAggregates:
    def test_warmup_steps_are_skipped_by_step_number(self):
        steady = _metrics.steady_steps(maxtext_steps(), 3)
        assert steady[0]["step"] == 3 and len(steady) == 27

    def test_aggregate_mean_median_min_p5(self):
        steps = [{"step": i, "x": float(v)} for i, v in enumerate([10, 20, 30, 40, float("nan")])]
        stats = _metrics.aggregate(steps, "x")
        assert stats == {"mean": 25.0, "median": 25.0, "min": 10.0, "max": 40.0, "p5": 10.0, "count": 4,
                         "first_step": 0, "last_step": 3}

    def test_summary_is_keyed_like_result_dict_and_script_summary_fills_gaps(self):
        steps = [{"step": i, "throughput_per_gpu": 500.0, "elapsed_time_per_iteration": 1000.0} for i in range(1, 6)]
        summary = _steady.summarize(steps, "megatron", 2, {"tokens_per_gpu": 12786.9, "throughput_per_gpu": 1.0})
        assert summary == {"throughput_per_gpu": 500.0, "elapsed_time_per_iteration": 1000.0, "tokens_per_gpu": 12786.9}

    def test_direction_per_metric(self):
        assert _metrics.direction_of("tokens_per_gpu") == "higher"
        assert _metrics.direction_of("elapsed_time_per_iteration") == "lower"
        assert _metrics.direction_of("mem_usage") == "lower"


class TestThresholds:
    def test_pass_and_fail_lines_name_node_metric_and_window(self):
        slow = maxtext_steps(tokens=812.4)
        outcome = _metrics.evaluate(plan(), {"node1": node(), "node2": node(slow)}, straggler_pct=99.0)
        assert outcome["verdict"] == "FAIL"
        assert outcome["failures"] == ["node2: tokens_per_sec_per_gpu 812.4 < 900.0 (min, steady mean over steps 3-29)"]

    def test_lower_is_better_result_dict_value(self):
        thresholds = [{"metric": "elapsed_time_per_iteration", "value": 10000.0, "set": True}]
        steps = [{"step": i, "elapsed_time_per_iteration": 10500.0, "loss": 5.0 - i} for i in range(1, 31)]
        outcome = _metrics.evaluate(plan(framework="megatron", final_step=30, thresholds=thresholds,
                                         nodes={"n": {"prints_steps": True}}), {"n": node(steps)})
        assert statuses(outcome, "threshold") == {("n", "elapsed_time_per_iteration"): "fail"}
        assert "10500.0 > 10000.0 (max" in outcome["failures"][0]

    @pytest.mark.parametrize("threshold,status", [
        ({"kind": "within", "value": 8700.0, "pct": 5}, "pass"),
        ({"kind": "within", "value": 10000.0, "pct": 5}, "fail"),
        ({"kind": "max", "value": 9000.0}, "pass"),
        ({"kind": "info", "value": None}, "info"),
        ({"kind": "min", "value": None, "set": False}, "no_threshold"),
        ({"kind": "min", "value": 900.0, "set": False}, "no_threshold"),
        ({"kind": "median", "value": 1.0}, "fail"),
    ])
    def test_threshold_kinds(self, threshold, status):
        threshold = dict({"metric": "tokens_per_sec_per_gpu", "set": True}, **threshold)
        outcome = _metrics.evaluate(plan(thresholds=[threshold]), {"node1": node()})
        assert statuses(outcome, "threshold") == {("node1", "tokens_per_sec_per_gpu"): status}

    def test_min_ratio_against_another_metric(self):
        threshold = {"metric": "tokens_per_sec_per_gpu", "kind": "min_ratio", "of": "tflops_per_sec_per_gpu",
                     "value": 60.0, "set": True}
        outcome = _metrics.evaluate(plan(thresholds=[threshold]), {"node1": node()})
        check = [c for c in outcome["checks"] if c["check"] == "threshold"][0]
        assert check["status"] == "pass" and check["actual"] == pytest.approx(64.0)

    def test_missing_metric_fails(self):
        threshold = {"metric": "tokens_per_gpu", "kind": "min", "value": 1.0, "set": True}
        outcome = _metrics.evaluate(plan(thresholds=[threshold]), {"node1": node()})
        assert outcome["verdict"] == "FAIL"
        assert outcome["failures"] == ["node1: tokens_per_gpu missing: no value after warm-up (min)"]

    def test_script_summary_is_used_when_steps_lack_the_metric(self):
        threshold = {"metric": "tokens_per_gpu", "kind": "min", "value": 12000.0, "set": True}
        outcome = _metrics.evaluate(plan(thresholds=[threshold]), {"node1": node(summary={"tokens_per_gpu": 12786.9})})
        check = [c for c in outcome["checks"] if c["check"] == "threshold"][0]
        assert check["status"] == "pass" and "training script summary" in check["detail"]


class TestRunChecks:
    def test_convergence_needs_decreasing_finite_loss(self):
        rising = [dict(s, loss=1.0 + s["step"]) for s in maxtext_steps()]
        with_nan = maxtext_steps()
        with_nan[10]["loss"] = float("nan")
        outcome = _metrics.evaluate(plan(), {"node1": node(rising), "node2": node(with_nan)})
        assert statuses(outcome, "convergence") == {("node1", "loss"): "fail", ("node2", "loss"): "fail"}
        assert "node2: loss nan at step 10" in outcome["failures"]

    def test_single_loss_value_cannot_prove_convergence(self):
        check = _metrics.judge_convergence("n", [{"step": 1, "loss": 3.0}])
        assert check["status"] == "fail"

    def test_noisy_but_decreasing_by_slope(self):
        losses = [10.0, 9.0, 9.5, 8.0, 8.7, 7.5, 10.5]
        check = _metrics.judge_convergence("n", [{"step": i, "loss": v} for i, v in enumerate(losses)])
        assert check["status"] == "pass"

    def test_completion_on_every_node_that_prints_steps(self):
        outcome = _metrics.evaluate(plan(), {"node1": node(), "node2": node(maxtext_steps(last=12))})
        assert statuses(outcome, "completion") == {("node1", "step"): "pass", ("node2", "step"): "fail"}
        assert "node2: stopped at step 12 of 29" in outcome["failures"]

    def test_megatron_silent_node_is_judged_by_exit_status_and_errors(self):
        p = plan(framework="megatron", thresholds=[], nodes={"node1": {"prints_steps": False},
                                                             "node2": {"prints_steps": True}})
        steps = [{"step": i, "throughput_per_gpu": 590.0, "loss": 10.0 - i * 0.1} for i in range(1, 30)]
        outcome = _metrics.evaluate(p, {"node1": node([]), "node2": node(steps)})
        assert outcome["verdict"] == "PASS"
        assert statuses(outcome, "completion")[("node1", "exit_code")] == "pass"

    def test_errors_exit_code_and_watch_reason_fail(self):
        error = {"class": "gpu", "line": 1234, "lineno": 1234, "text": "HW Exception by GPU node-9 reason :GPU Hang"}
        outcome = _metrics.evaluate(plan(), {
            "node1": node(errors=[error], log_path="/runs/x/training.log"),
            "node2": node(exit_code=137, reason="hang", msg="no new step for 600 s")})
        assert "node1: gpu at line 1234 of /runs/x/training.log: HW Exception by GPU node-9 reason :GPU Hang" in outcome["failures"]
        assert "node2: training exited with status 137" in outcome["failures"]
        assert "node2: no new step for 600 s" in outcome["failures"]
        planned = plan(nodes={"node1": {"prints_steps": True, "log_path": "/home/root/LOGS/r/training.log"}})
        outcome = _metrics.evaluate(planned, {"node1": node(errors=[error])})
        assert outcome["failures"][0].startswith("node1: gpu at line 1234 of /home/root/LOGS/r/training.log: ")

    def test_stragglers(self):
        nodes = {"a": node(maxtext_steps(8600)), "b": node(maxtext_steps(8500)), "c": node(maxtext_steps(7000))}
        outcome = _metrics.evaluate(plan(nodes={}), nodes, straggler_pct=10)
        assert statuses(outcome, "straggler") == {("a", "tokens_per_sec_per_gpu"): "pass",
                                                  ("b", "tokens_per_sec_per_gpu"): "pass",
                                                  ("c", "tokens_per_sec_per_gpu"): "fail"}

    def test_no_nodes_fails(self):
        assert _metrics.evaluate(plan(), {})["verdict"] == "FAIL"

    def test_series_are_bounded_and_throughput_skips_warmup(self):
        steps = maxtext_steps(last=5000)
        outcome = _metrics.evaluate(plan(final_step=5000), {"node1": node(steps)})
        series = outcome["series"]["node1"]
        assert len(series["loss"]) == _metrics.MAX_POINTS_PER_CURVE
        assert series["loss"][0] == [0, 12.0] and series["loss"][-1][0] == 5000
        assert series["tokens_per_sec_per_gpu"][0][0] == 3

    def test_small_metrics_for_set_stats(self):
        outcome = _metrics.evaluate(plan(simulated=True), {"node1": node()})
        metrics = _metrics.small_metrics(plan(run_id="r1"), outcome, "/runs/r1")
        assert metrics["verdict"] == "PASS" and metrics["run_dir"] == "/runs/r1" and metrics["run_id"] == "r1"
        assert metrics["nodes"]["node1"]["steady_mean"]["tokens_per_sec_per_gpu"] == pytest.approx(8600.0)
        assert outcome["simulated"] is True
        assert all(not (isinstance(v, float) and math.isnan(v)) for v in metrics["cluster"]["loss"].values())


# -- whole-run metrics of the suite's threshold files ------------------------------------------

def two_node_plan(thresholds, scaling=None):
    return {"framework": "maxtext", "final_step": 9, "warmup_steps": 2, "gpus_per_node": 8,
            "jobs": [{"name": "job0", "hosts": ["n1", "n2"], "nnodes": 2}], "scaling_baseline": scaling,
            "thresholds": thresholds, "nodes": {"n1": {"job": "job0", "prints_steps": True},
                                                "n2": {"job": "job0", "prints_steps": True}}}


def timed_steps(seconds, losses, tokens=1000.0):
    return [{"step": step, "seconds": s, "loss": loss, "tokens_per_sec_per_gpu": tokens}
            for step, (s, loss) in enumerate(zip(seconds, losses))]


def test_step_times_after_warm_up_with_interpolated_percentiles_like_the_suite():
    steps = timed_steps([30.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], [10.0 - s for s in range(12)])
    metrics = _metrics.run_metrics(steps, _metrics.steady_steps(steps, 2), two_node_plan([]), "n1")
    assert metrics["step_time_mean_ms"] == pytest.approx(5500.0), "the 30 s first step (compile) is warm-up"
    assert metrics["step_time_seconds"] == pytest.approx(5.5)
    assert metrics["step_time_p50_ms"] == pytest.approx(5500.0)
    assert metrics["step_time_p95_ms"] == pytest.approx(9550.0), "numpy's linear interpolation"
    assert (metrics["final_loss"], metrics["loss_decreased"]) == (-1.0, 1.0)


def test_the_jobs_tokens_per_second_and_its_scaling_efficiency():
    steps = timed_steps([1.0] * 6, [5.0] * 6, tokens=1000.0)
    plan = two_node_plan([], scaling={"tokens_per_sec_total": 10000.0, "num_nodes": 1})
    metrics = _metrics.run_metrics(steps, _metrics.steady_steps(steps, 2), plan, "n2")
    assert metrics["tokens_per_sec_total"] == 16000.0, "1000 tokens/s/GPU x 8 GPUs x 2 nodes"
    assert metrics["scaling_efficiency_pct"] == pytest.approx(80.0), "16000 / (2 x 10000)"
    assert metrics["loss_decreased"] == 0.0, "a flat loss did not decrease"
    assert "scaling_efficiency_pct" not in _metrics.run_metrics(steps, steps, two_node_plan([]), "n1")


def test_threshold_file_metrics_are_judged_per_node_and_info_ones_never_fail():
    thresholds = [{"metric": "final_loss", "kind": "max", "value": 5.0, "set": True},
                  {"metric": "loss_decreased", "kind": "min", "value": 1, "set": True},
                  {"metric": "step_time_p95_ms", "kind": "max", "value": 1500.0, "set": True},
                  {"metric": "eval_loss", "kind": "info", "value": None, "set": False}]
    good = {"steps": timed_steps([1.0] * 10, [9.0 - s * 0.5 for s in range(10)]), "last_step": 9, "exit_code": 0}
    flat = {"steps": timed_steps([1.0] * 8 + [2.0, 2.0], [6.0] * 10), "last_step": 9, "exit_code": 0}
    outcome = _metrics.evaluate(two_node_plan(thresholds), {"n1": good, "n2": flat})
    failed = {(c["node"], c["metric"]) for c in outcome["checks"] if c["status"] == "fail"}
    assert failed == {("n2", "final_loss"), ("n2", "loss_decreased"), ("n2", "step_time_p95_ms"), ("n2", "loss")}
    eval_loss = [c for c in outcome["checks"] if c["metric"] == "eval_loss"]
    assert {c["status"] for c in eval_loss} == {"info"} and "not measured" in eval_loss[0]["detail"]
    assert outcome["summary"]["nodes"]["n1"]["run"]["final_loss"] == 4.5
    assert outcome["summary"]["cluster"]["final_loss"]["max"] == 6.0
