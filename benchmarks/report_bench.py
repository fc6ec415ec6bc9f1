"""Time to render the three report files (results.json, junit.xml, report.html) and the console verdict of
a synthetic run, at 2, 64 and 512 nodes of 30 and 100 steps.

The documents are judged by the real _metrics.evaluate (tests/synthetic_results.py): a culprit crashes
late in the run, every other node stops, a few nodes are 15 % slow, one throughput metric has no
threshold. Judging is not timed; rendering is, from the document to the files on disk: the best and
median wall-clock time of the repeats, and the best CPU time (steadier when other jobs share the machine).

    .venv/bin/python benchmarks/report_bench.py [--repeats 5] [--nodes 2 64 512] [--steps 30 100]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))
sys.path.insert(0, os.path.join(REPO, "tests"))

from synthetic_results import synthetic_document  # noqa: E402

from ansible_collections.clusterval.training.plugins.module_utils import _console, _report  # noqa: E402


def timed(function, repeats: int):
    """Best and median wall-clock seconds, and best CPU seconds (steadier on a shared machine)."""
    wall, cpu = [], []
    for dummy in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return min(wall), statistics.median(wall), min(cpu)


def bench(nodes: int, steps: int, repeats: int) -> None:
    document = synthetic_document(nodes, steps, crash_at=steps - 20, stragglers=(5, 40, 300))
    target = tempfile.mkdtemp(prefix="report-bench-")
    best, median, cpu = timed(lambda: _report.write_reports(target, document), repeats)
    console_best, dummy, dummy2 = timed(lambda: _console.verdict_lines(document), repeats)
    sizes = {name: os.path.getsize(os.path.join(target, name)) for name in ("results.json", "junit.xml", "report.html")}
    print("%4d nodes x %3d steps: three files wall best %.3f s (median %.3f s), CPU best %.3f s; console verdict "
          "%.3f s, %d lines; results.json %d KB, junit.xml %d KB, report.html %d KB" % (
              nodes, steps, best, median, cpu, console_best, len(_console.verdict_lines(document)),
              sizes["results.json"] // 1024, sizes["junit.xml"] // 1024, sizes["report.html"] // 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 64, 512])
    parser.add_argument("--steps", type=int, nargs="+", default=[30, 100])
    args = parser.parse_args()
    for nodes in args.nodes:
        for steps in args.steps:
            bench(nodes, steps, args.repeats)


if __name__ == "__main__":
    main()
