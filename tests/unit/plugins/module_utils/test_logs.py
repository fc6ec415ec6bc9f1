from __future__ import annotations

import math

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _logs

from real_logs import SYNTHETIC_LOGS, excerpts

MX = "maxtext_real.txt"
MG = "megatron_real.txt"
PR = "primus_real.txt"
NX = "nxdt_real.txt"


def parse(text, framework="auto", **kwargs):
    return _logs.parse_text(text, framework, **kwargs)


def steps_of(result):
    return [s["step"] for s in result.steps]


class TestMaxTextReal:
    def test_mx05_every_step_with_values(self):
        result = parse(excerpts(MX)["MX-05"])
        assert result.framework == "maxtext"
        assert steps_of(result) == list(range(10))
        last = result.steps[-1]
        assert last == {"step": 9, "seconds": 5.667, "tflops_per_sec_per_gpu": 134.924,
                        "tokens_per_sec_per_gpu": 8672.758, "total_weights": 196608.0, "loss": 10.374}
        assert result.steps[1]["tflops_per_sec_per_gpu"] == 2400.734
        assert result.errors == []

    def test_mx06_indented_lines(self):
        result = parse(excerpts(MX)["MX-06"])
        assert steps_of(result) == [8, 9]
        assert result.steps[1]["total_weights"] == 155934.0

    def test_mx08_old_eval_lines_are_evals_not_steps(self):
        result = parse(excerpts(MX)["MX-08"])
        assert result.steps == []
        assert list(result.evals) == [{"step": 4, "loss": 9.855, "total_weights": 75264.0},
                                      {"step": 9, "loss": 9.42, "total_weights": 75264.0}]

    def test_mx09_absl_noise_and_timing_outlier(self):
        result = parse(excerpts(MX)["MX-09"])
        assert steps_of(result) == [0, 1, 2, 3, 4]
        assert result.steps[2]["tflops_per_sec_per_gpu"] == 917442.589
        assert result.errors == []

    def test_mx10_short_form_without_tokens(self):
        result = parse(excerpts(MX)["MX-10"])
        assert result.steps[-1] == {"step": 9, "seconds": 0.166, "tflops_per_sec_per_gpu": 41.524, "loss": 217.296}

    def test_mx11_elided_step_line_is_not_a_step(self):
        assert parse(excerpts(MX)["MX-11"]).steps == []

    def test_mx12_new_eval_wording(self):
        result = parse(excerpts(MX)["MX-12"])
        assert result.steps == []
        assert result.evals[0]["step"] == 0 and result.evals[0]["perplexity"] == 2.0

    def test_mx13_absl_prefix_and_extra_loss_fields(self):
        result = parse(excerpts(MX)["MX-13"])
        assert steps_of(result) == [1, 2, 3, 4, 5, 6, 7, 8]
        step = result.steps[2]
        assert step["loss"] == 0.708 and step["lm_loss"] == 0.0 and step["perplexity"] == 2.01
        assert step["reward_accuracy"] == 0.125

    def test_mx14_2023_format_behind_comment_prefix(self):
        result = parse(excerpts(MX)["MX-14"])
        assert steps_of(result) == [1, 2, 3, 4, 5, 95, 96, 97, 98, 99]
        assert result.steps[0] == {"step": 1, "seconds": 8.693, "tflops_per_sec_per_gpu": 1.731, "loss": 9.206}

    @pytest.mark.parametrize("excerpt,step,loss", [("MX-15", 12, 0.0), ("MX-22", 16, 1.104), ("MX-38", 2, 0.0),
                                                   ("MX-26", 34, 11.457)])
    def test_single_lines(self, excerpt, step, loss):
        result = parse(excerpts(MX)[excerpt])
        assert steps_of(result) == [step]
        assert result.steps[0]["loss"] == loss

    def test_every_recipe_line_parses(self):
        texts = excerpts(MX)
        for excerpt in ["MX-%02d" % i for i in range(15, 42)]:
            result = parse(texts[excerpt])
            assert len(result.steps) == 1, excerpt
            assert {"seconds", "tflops_per_sec_per_gpu", "tokens_per_sec_per_gpu", "loss"} <= set(result.steps[0])

    @pytest.mark.parametrize("excerpt", ["MX-01", "MX-02", "MX-03", "MX-04", "MX-42", "MX-43"])
    def test_benign_startup_output_has_no_step_and_no_error(self, excerpt):
        result = parse(excerpts(MX)[excerpt])
        assert result.steps == [] and result.errors == []

    def test_mx44_steps_then_fatal_barrier_timeout(self):
        result = parse(excerpts(MX)["MX-44"])
        assert steps_of(result) == [46, 47, 48]
        classes = {e["class"] for e in result.errors}
        assert classes == {"timeout", "coordination"}
        first = result.errors[0]
        # The cause is the exception the traceback ends with, not its header (issue 9).
        assert first["class"] == "timeout" and first["pattern"] == "deadline_exceeded"
        assert first["text"].startswith("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out")
        assert first["consequence"] is True


