"""The metric registry: one direction per metric, the suite's prefix, unknown names."""
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import (
    HIGHER, LOWER, METRICS, THROUGHPUT_PREFERENCE, canonical_name, direction_of, is_throughput)


def test_throughput_is_higher_and_times_are_lower_is_better():
    assert direction_of("tokens_per_sec_per_gpu") == HIGHER
    assert direction_of("throughput_per_gpu") == HIGHER
    assert direction_of("elapsed_time_per_iteration") == LOWER
    assert direction_of("step_time_p95_ms") == LOWER
    assert direction_of("final_loss") == LOWER
    assert direction_of("loss_decreased") == HIGHER


def test_the_suites_prefix_names_the_same_metric():
    assert canonical_name("training.tokens_per_sec_total") == "tokens_per_sec_total"
    assert direction_of("training.step_time_mean_ms") == LOWER
    assert is_throughput("training.tflops_per_sec_per_gpu")


def test_unknown_metrics_follow_their_words():
    assert direction_of("p99_latency_ms") == LOWER
    assert direction_of("hbm_mem_peak") == LOWER
    assert direction_of("samples_per_sec") == HIGHER


def test_every_throughput_of_the_preference_is_a_known_higher_is_better_metric():
    for name in THROUGHPUT_PREFERENCE:
        assert METRICS[name].direction == HIGHER
