"""Stand-in for the ROCm Megatron-LM example scripts (examples/llama/train_llama3.sh, train_llama2.sh).

Reads the script's environment (MODEL_SIZE, MBS, BS, TP, PP, SEQ_LENGTH,
TOTAL_ITERS, TE_FP8, FSDP, RECOMPUTE, MOCK_DATA, MASTER_ADDR, ...), checks it
the way the script, torchrun, gloo and Megatron would, rendezvouses over TCP
(torch's TCPStore role) and prints Megatron's iteration lines from the job's
last node, then the script's summary lines.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Mapping, TextIO

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from clusterval_sim import (  # noqa: E402
    BANNER, Faults, PeerLost, Rendezvous, RendezvousTimeout, SimFailure, Speed, env_int, gpu_devices_visible,
    gpus_per_node, hang_forever, missing_required_paths, pace, rendezvous_timeout, run_guarded, say,
    token_note,
)

SCRIPT_DIR = "/workspace/Megatron-LM/examples/llama"
MODELS = {  # script -> MODEL_SIZE -> layers, hidden, ffn hidden, heads, kv heads
    "train_llama3.sh": {8: (32, 4096, 14336, 32, 8), 70: (80, 8192, 28672, 64, 8)},
    "train_llama2.sh": {7: (32, 4096, 11008, 32, 32), 13: (40, 5120, 13824, 40, 40), 70: (80, 8192, 28672, 64, 8)},
}
VOCAB = {"train_llama3.sh": 128256, "train_llama2.sh": 32000}
REQUIRED_INTS = ("MBS", "BS", "TP", "PP", "SEQ_LENGTH", "TOTAL_ITERS")
REQUIRED_FLAGS = ("TE_FP8", "FSDP", "RECOMPUTE", "MOCK_DATA")


@dataclass
class Job:
    script: str
    model_size: int
    mbs: int
    bs: int
    tp: int
    pp: int
    seq: int
    iters: int
    fp8: bool
    fsdp: bool
    recompute: bool
    nnodes: int
    rank: int
    master_addr: str
    master_port: int
    gpus: int

    @property
    def world(self) -> int:
        return self.nnodes * self.gpus

    @property
    def dims(self) -> tuple[int, int, int, int, int]:
        return MODELS[self.script][self.model_size]


def int_var(env: Mapping[str, str], name: str, script: str) -> int:
    raw = env.get(name)
    if raw is None:
        raise SimFailure([f"{BANNER} {name} is not set: the collection always passes it to {script} explicitly"])
    try:
        return int(raw)
    except ValueError:
        raise SimFailure([f"{script}: line 1: [: {raw}: integer expression expected",
                          f"pretrain_gpt.py: error: argument --{name.lower().replace('_', '-')}: "
                          f"invalid int value: '{raw}'"], exit_code=2) from None


def flag_var(env: Mapping[str, str], name: str, script: str) -> bool:
    value = int_var(env, name, script)
    if value not in (0, 1):
        raise SimFailure([f"{BANNER} {name}={value}: the script reads 0 or 1 only"])
    return value == 1


def read_job(env: Mapping[str, str], script: str) -> Job:
    raw_size = env.get("MODEL_SIZE", "")
    if raw_size not in {str(size) for size in MODELS[script]}:
        raise SimFailure(["Model size not supported."])
    values = {name: int_var(env, name, script) for name in REQUIRED_INTS}
    flags = {name: flag_var(env, name, script) for name in REQUIRED_FLAGS}
    if not flags["MOCK_DATA"]:
        raise SimFailure([f"{BANNER} MOCK_DATA=0: the simulator has no dataset; run with MOCK_DATA=1"])
    if "DATA_PATH" in env:
        raise SimFailure([f"{BANNER} DATA_PATH is set ({env['DATA_PATH']!r}): the script would read a real "
                          "dataset instead of mock data; leave DATA_PATH unset"])
    nnodes = env_int(env, "NNODES", 1)
    rank = env_int(env, "NODE_RANK", 0)
    port = env_int(env, "MASTER_PORT", 6000)
    assert nnodes is not None and rank is not None and port is not None
    if nnodes < 1 or not 0 < port < 65536:
        raise SimFailure([f"ValueError: NNODES={nnodes} must be >= 1 and MASTER_PORT={port} a TCP port"])
    tp = 1 if flags["FSDP"] else values["TP"]
    return Job(script, int(raw_size), values["MBS"], values["BS"], tp, values["PP"], values["SEQ_LENGTH"],
               values["TOTAL_ITERS"], flags["TE_FP8"], flags["FSDP"], flags["RECOMPUTE"], nnodes, rank,
               env.get("MASTER_ADDR", "localhost"), port, gpus_per_node(env))


def check_recompute(job: Job, env: Mapping[str, str]) -> None:
    if not job.recompute:
        return
    layers = job.dims[0]
    if env.get("RECOMPUTE_NUM_LAYERS") != str(layers):
        raise SimFailure([f"{BANNER} RECOMPUTE=1 needs RECOMPUTE_NUM_LAYERS={layers} for MODEL_SIZE="
                          f"{job.model_size}, found {env.get('RECOMPUTE_NUM_LAYERS')!r}: the script would pass "
                          "--recompute-num-layers 0 and silently disable recomputation"])


def check_network(job: Job, env: Mapping[str, str]) -> None:
    if job.nnodes == 1:
        return
    if not 0 <= job.rank < job.nnodes:
        raise SimFailure([f"ValueError: NODE_RANK={job.rank} is not in [0, NNODES={job.nnodes})"])
    for name in ("MASTER_ADDR", "NODE_RANK"):
        if not env.get(name):
            raise SimFailure([f"{BANNER} {name} is not set with NNODES={job.nnodes}"])
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        ifname = env.get(name) or "ens51np0"
        if not os.path.exists(os.path.join("/sys/class/net", ifname.split(",")[0].lstrip("^="))):
            raise SimFailure([
                "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                f"nullptr. Unable to find address for: {ifname}" if name == "GLOO_SOCKET_IFNAME" else
                f"NCCL WARN Bootstrap : no socket interface found matching {ifname}",
            ])
    if not env.get("NCCL_IB_HCA"):
        raise SimFailure(["NCCL WARN NET/IB : No device found matching NCCL_IB_HCA (the script's default: the first "
                          "eight 'rdma link' names)"])


def check_layout(job: Job, env: Mapping[str, str]) -> None:
    if not gpu_devices_visible(env):
        raise SimFailure(["RuntimeError: No HIP GPUs are available"])
    missing = missing_required_paths(env)
    if missing:
        raise SimFailure([f"FileNotFoundError: [Errno 2] No such file or directory: '{missing[0]}'"])
    if job.world % (job.tp * job.pp):
        raise SimFailure([f"RuntimeError: world_size ({job.world}) is not divisible by tensor_model_parallel_size "
                          f"({job.tp}) times pipeline_model_parallel_size ({job.pp})"])
    dp = job.world // (job.tp * job.pp)
    if job.bs % (job.mbs * dp):
        raise SimFailure([f"AssertionError: global batch size ({job.bs}) is not divisible by micro batch size "
                          f"({job.mbs}) times data parallel size ({dp})"])


def flops_per_iteration(job: Job) -> float:
    layers, hidden, ffn, heads, kv_heads = job.dims
    head_dim = hidden / heads
    attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
    params = layers * (attn + 3 * hidden * ffn) + 2 * VOCAB[job.script] * hidden
    per_token = 6 * params + 12 * layers * hidden * job.seq
    if job.recompute:
        per_token *= 4 / 3
    return per_token * job.bs * job.seq


def iteration_line(job: Job, it: int, ms: float, tflops: float, loss: float | None, mem: float) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    lr = 1e-4 * min(1.0, it / 10)
    loss_part = f" lm loss: {loss:.6E} |" if loss is not None else ""
    grad = f" grad norm: {1.5 + 1.0 / it:.3f} |" if loss is not None else ""
    nan_count = 0 if loss is not None else 1
    return (f" [{stamp}] iteration {it:8d}/{job.iters:8d} | consumed samples: {it * job.bs:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | mem usages: {mem:.4f} | "
            f"throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | learning rate: {lr:.6E} | "
            f"global batch size: {job.bs:5d} |{loss_part} loss scale: 1.0 |{grad} "
            f"number of skipped iterations:   0 | number of nan iterations: {nan_count:3d} |")


def summary_lines(job: Job, rows: list[tuple[float, float, float]]) -> list[str]:
    """The ROCm script's averages: iteration lines minus the first two and the last."""
    kept = rows[2:-1]
    if len(rows) < 4 or not kept:
        return ["", "throughput per GPU: nan", "elapsed time per iteration: nan", "tokens/GPU/s: nan",
                "mem usages: nan"]
    mean = [sum(col) / len(kept) for col in zip(*kept)]
    tokens = job.bs * job.seq * 1000 / (mean[1] * job.world)
    return ["", f"throughput per GPU: {mean[0]}", f"elapsed time per iteration: {mean[1]}",
            f"tokens/GPU/s: {tokens:.6f}", f"mem usages: {mean[2]}"]