class TestMegatronReal:
    def test_mg01_skipped_iterations_without_loss_and_validation_lines(self):
        result = parse(excerpts(MG)["MG-01"])
        assert result.framework == "megatron"
        assert steps_of(result) == list(range(10, 130, 10))
        assert "loss" not in result.steps[0] and result.steps[0]["skipped_iterations"] == 10.0
        assert result.steps[1]["loss"] == pytest.approx(10.72453)
        assert result.steps[1]["elapsed_time_per_iteration"] == 820.7
        assert result.steps[-1]["total_steps"] == 1000
        assert result.errors == []

    def test_mg02_launcher_prefix_and_throughput(self):
        result = parse(excerpts(MG)["MG-02"])
        assert steps_of(result) == [50, 100, 150, 200, 250, 300, 350]
        assert result.steps[0]["throughput_per_gpu"] == 134.0
        assert result.steps[0]["global_batch_size"] == 1008.0
        assert result.steps[0]["seconds"] == pytest.approx(1.5528)

    def test_mg05_old_format_and_slurm_cancel(self):
        result = parse(excerpts(MG)["MG-05"])
        assert steps_of(result) == [30, 40, 50, 60, 70, 80, 90]
        assert result.steps[0]["learning_rate"] == 1.5e-4
        assert [e["class"] for e in result.errors] == ["crash", "crash"]
        assert "CANCELLED AT" in result.errors[0]["text"]

    def test_mg08_blockquote_prefix_and_moe_loss(self):
        step = parse(excerpts(MG)["MG-08"]).steps[0]
        assert step["step"] == 1 and step["loss"] == pytest.approx(11.92634)
        assert step["load_balancing_loss"] == pytest.approx(1.041994)
        assert step["nan_iterations"] == 0.0

    def test_mg09_microsecond_timestamps(self):
        result = parse(excerpts(MG)["MG-09"])
        assert steps_of(result) == [44, 45]
        assert result.steps[1]["throughput_per_gpu"] == 61.9

    def test_mg11_rocm_mem_usage_and_script_summary(self):
        result = parse(excerpts(MG)["MG-11"])
        assert steps_of(result) == [50]
        assert result.steps[0]["mem_usage"] == 0.7494
        assert result.script_summary == {"throughput_per_gpu": pytest.approx(589.331914893617),
                                         "elapsed_time_per_iteration": pytest.approx(10250.497872340427),
                                         "tokens_per_gpu": pytest.approx(12786.891099),
                                         "mem_usage": pytest.approx(0.7494)}

    def test_mg12_seconds_timing_converted_to_ms(self):
        result = parse(excerpts(MG)["MG-12"])
        assert steps_of(result) == [10, 20, 30, 40]
        assert result.steps[0]["elapsed_time_per_iteration"] == pytest.approx(35865.1)
        assert result.steps[0]["throughput_per_gpu"] == 199.03

    def test_tokens_per_gpu_computed_from_sequence_and_world_size(self):
        step = parse(excerpts(MG)["MG-02"], seq_length=4096, world_size=252).steps[0]
        assert step["tokens_per_gpu"] == pytest.approx(1008 * 4096 / (1.5528 * 252))


