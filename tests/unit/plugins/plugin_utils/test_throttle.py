"""At most N holders of a slot at once among processes: the image pull's throttle inside the container's start."""
from __future__ import annotations

import multiprocessing
import os
import time

from ansible_collections.clusterval.training.plugins.plugin_utils._throttle import slot


def hold(directory: str, slots: int, log: str) -> None:
    with slot(directory, slots, poll_s=0.01):
        with open(log, "a", encoding="utf-8") as handle:
            handle.write("in %f\n" % time.monotonic())
        time.sleep(0.2)
        with open(log, "a", encoding="utf-8") as handle:
            handle.write("out %f\n" % time.monotonic())


def most_at_once(log: str) -> int:
    with open(log, encoding="utf-8") as handle:
        events = [(float(when), kind) for kind, when in (line.split() for line in handle)]
    inside = peak = 0
    # an exit and an entry at the same instant: the exit first
    for dummy, kind in sorted(events, key=lambda event: (event[0], event[1] == "in")):
        inside += 1 if kind == "in" else -1
        peak = max(peak, inside)
    return peak


def test_no_more_than_the_slots_hold_at_once_and_every_one_gets_its_turn(tmp_path):
    log = str(tmp_path / "log")
    workers = [multiprocessing.Process(target=hold, args=(str(tmp_path / "slots"), 2, log)) for dummy in range(5)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert [worker.exitcode for worker in workers] == [0] * 5
    assert most_at_once(log) == 2
    assert sum(1 for line in open(log, encoding="utf-8") if line.startswith("in")) == 5


def test_a_holder_that_dies_frees_its_slot(tmp_path):
    directory = str(tmp_path / "slots")

    def die_holding() -> None:
        with slot(directory, 1):
            os._exit(1)

    dead = multiprocessing.Process(target=die_holding)
    dead.start()
    dead.join(30)
    started = time.monotonic()
    with slot(directory, 1, poll_s=0.01) as index:
        assert index == 0
    assert time.monotonic() - started < 5
