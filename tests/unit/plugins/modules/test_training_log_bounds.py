"""training_log never blocks the play: only regular files are read, within a time budget."""
from __future__ import annotations

import os
import time

import pytest
from test_training_log import params, run_module

from ansible_collections.clusterval.training.plugins.modules import training_log


@pytest.mark.parametrize("make, kind", [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: os.mkdir(p), "a directory"),
], ids=["fifo", "directory"])
def test_a_log_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, make, kind):
    path = str(tmp_path / "training.log")
    make(path)
    started = time.monotonic()
    result = run_module({"path": path}, tmp_path)
    assert time.monotonic() - started < 10
    assert result["failed"] and f"{path} is {kind}, not a regular file" in result["msg"]


def test_dev_zero_is_refused_instead_of_read_forever(tmp_path):
    result = run_module({"path": "/dev/zero", "read_timeout": 5}, tmp_path)
    assert result["failed"] and "/dev/zero is a character device" in result["msg"]


def test_a_read_that_blocks_past_its_budget_fails_naming_the_path(tmp_path, monkeypatch):
    log = tmp_path / "training.log"
    log.write_text("")
    monkeypatch.setattr(training_log, "run_training_log", lambda p: time.sleep(5))
    started = time.monotonic()
    with pytest.raises(OSError, match="log read blocked for 0.2 s: %s" % log):
        training_log.read_within(params(str(log)), 0.2)
    assert time.monotonic() - started < 2


def test_a_regular_log_is_read_as_before(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("completed step: 1, seconds: 1.0, TFLOP/s/device: 1.0, loss: 9.0\n")
    assert training_log.read_within(params(str(log)), 5)["last_step"] == 1