class TestPrimusReal:
    def test_pr01_real_escape_codes_and_pairs(self):
        step = parse(excerpts(PR)["PR-01"]).steps[0]
        assert step["step"] == 12125
        assert step["elapsed_time_per_iteration"] == 2701.3 and step["elapsed_time_per_iteration_avg"] == 2712.7
        assert step["throughput_per_gpu"] == 210.5 and step["tokens_per_gpu"] == 12130.4
        assert step["mem_usage"] == pytest.approx(0.8881) and step["mem_used_gb"] == 227.35

    @pytest.mark.parametrize("excerpt", ["PR-02", "PR-03"])
    def test_pr02_pr03_same_line_with_and_without_colour_remnants(self, excerpt):
        step = parse(excerpts(PR)[excerpt]).steps[0]
        assert step["step"] == 126 and step["loss"] == pytest.approx(6.548988e-3)
        assert step["tokens_per_gpu"] == 9801.4

    def test_pr06_pr07_cli_summaries(self):
        assert parse(excerpts(PR)["PR-06"]).script_summary == {
            "throughput_per_gpu": 329.8, "tokens_per_gpu": 950.15, "elapsed_time_per_iteration": 68975.48}
        assert parse(excerpts(PR)["PR-07"]).script_summary["tokens_per_gpu"] == 811.62

    def test_pr08_nan_error(self):
        result = parse(excerpts(PR)["PR-08"])
        assert [e["class"] for e in result.errors] == ["nan"]


class TestNxdtReal:
    def test_nx01_progress_lines(self):
        result = parse(excerpts(NX)["NX-01"])
        assert result.framework == "nxdt"
        assert steps_of(result) == [188, 189, 190]
        assert result.steps[0]["loss"] == 7.56 and result.steps[0]["seconds"] == 18.79

    def test_nx02_repeated_step_kept_once(self):
        assert steps_of(parse(excerpts(NX)["NX-02"])) == [1, 2, 3]


class TestLineHandling:
    def test_nan_and_inf_losses_are_kept_and_flagged(self):
        result = parse("completed step: 5, seconds: 1.0, loss: nan\ncompleted step: 6, seconds: 1.0, loss: inf\n")
        assert math.isnan(result.steps[0]["loss"]) and result.steps[0]["nonfinite"] == ["loss"]
        assert math.isinf(result.steps[1]["loss"])
        assert [e["class"] for e in result.errors] == ["nan", "nan"]

    def test_nan_iterations_count_is_an_error(self):
        line = " iteration 5/ 10 | elapsed time per iteration (ms): 100.0 | number of nan iterations:   2 |\n"
        assert [e["pattern"] for e in parse(line).errors] == ["nan_iterations"]

    def test_rampup_and_profiler_lines_are_not_steps(self):
        text = ("[Rampup Batch Size Phase] completed step: 1, seconds: 1.0, loss: 3.0\n"
                "completed profiler activation step: 4\n")
        assert parse(text).steps == []

    def test_explicit_framework_ignores_the_other_format(self):
        text = "completed step: 1, seconds: 1.0, loss: 3.0\n iteration 5/ 10 | elapsed time per iteration (ms): 1.0 |\n"
        assert steps_of(parse(text, "megatron")) == [5]
        assert steps_of(parse(text, "maxtext")) == [1]

    def test_simulator_banner(self):
        assert parse("[clusterval simulator] MaxText stand-in\n").simulated is True
        assert parse("completed step: 1, seconds: 1.0, loss: 3.0\n").simulated is False

    def test_unknown_framework_is_refused_by_name(self):
        with pytest.raises(ValueError, match="framework: expected one of"):
            _logs.LogParser("pytorch")


