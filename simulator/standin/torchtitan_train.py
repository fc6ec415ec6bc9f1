"""Stand-in for TorchTitan (``torchrun ... --module torchtitan.train --job.config_file FILE``) in the clusterval
simulator image.

It reads the job's TOML as TorchTitan does (``--section.key value`` on the command line over it), refuses what
TorchTitan refuses at start-up (a missing config file, parallel sizes that do not make up the world, no GPU),
rendezvouses with the other nodes over TCP and prints TorchTitan's metrics line from every local rank, prefixed as
``torchrun --role rank --tee 3`` prefixes it: ``[rankN]:[titan] <time> - root - INFO - step: S  loss: L  grad_norm:
G  memory: M GiB(P%)  tps: T  tflops: F  mfu: U%`` (torchtitan/components/metrics.py). Failures print the real
lines: torchrun's ChildFailedError for a crashed rank, a peer's reset connection on the survivors.
"""
from __future__ import annotations

import os
import sys
import time
import tomllib
from typing import Any, Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from clusterval_sim import (  # noqa: E402
    BANNER, Faults, PeerLost, RendezvousTimeout, SimFailure, Speed, check_nproc, crash_lines,
    gpu_devices_visible, hang_forever, pace, run_guarded, say, token_note, torchrun_rendezvous, torchrun_topology,
)

MODULE = "torchtitan.train"
# Parameters of the flavors the suite's registry names (for the FLOPs per token TorchTitan derives).
PARAMETERS = {"8B": 8.0e9, "70B": 70.6e9, "405B": 405.9e9, "16B": 15.7e9, "LITE": 15.7e9, "32B": 32.8e9,
              "8X22B": 141.0e9}
PEAK_TFLOPS = 1307.4  # the MFU's denominator: MI300X's dense BF16 peak
GIB = 64.0
PARALLEL = ("data_parallel_shard_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
            "context_parallel_degree")


def job_config(argv: list[str]) -> dict[str, Any]:
    """--job.config_file FILE, then every --section.key value over the file's values."""
    overrides: dict[str, str] = {}
    index = 0
    while index < len(argv):
        option, sep, inline = argv[index].partition("=")
        if not option.startswith("--") or "." not in option:
            raise SimFailure([f"train.py: error: unrecognized arguments: {argv[index]}"], exit_code=2)
        overrides[option[2:]] = inline if sep else (argv[index + 1] if index + 1 < len(argv) else "")
        index += 1 if sep else 2
    path = overrides.pop("job.config_file", "")
    if not os.path.isfile(path):
        raise SimFailure(["Traceback (most recent call last):",
                          f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'"])
    with open(path, "rb") as handle:
        config = tomllib.load(handle)
    for dotted, value in overrides.items():
        section, _dot, key = dotted.rpartition(".")
        config.setdefault(section, {})[key] = int(value) if value.lstrip("-").isdigit() else value
    return config


def parallel_dims(config: Mapping[str, Any], world: int) -> dict[str, int]:
    """TorchTitan's ParallelDims: dp_shard -1 takes what the others leave; the product must be the world."""
    given = config.get("parallelism", {})
    dims = {key: int(given.get(key, 1)) for key in PARALLEL}
    others = dims["tensor_parallel_degree"] * dims["pipeline_parallel_degree"] * dims["context_parallel_degree"]
    if dims["data_parallel_shard_degree"] == -1:
        dims["data_parallel_shard_degree"] = world // others if world % others == 0 else world
    if dims["data_parallel_shard_degree"] * others != world:
        raise SimFailure(["Traceback (most recent call last):",
                          f"AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard("
                          f"{dims['data_parallel_shard_degree']}) * cp({dims['context_parallel_degree']}) * tp("
                          f"{dims['tensor_parallel_degree']}) * pp({dims['pipeline_parallel_degree']}) != "
                          f"WORLD_SIZE({world})"])
    return dims


def stamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + ",%03d" % int(now % 1 * 1000)


def metrics_line(rank: int, step: int, loss: float, tflops: float, config: Mapping[str, Any]) -> str:
    """TorchTitan's metrics line as torchrun's --tee prints it for one local rank."""
    parameters = PARAMETERS.get(str(config.get("model", {}).get("flavor", "8B")).upper(), 8.0e9)
    tps = tflops * 1e12 / (6 * parameters)
    return (f"[rank{rank}]:[titan] {stamp()} - root - INFO - step: {step:2}  loss: {loss:8.5f}  grad_norm: "
            f"{1.0 + 4.0 / step:7.4f}  memory: {GIB * 0.62:5.2f}GiB({62.0:.2f}%)  tps: {round(tps):,}  "
            f"tflops: {tflops:,.2f}  mfu: {100 * tflops / PEAK_TFLOPS:.2f}%")


def train(config: Mapping[str, Any], env: Mapping[str, str], topology: Mapping[str, Any]) -> int:
    world = topology["gpus"] * topology["nnodes"]
    parallel_dims(config, world)
    if not gpu_devices_visible(env):
        raise SimFailure(["RuntimeError: No HIP GPUs are available"])
    say(f"{BANNER} simulated TorchTitan (no GPU, no model): node rank {topology['rank']} of {topology['nnodes']}, "
        f"{topology['gpus']} simulated GPUs per node, every local rank prints its metrics line, {token_note(env)}")
    faults = Faults.from_env(env, topology["rank"])
    rendezvous = torchrun_rendezvous(env, topology, faults)
    speed = Speed.from_env(env, faults, seed=topology["rank"] + 71)
    steps = int(config.get("training", {}).get("steps", 10))
    first_rank = topology["rank"] * topology["gpus"]
    try:
        for step in range(1, steps + 1):
            if faults.hangs_at(step):
                hang_forever()
            if faults.crashes_at(step):
                raise SimFailure(crash_lines(topology, MODULE))
            pace(speed, rendezvous, first=step == 1)
            loss = float("nan") if faults.loss_is_nan(step) else speed.loss(step)
            tflops = speed.tflops_per_device * speed.jitter()
            for rank in range(first_rank, first_rank + topology["gpus"]):
                say(metrics_line(rank, step, loss, tflops, config))
        rendezvous.finish()
    except PeerLost as lost:
        raise SimFailure([f"[rank{first_rank}]: RuntimeError: [{rendezvous.peer_address(lost.rank)}] Connection "
                          "reset by peer"]) from None
    except RendezvousTimeout as err:
        raise SimFailure([f"torch.distributed.DistStoreError: {len(err.joined)}/{topology['nnodes']} ranks "
                          "arrived"]) from None
    return 0


def torchrun_main(argv: list[str], env: Mapping[str, str]) -> int:
    topology, index = torchrun_topology(argv)
    if not topology["module"] or index >= len(argv) or argv[index] != MODULE:
        raise SimFailure([f"{BANNER} the TorchTitan stand-in runs --module {MODULE} only"])
    check_nproc(env, topology, "GPUs")
    return train(job_config(argv[index + 1:]), env, topology)


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    return run_guarded(lambda: torchrun_main(argv[2:], env), lambda: False)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