def crash_lines(job: Job) -> list[str]:
    return [
        f"[rank{job.rank * job.gpus}]: Traceback (most recent call last):",
        f"[rank{job.rank * job.gpus}]:   File \"/workspace/Megatron-LM/megatron/training/training.py\", line 2025, "
        "in train_step",
        f"[rank{job.rank * job.gpus}]: torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO "
        "for details), NCCL version 2.22.3",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "pretrain_gpt.py FAILED",
        "  exitcode  : 1",
    ]


def lost_peer_lines(job: Job, rank: int) -> list[str]:
    return [
        f"[rank{job.rank * job.gpus}]:[E ProcessGroupNCCL.cpp:616] [Rank {job.rank * job.gpus}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
        f"torch.distributed.DistBackendError: NCCL communicator was aborted: node rank {rank} is gone "
        "(ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.)",
    ]


def rendezvous_failure(job: Job, err: RendezvousTimeout, timeout: float) -> list[str]:
    if err.role == "server":
        return [f"torch.distributed.DistStoreError: Timed out after {int(timeout) + 1} seconds waiting for clients. "
                f"{len(err.joined)}/{job.nnodes} clients joined."]
    if err.role == "shutdown":
        return [f"torch.distributed.DistStoreError: Timed out after {int(timeout)} seconds in the TCPStore "
                f"barrier at shutdown: {len(err.joined)}/{job.nnodes} ranks arrived."]
    return [f"torch.distributed.DistNetworkError: The client socket has timed out after {int(timeout * 1000)}ms "
            f"while trying to connect to ({job.master_addr}, {job.master_port})."]