class TestFiles:
    def test_partial_last_line_is_left_for_the_next_read(self, tmp_path):
        log = tmp_path / "training.log"
        log.write_bytes(b"completed step: 0, seconds: 1.0, loss: 3.0\ncompleted step: 1, sec")
        first = _logs.parse_log(str(log))
        assert steps_of(first) == [0] and first.offset == 43 and first.lineno == 1
        with open(log, "ab") as handle:
            handle.write(b"onds: 1.0, loss: 2.5\n")
        second = _logs.parse_log(str(log), offset=first.offset, lineno=first.lineno)
        assert second.steps == [{"step": 1, "seconds": 1.0, "loss": 2.5}]
        assert second.lineno == 2

    def test_overlong_lines_are_skipped_and_counted(self, tmp_path):
        log = tmp_path / "training.log"
        long_line = b"completed step: 7, seconds: 1.0, loss: " + b"9" * (_logs.MAX_LINE + 10) + b"\n"
        log.write_bytes(long_line + b"completed step: 8, seconds: 1.0, loss: 2.0\nSegmentation fault\n")
        result = _logs.parse_log(str(log))
        assert steps_of(result) == [8]
        assert result.skipped_long_lines == 1
        assert result.errors[0]["line"] == 3

    def test_overlong_line_across_chunks(self, tmp_path, monkeypatch):
        monkeypatch.setattr(_logs, "CHUNK_SIZE", 1024)
        log = tmp_path / "training.log"
        log.write_bytes(b"x" * (_logs.MAX_LINE * 2) + b"\ncompleted step: 8, seconds: 1.0, loss: 2.0\n")
        result = _logs.parse_log(str(log))
        assert steps_of(result) == [8] and result.offset == log.stat().st_size and result.lineno == 2

    def test_offset_beyond_the_end_restarts(self, tmp_path):
        log = tmp_path / "training.log"
        log.write_bytes(b"completed step: 0, seconds: 1.0, loss: 3.0\n")
        assert steps_of(_logs.parse_log(str(log), offset=10_000)) == [0]

    def test_synthetic_megatron_fixture(self):
        result = _logs.parse_log(SYNTHETIC_LOGS + "/megatron_last_node.log")
        assert steps_of(result) == list(range(1, 31)) and result.errors == []
        assert result.script_summary["tokens_per_gpu"] == pytest.approx(12786.891099)

    def test_max_steps_bounds_memory_but_not_the_figures(self, tmp_path):
        log = tmp_path / "training.log"
        log.write_text("".join("completed step: %d, seconds: 1.0, Tokens/s/device: %d, loss: 3.0\n" % (i, 100 + i)
                               for i in range(50)))
        result = _logs.parse_log(str(log), parser=_logs.LogParser("maxtext", max_steps=5, warmup_steps=10))
        assert steps_of(result) == [45, 46, 47, 48, 49]
        assert result.steps_total == 50 and result.last_step == 49
        assert result.steady.means() == {"seconds": 1.0, "tokens_per_sec_per_gpu": 129.5}

    def test_nccl_info_heavy_chunks_keep_exact_line_numbers(self, tmp_path):
        info = "node1:17:664 [2] NCCL INFO Channel 00/0 : 0[2] -> 1[3] via P2P/IPC\n"
        text = (info * 10 + "completed step: 3, seconds: 1.0, loss: 2.0\n" + info * 10
                + "node1:17:664 [2] NCCL WARN NET/IB : Got completion with error 12\n" + info * 5
                + "Segmentation fault (core dumped)\n" + info * 3)
        log = tmp_path / "training.log"
        log.write_text(text)
        result = _logs.parse_log(str(log))
        assert steps_of(result) == [3] and result.lineno == 31
        assert [(e["line"], e["class"]) for e in result.errors] == [(22, "network"), (28, "crash")]
        assert _logs.parse_log(str(log), patterns=[{"regex": "Channel 00", "class": "network"}]).errors_total == 30

    def test_read_exit_code(self, tmp_path):
        path = tmp_path / "training.exit"
        assert _logs.read_exit_code(str(path)) is None
        path.write_text("137\n")
        assert _logs.read_exit_code(str(path)) == 137


