"""Per-stack facts: final step, printing rank, warm-up; the one list of names."""
import yaml

from ansible_collections.clusterval.training.plugins.module_utils._stacks import (
    MAXTEXT, MEGATRON, STACKS, default_warmup, log_format)


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


def test_the_names_the_plugins_accept_come_from_the_stacks():
    """Adding a stack is its module and its row: the choices of the plugins follow the row."""
    from ansible_collections.clusterval.training.plugins.action.training_plan import ARGUMENT_SPEC
    from ansible_collections.clusterval.training.plugins.module_utils import _logs, _stacks
    from ansible_collections.clusterval.training.plugins.modules import training_log
    assert ARGUMENT_SPEC["framework"]["choices"] == list(_stacks.PLANNED)
    assert set(_stacks.PLANNED) <= set(_stacks.NAMES)
    assert _logs.FRAMEWORKS == _stacks.LOG_FORMATS
    documented = yaml.safe_load(training_log.DOCUMENTATION)["options"]["framework"]["choices"]
    assert documented == ["auto", *_stacks.NAMES]


def test_every_stack_name_reads_its_own_format():
    from ansible_collections.clusterval.training.plugins.module_utils._logs import parse_text
    megatron_line = (" [2025-01-01 00:00:00] iteration        3/      10 | consumed samples:           24 |"
                     " elapsed time per iteration (ms): 1000.0 | lm loss: 9.5 |")
    assert parse_text(megatron_line, "primus").steps[0]["step"] == 3
    assert log_format("primus") == MEGATRON and log_format(None) == "auto"


def test_adding_a_stack_is_its_module_its_row_and_its_metrics():
    """Every planned stack has its module (_stack_<name>.py, its parts in _plan.STACK_PARTS), its row in _stacks and
    the metrics it reports defined in _metricdefs; every stack's log format has its parser."""
    import importlib

    from ansible_collections.clusterval.training.plugins.module_utils import _logs, _metricdefs, _plan, _stacks
    assert set(_plan.STACK_PARTS) == set(_stacks.PLANNED)
    for name in _stacks.PLANNED:
        module = importlib.import_module(
            "ansible_collections.clusterval.training.plugins.module_utils._stack_%s" % name)
        assert _plan.STACK_PARTS[name].__module__ == module.__name__
    for stack in _stacks.STACKS.values():
        assert stack.parser in _logs.FRAMEWORKS
        assert [m for m in stack.summary_metrics if _metricdefs.metric_def(m) is None] == [], stack.name