class Output:
    """stdout, and the script's TRAIN_LOG when TEE_OUTPUT is on (as `tee` does)."""

    def __init__(self, env: Mapping[str, str], script: str) -> None:
        self.file: TextIO | None = None
        log_dir = env.get("LOG_DIR")
        if env.get("TEE_OUTPUT", "1") != "0" and log_dir:
            os.makedirs(log_dir, exist_ok=True)
            name = env.get("EXP_NAME") or f"{script.replace('train_', '').replace('.sh', '')}-sim"
            self.file = open(os.path.join(log_dir, f"output_{name}.log"), "a", encoding="utf-8")

    def __call__(self, line: str = "") -> None:
        say(line)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()


def train(env: Mapping[str, str], script: str) -> int:
    job = read_job(env, script)
    out = Output(env, script)
    faults = Faults.from_env(env, job.rank)
    check_recompute(job, env)
    check_network(job, env)
    check_layout(job, env)
    if env.get("DATA_CACHE_PATH"):
        os.makedirs(env["DATA_CACHE_PATH"], exist_ok=True)
    prints = job.rank == job.nnodes - 1
    out(f"{BANNER} simulated Megatron-LM training (no GPU, no model): {SCRIPT_DIR}/{script} MODEL_SIZE="
        f"{job.model_size} node rank {job.rank} of {job.nnodes}, {job.gpus} simulated GPUs per node, "
        f"{'FP8' if job.fp8 else 'BF16'}, TP={job.tp} PP={job.pp} FSDP={int(job.fsdp)}, {token_note(env)}"
        + ("" if prints else "; iteration lines are printed by the last node"))
    time.sleep(faults.start_delay)
    timeout = rendezvous_timeout(env, None)
    rendezvous = Rendezvous(job.master_addr, job.master_port, job.rank, job.nnodes, timeout)
    try:
        rendezvous.join()
    except RendezvousTimeout as err:
        raise SimFailure(rendezvous_failure(job, err, timeout)) from None
    speed = Speed.from_env(env, faults, seed=job.rank + 29)
    tflops = speed.tflops_per_device * (1.3 if job.fp8 else 1.0)
    ms = flops_per_iteration(job) / (tflops * 1e12 * job.world) * 1000
    out(f"> training with {job.world} GPUs: {job.nnodes} nodes x {job.gpus}, data parallel size "
        f"{job.world // (job.tp * job.pp)}")
    rows: list[tuple[float, float, float]] = []
    try:
        for it in range(1, job.iters + 1):
            if faults.hangs_at(it):
                hang_forever()
            if faults.crashes_at(it):
                raise SimFailure(crash_lines(job))
            pace(speed, rendezvous, first=it == 1)
            it_ms = ms * speed.jitter() * (6.0 if it == 1 else 1.0)
            it_tflops = flops_per_iteration(job) / (it_ms / 1000 * job.world) / 1e12
            mem = 0.62 + 0.1 * (job.model_size == 70) + speed.rng.uniform(0, 0.01)
            loss = None if faults.loss_is_nan(it) else speed.loss(it)
            rows.append((round(it_tflops, 1), round(it_ms, 1), round(mem, 4)))  # the script averages printed values
            if prints:
                out(iteration_line(job, it, it_ms, it_tflops, loss, mem))
        rendezvous.finish()
    except PeerLost as lost:
        raise SimFailure(lost_peer_lines(job, lost.rank)) from None
    except RendezvousTimeout as err:
        raise SimFailure(rendezvous_failure(job, err, timeout)) from None
    if prints:
        for line in summary_lines(job, rows):
            out(line)
    return 0


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    script = os.path.basename(argv[1]) if len(argv) > 1 else "train_llama3.sh"
    if script not in MODELS:
        script = "train_llama3.sh"
    return run_guarded(lambda: train(env, script),
                       lambda: env.get("CLUSTERVAL_SIM_EXIT_ZERO_ON_FAILURE", "0") == "1")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
