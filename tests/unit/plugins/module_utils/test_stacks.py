"""Per-stack facts: final step, printing rank, warm-up."""
from ansible_collections.clusterval.training.plugins.module_utils._stacks import (
    MAXTEXT, MEGATRON, STACKS, default_warmup)


def test_maxtext_counts_steps_from_zero_and_every_rank_prints():
    stack = STACKS[MAXTEXT]
    assert stack.final_step(30) == 29
    assert all(stack.prints_steps(rank, 4) for rank in range(4))


def test_megatron_prints_on_the_last_rank_only():
    stack = STACKS[MEGATRON]
    assert stack.final_step(30) == 30
    assert [stack.prints_steps(rank, 3) for rank in range(3)] == [False, False, True]


def test_warmup_defaults():
    assert default_warmup(MAXTEXT) == 3
    assert default_warmup(MEGATRON) == 2
    assert default_warmup(None) == 2
