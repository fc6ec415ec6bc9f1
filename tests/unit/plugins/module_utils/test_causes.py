"""Cause lines, advisories and consequences on real output (tests/fixtures/real-logs)."""
from __future__ import annotations

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _logs, _timestamps, _tracebacks

from real_logs import excerpts, repo_excerpts

RCCL = repo_excerpts("rccl_real.txt")


def parsed(text, **options):
    return _logs.parse_text(text) if not options else _parse(text, **options)


def _parse(text, **options):
    parser = _logs.LogParser(**options)
    data = text.encode()
    result = parser.new_result(0, 0, len(data))
    parser.feed(data, result)
    parser.finish(result)
    return result


@pytest.mark.parametrize("excerpt", ["RC-01", "RC-03", "RC-04"])
def test_rccl_advisories_on_healthy_nodes_are_not_failures(excerpt):
    result = parsed(RCCL[excerpt])
    assert result.errors == []
    assert result.advisories and all("NCCL WARN" in a["text"] for a in result.advisories)


def test_real_rccl_failure_lines_still_fail_and_the_closed_peer_is_a_consequence():
    errors = parsed(RCCL["RC-02"]).errors
    assert [(e["class"], e["pattern"], e["consequence"]) for e in errors] == [
        ("network", "nccl_warn", False), ("network", "remote_peer_closed", True)]


def test_users_add_advisories():
    line = RCCL["RC-02"].splitlines()[2]
    assert parsed(line + "\n").errors
    result = parsed(line + "\n", advisories=[r"UCX error ucx_plugin\.c:498"])
    assert result.errors == [] and len(result.advisories) == 1


def test_bad_user_advisory_is_refused_by_path():
    with pytest.raises(ValueError, match=r"advisories\[0\]: expected a valid regular expression"):
        _logs.LogParser(advisories=["("])


def test_address_in_use_and_full_disk_have_their_classes():
    assert {e["class"] for e in parsed(RCCL["RC-05"]).errors} == {"port"}
    assert [(e["class"], e["text"]) for e in parsed(RCCL["RC-06"]).errors] == [
        ("disk", "OSError: [Errno 28] No space left on device")]


def test_assertion_error_without_traceback_is_a_failure_with_its_line():
    errors = parsed("step 3\nAssertionError\n").errors
    assert [(e["class"], e["pattern"], e["lineno"], e["text"]) for e in errors] == [
        ("crash", "exception", 2, "AssertionError")]


def test_traceback_cause_is_its_exception_line_without_the_rank_prefix():
    text = ("[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "train.py", line 3, in <module>\n'
            "[rank1]:     main()\n"
            "[rank1]: AssertionError: micro batch mismatch\n")
    errors = parsed(text).errors
    assert [(e["class"], e["pattern"], e["lineno"], e["text"]) for e in errors] == [
        ("crash", "traceback", 4, "AssertionError: micro batch mismatch")]


def test_a_traceback_split_across_reads_is_held_until_its_exception_line(tmp_path):
    log = tmp_path / "training.log"
    head = "ok\nTraceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
    log.write_text(head)
    first = _logs.parse_log(str(log))
    assert first.errors == [] and first.offset == len("ok\n") and first.lineno == 1
    with open(log, "a") as handle:
        handle.write("RuntimeError: NCCL error: unhandled cuda error\n")
    second = _logs.parse_log(str(log), offset=first.offset, lineno=first.lineno)
    assert [(e["lineno"], e["text"]) for e in second.errors] == [
        (4, "RuntimeError: NCCL error: unhandled cuda error")]


def test_the_last_read_reports_a_traceback_without_exception_line(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n")
    result = _logs.parse_log(str(log), final=True)
    assert [(e["pattern"], e["text"]) for e in result.errors] == [("traceback", "Traceback (most recent call last):")]


def test_every_traceback_of_the_real_error_fixtures_gives_an_exception_line():
    for excerpt, text in excerpts("errors_real.txt").items():
        if "Traceback (most recent call last)" not in text:
            continue
        errors = parsed(text).errors
        assert errors, excerpt
        assert all(e["pattern"] != "traceback" for e in errors), (excerpt, errors[0]["text"])


@pytest.mark.parametrize("line,expected", [
    ("[rank13]: torch.distributed.DistBackendError: NCCL error in: x.cpp:3780",
     "torch.distributed.DistBackendError: NCCL error in: x.cpp:3780"),
    ("#[Primus] Error: RuntimeError: Training execution failed", "RuntimeError: Training execution failed"),
    ("[default0]:AssertionError", "AssertionError"),
    ("  File \"train.py\", line 3, in <module>", None),
    ("I0000 this Error: is not an exception line", None),
])
def test_exception_line(line, expected):
    assert _tracebacks.exception_line(line) == expected


@pytest.mark.parametrize("line,expected", [
    ("[1721186746.658016] [node02:10366:1]  rcache.c:985  UCX  ERROR", 1721186746.658016),
    ("[2025-11-19 18:02:33] gx10-9c8c:22890:22900 [0] transport/net_ib.cc:2470 NCCL WARN NET/IB:", 1763575353.0),
    ("I1121 10:15:00.500000 140 train.py:1] x", 1700561700.5),
    ("no timestamp here", None),
])
def test_line_time(line, expected):
    assert _timestamps.line_time(line, reference=1.7e9) == expected


def test_errors_carry_the_step_that_was_running():
    text = "completed step: 3, seconds: 1.0, TFLOP/s/device: 1.0, Tokens/s/device: 1.0, loss: 9.0\nAssertionError\n"
    assert parsed(text).errors[0]["step"] == 3