# Property tests: arbitrary input never crashes the parser and never invents a step.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

STEP_LINE = "completed step: {0}, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, loss: {1:.3f}"
ITER_LINE = (" [2025-03-31 05:54:07] iteration {0:8d}/     100 | consumed samples: 512 | elapsed time per iteration "
             "(ms): 1552.8 | throughput per GPU (TFLOP/s/GPU): 134.0 | lm loss: {1:.6E} | number of nan iterations:   0 |")
noise_text = st.text(alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=120)
garbage_line = noise_text.filter(lambda t: "step" not in t and "iteration" not in t and "global_step" not in t)
PREFIXES = ["", "[default3]: ", "[lrdn3321:3]:", "0: ", "I0706 16:50:26.230209 140110937163584 metric_logger.py:214] ",
            "\x1b[32m[rank-7/8]\x1b[0m ", "[[32m20251202[0m] "]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_crash_and_invent_no_step(data):
    parser = _logs.LogParser("auto")
    result = parser.new_result(0, 0, len(data))
    cut = data.rfind(b"\n") + 1
    parser.feed(data[:cut], result)
    for step in result.steps:
        assert str(step["step"]).encode() in data
    if not any(k in data for k in (b"completed step: ", b"iteration", b"global_step=")):
        assert result.steps == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 20)), max_size=15),
       st.lists(garbage_line, max_size=30), st.sampled_from(PREFIXES), st.booleans(), st.randoms())
def test_steps_survive_noise_prefixes_crlf_and_interleaving(values, noise, prefix, crlf, rng):
    template = STEP_LINE if rng.random() < 0.5 else ITER_LINE
    step_lines = [prefix + template.format(step, loss) for step, loss in values]
    lines = step_lines + noise
    rng.shuffle(lines)
    order = [line for line in lines if line in step_lines]
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    result = _logs.parse_text(text)
    expected = [int(line.split("step: " if template is STEP_LINE else "iteration")[1].split(",")[0].split("/")[0])
                for line in order]
    assert steps_of(result) == expected
    for step, line in zip(result.steps, order):
        assert "nonfinite" not in step


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([STEP_LINE.format(3, 2.5), "Segmentation fault", "NCCL INFO noise",
                                 ITER_LINE.format(4, 1.5)]), min_size=1, max_size=8), st.data())
def test_truncated_lines_are_never_half_parsed(lines, data):
    text = "\n".join(lines) + "\n"
    cut = data.draw(st.integers(0, len(text)))
    whole_lines = text[:cut][: text[:cut].rfind("\n") + 1]
    partial = _logs.LogParser("auto")
    result = partial.new_result(0, 0, cut)
    partial.feed(text[:cut].encode()[: len(whole_lines.encode())], result)
    assert steps_of(result) == steps_of(_logs.parse_text(whole_lines)) if whole_lines else result.steps == []


def test_incremental_equals_whole_file_at_every_split_point(tmp_path):
    text = (excerpts(MX)["MX-05"] + excerpts(MX)["MX-44"][:1500] + excerpts(MG)["MG-11"]).encode()
    log = tmp_path / "training.log"
    log.write_bytes(text)
    whole = _logs.parse_log(str(log))
    for split in range(len(text) + 1):
        log.write_bytes(text[:split])
        first = _logs.parse_log(str(log))
        log.write_bytes(text)
        second = _logs.parse_log(str(log), first.framework or "auto", offset=first.offset, lineno=first.lineno)
        assert first.steps + second.steps == whole.steps, split
        assert first.errors + second.errors == whole.errors, split
        assert second.offset == whole.offset and second.lineno == whole.lineno
