"""Throughput and peak memory of the training-log parser on a generated, realistic log.

The log mixes, as on a real multi-node run with NCCL_DEBUG=INFO, many NCCL/RCCL
INFO lines from several nodes and ranks with MaxText step lines (or Megatron
iteration lines), absl noise and a few warnings. The parse runs in a child
process so that its peak RSS (getrusage maxrss) is the parser's alone.

    python benchmarks/parse_bench.py --size-mb 1024 --framework maxtext
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

NOISE = [
    "{host}:{pid}:{tid} [{gpu}] NCCL INFO Channel {ch:02d}/0 : {r}[{gpu}] -> {r2}[{gpu2}] via P2P/IPC/read comm 0x55d1c0a3f2e0 nRanks 64\n",
    "{host}:{pid}:{tid} [{gpu}] NCCL INFO Connected all rings comm 0x55d1c0a3f2e0 nRanks 64 nNodes 8 localRanks 8\n",
    "{host}:{pid}:{tid} [{gpu}] NCCL INFO NET/IB : Using [0]bnxt_re0:1/RoCE [1]bnxt_re1:1/RoCE [RO]; OOB ens51np0:10.1.0.{r}<0>\n",
    "I1121 09:14:{sec:02d}.{us:06d} {tid} xla_bridge.py:906] Unable to initialize backend 'tpu': INTERNAL: Failed to open libtpu.so\n",
    "{host}:{pid}:{tid} [{gpu}] NCCL INFO comm 0x55d1c0a3f2e0 rank {r} nRanks 64 nNodes 8 localRanks 8 localRank {gpu} MNNVL 0\n",
]
STEP = {
    "maxtext": "completed step: {step}, seconds: {sec:.3f}, TFLOP/s/device: {tflops:.3f}, Tokens/s/device: {tok:.3f}, "
               "total_weights: 1572864, loss: {loss:.3f}\n",
    "megatron": "[default7]: [2025-08-13 03:42:28] iteration {step:8d}/  100000 | consumed samples: {cs:12d} | elapsed time "
                "per iteration (ms): {ms:.1f} | mem usages: 0.7494 | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
                "learning rate: 9.999999E-05 | global batch size:   256 | lm loss: {loss:.6E} | loss scale: 1.0 | "
                "grad norm: 1.571 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
}


def noise_line(rng: random.Random) -> str:
    gpu = rng.randrange(8)
    return rng.choice(NOISE).format(host="node%d" % rng.randrange(8), pid=4000 + gpu, tid=4100 + rng.randrange(64),
                                    gpu=gpu, gpu2=(gpu + 1) % 8, ch=rng.randrange(32), r=rng.randrange(64),
                                    r2=rng.randrange(64), sec=rng.randrange(60), us=rng.randrange(10**6))


def generate(path: str, size_bytes: int, framework: str, noise_per_step: int) -> int:
    rng = random.Random(42)
    written, step = 0, 0
    with open(path, "w", buffering=1 << 20) as handle:
        while written < size_bytes:
            block = [noise_line(rng) for dummy in range(noise_per_step)]
            block.append(STEP[framework].format(step=step, sec=5.6, tflops=590.2, tok=8672.7, ms=10235.8,
                                                cs=step * 256, loss=12.0 / (1 + step * 1e-4)))
            text = "".join(block)
            handle.write(text)
            written += len(text)
            step += 1
    return step


def parse_child(path: str, framework: str, repeat: int) -> None:
    from ansible_collections.clusterval.training.plugins.module_utils._logs import LogParser, parse_log

    def parse():  # as the training_log module does: at most 1000 steps kept
        return parse_log(path, parser=LogParser(framework, max_steps=1000))
    started = time.perf_counter()
    cpu_started = time.process_time()
    result = parse()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    for dummy in range(repeat - 1):  # best of N: other processes on the machine slow single runs down
        started, cpu_started = time.perf_counter(), time.process_time()
        parse()
        elapsed, cpu = min(elapsed, time.perf_counter() - started), min(cpu, time.process_time() - cpu_started)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "steps": result.steps_total, "errors": result.errors_total,
                      "offset": result.offset, "peak_rss_mib": peak_kib / 1024.0}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=512, help="size of the generated log (default 512)")
    parser.add_argument("--framework", choices=sorted(STEP), default="maxtext")
    parser.add_argument("--parse-as", default=None, help="framework argument given to the parser (default: --framework)")
    parser.add_argument("--noise-per-step", type=int, default=200, help="NCCL/absl noise lines between step lines")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--repeat", type=int, default=1, help="parse N times, report the fastest (default 1)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        parse_child(args.child, args.parse_as or args.framework, args.repeat)
        return
    handle, path = tempfile.mkstemp(prefix="parse_bench_", suffix=".log")
    os.close(handle)
    try:
        steps = generate(path, args.size_mb * 1024 * 1024, args.framework, args.noise_per_step)
        size = os.path.getsize(path)
        command = [sys.executable, __file__, "--child", path, "--framework", args.framework, "--repeat", str(args.repeat)]
        if args.parse_as:
            command += ["--parse-as", args.parse_as]
        figures = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        assert figures["steps"] == steps and figures["offset"] == size, figures
        print("log: %.0f MB, %d step lines among %d noise lines each (%s, parsed as %s)" % (
            size / 1e6, steps, args.noise_per_step, args.framework, args.parse_as or args.framework))
        print("parse: %.2f s wall, %.2f s CPU: %.0f MB/s wall, %.0f MB/s CPU (one core, best of %d)" % (
            figures["seconds"], figures["cpu_seconds"], size / 1e6 / figures["seconds"],
            size / 1e6 / figures["cpu_seconds"], args.repeat))
        print("peak memory of the parsing process: %.1f MiB (maxrss)" % figures["peak_rss_mib"])
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    main()
