"""TorchTitan's metrics line, read from real console output (tests/fixtures/real-logs/torchtitan_real.txt; its
SOURCES.md says where each excerpt came from)."""
import pytest

from ansible_collections.clusterval.training.plugins.module_utils._logs import parse_text
from ansible_collections.clusterval.training.plugins.module_utils._steady import summarize

from real_logs import excerpts

TT = "torchtitan_real.txt"


def test_a_line_with_torchruns_rank_prefix_gives_every_field():
    steps = parse_text(excerpts(TT)["TT-01"], "torchtitan").steps
    assert [s["step"] for s in steps] == [14, 15, 16, 17]
    assert steps[0] == {"step": 14, "rank": 0, "loss": 3.24405, "grad_norm": 0.8319, "mem_gib": 9.46,
                        "tokens_per_gpu": 7282.0, "tokens_per_sec": 7282.0, "throughput_per_gpu": 0.52,
                        "mfu_pct": 0.17}


def test_an_older_line_without_grad_norm_between_gc_and_profiler_lines():
    steps = parse_text(excerpts(TT)["TT-02"], "torchtitan").steps
    assert [(s["step"], s["tokens_per_gpu"], s["throughput_per_gpu"]) for s in steps] == \
        [(200, 5856.0, 339.16), (210, 5593.0, 323.92), (220, 5868.0, 339.82)]
    assert "grad_norm" not in steps[0]


def test_every_ranks_line_of_a_step_counts_once():
    result = parse_text(excerpts(TT)["TT-03"], "torchtitan")
    assert [s["step"] for s in result.steps] == [4] and result.steps[0]["tokens_per_gpu"] == 10050.0
    assert result.steps_total == 1


def test_auto_detects_torchtitan_and_other_formats_do_not_read_its_lines():
    assert parse_text(excerpts(TT)["TT-01"]).framework == "torchtitan"
    assert parse_text(excerpts(TT)["TT-01"], "megatron").steps == []
    assert parse_text("completed step: 3, seconds: 1.0, TFLOP/s/device: 100.0, loss: 9.0", "torchtitan").steps == []


def test_a_nan_loss_is_an_error():
    line = ("[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:      nan  grad_norm:  0.8319  "
            "memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%")
    result = parse_text(line, "torchtitan")
    assert result.errors[0]["class"] == "nan"


def test_steady_means_are_per_gpu_tokens_tflops_mfu_and_memory():
    steps = parse_text(excerpts(TT)["TT-01"], "torchtitan").steps
    means = summarize(steps, "torchtitan", warmup_steps=2)
    assert means["tokens_per_gpu"] == pytest.approx((7313 + 7282) / 2)
    assert set(means) == {"tokens_per_gpu", "tokens_per_sec", "throughput_per_gpu", "mfu_pct", "mem_gib"}
