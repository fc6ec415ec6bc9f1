"""Stand-in for Neuronx Distributed Training (NxDT) under torchrun, in the clusterval simulator image.

``torchrun --nproc_per_node D --nnodes N --node_rank R --master_addr A --master_port P training_orchestrator.py
--config-path DIR --config-name NAME``, run in NxDT's examples directory as its train.sh does. It reads the
YAML as NxDT would see it and refuses what NxDT refuses (the precision type its training_orchestrator.py does
not know, a trainer.devices that is not --nproc_per_node, a world that TP x PP x CP does not divide), checks the
node's Neuron devices and, for several nodes, EFA (FI_PROVIDER=efa, /dev/infiniband/uverbs*), rendezvouses
with the other nodes over TCP and prints NxDT's output: the Neuron compile cache's lines on every node, and from
global rank 0 only (the first node) PyTorch Lightning's tqdm bar, one update per step after a carriage return
and one newline at the end. Failures print the real lines: the Neuron runtime without a device, the EFA plugin
without EFA, torchrun's ChildFailedError for a crashed rank, a peer's reset connection on the survivors.
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from clusterval_sim import (  # noqa: E402
    BANNER, Faults, PeerLost, RendezvousTimeout, SimFailure, Speed, check_nproc, crash_lines, device_root,
    hang_forever, pace, run_guarded, say, token_note, torchrun_rendezvous, torchrun_topology,
)
from simyaml import scalar, strip_comment  # noqa: E402

ENTRY_POINT = "training_orchestrator.py"
# examples/training_orchestrator.py's precision types; its error message lists the documented spelling
PRECISIONS = ("bf16SR", "mixed_precision", "mixed_precision_SR", "fp32", "autocast", "manual")
PRECISION_ERROR = ("ValueError: Invalid option given for precision type. Must be one of bf16SR, fp32, autocast, "
                   "mixed_precision, mixed_precisionSR, or manual.")
CACHE_DIR = "/var/tmp/neuron-compile-cache"
COMPILER = "neuronxcc-2.21.18209.0+043b1bf7"
CORES_PER_DEVICE = 2  # trn1


def read_nested(path: str) -> dict[str, Any]:
    """The block mappings of a YAML (indentation-nested ``key: value``) as dotted keys; list items skipped."""
    values: dict[str, Any] = {}
    stack: list[tuple[int, str]] = []
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = strip_comment(raw.rstrip("\n"))
            text = line.strip()
            if not text or text.startswith("- ") or text == "-" or ":" not in text:
                continue
            indent = len(line) - len(line.lstrip(" "))
            key, _sep, rest = text.partition(":")
            while stack and stack[-1][0] >= indent:
                stack.pop()
            dotted = ".".join([name for _i, name in stack] + [key.strip()])
            if rest.strip():
                values[dotted] = scalar(rest)
            else:
                stack.append((indent, key.strip()))
    return values


def config_file(argv: list[str]) -> str:
    """--config-path DIR --config-name NAME (or --config-path=DIR, -cp, -cn), as Hydra reads them."""
    names = {"--config-path": "path", "-cp": "path", "--config-name": "name", "-cn": "name"}
    options: dict[str, str] = {}
    index = 0
    while index < len(argv):
        option, sep, inline = argv[index].partition("=")
        if option not in names:
            raise SimFailure([f"{BANNER} the stand-in takes no Hydra overrides (got {argv[index]!r}): the plan "
                              "writes every setting into the YAML"])
        options[names[option]] = inline if sep else (argv[index + 1] if index + 1 < len(argv) else "")
        index += 1 if sep else 2
    name = options.get("name", "")
    path = os.path.join(options.get("path", ""), name if name.endswith(".yaml") else name + ".yaml")
    if not os.path.isfile(path):
        raise SimFailure(["Traceback (most recent call last):",
                          f"hydra.errors.MissingConfigException: Cannot find primary config '{name}'. Check that it's "
                          "in your config search path."])
    return path


def checked(values: Mapping[str, Any], topology: Mapping[str, Any]) -> None:
    if values.get("precision.type") not in PRECISIONS:
        raise SimFailure(["Error executing job with overrides: []", "Traceback (most recent call last):",
                          f'  File "{ENTRY_POINT}", line 135, in process_config', PRECISION_ERROR])
    if values.get("trainer.devices") != topology["gpus"]:
        raise SimFailure([f"{BANNER} trainer.devices is {values.get('trainer.devices')!r} but torchrun starts "
                          f"{topology['gpus']} processes per node (--nproc_per_node)"])
    if values.get("trainer.num_nodes") != topology["nnodes"]:
        raise SimFailure([f"{BANNER} trainer.num_nodes is {values.get('trainer.num_nodes')!r} but torchrun has "
                          f"--nnodes {topology['nnodes']}"])
    sizes = [int(values.get("distributed_strategy." + key) or 1) for key in
             ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")]
    world = topology["gpus"] * topology["nnodes"]
    if world % math.prod(sizes):
        raise SimFailure(["Traceback (most recent call last):",
                          f"RuntimeError: world_size ({world}) is not divisible by tensor_model_parallel_size "
                          f"({sizes[0]}) times pipeline_model_parallel_size ({sizes[1]}) times "
                          f"context_parallel_size ({sizes[2]})"])


def neuron_devices(env: Mapping[str, str]) -> int:
    root = device_root(env)
    return sum(1 for name in os.listdir(root) if name.startswith("neuron") and name[6:].isdigit()) \
        if os.path.isdir(root) else 0


def check_node(env: Mapping[str, str], topology: Mapping[str, Any]) -> None:
    """The Neuron runtime's start: enough NeuronCores; across nodes, the EFA plugin of its collectives."""
    stamp = time.strftime("%Y-%b-%d %H:%M:%S.000000")
    pid = os.getpid()
    devices = neuron_devices(env)
    if devices * CORES_PER_DEVICE < topology["gpus"]:
        line = (f"{stamp} {pid}:{pid} ERROR  TDRV:tdrv_get_dev_info                       No neuron device available"
                if devices == 0 else
                f"{stamp} {pid}:{pid} ERROR  TDRV:tdrv_init_mla_phase1                    Could not open the nd{devices}")
        raise SimFailure([line, "RuntimeError: Neuron runtime cannot be initialized; cannot determine the number "
                                "of available NeuronCores"])
    efa = os.path.exists(os.path.join(device_root(env), "infiniband", "uverbs0"))
    if topology["nnodes"] > 1 and (env.get("FI_PROVIDER") != "efa" or not efa):
        raise SimFailure([f"{stamp} {pid}:{pid} [0] nccl_net_ofi_init:1415 CCOM WARN NET/OFI aws-ofi-nccl "
                          "initialization failed",
                          f"{stamp} {pid}:{pid} [0] init.cc:138 CCOM WARN OFI plugin initNet() failed is EFA enabled?"])


def compile_cache_lines(env: Mapping[str, str], values: Mapping[str, Any]) -> list[str]:
    """The cache NxDT sets from compiler_cache_url, unless NEURON_COMPILE_CACHE_URL was set outside."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S.000100")
    cache = env.get("NEURON_COMPILE_CACHE_URL") or values.get("compiler_cache_url") or CACHE_DIR
    return [f"{stamp}:  {os.getpid()}  INFO ||NEURON_CACHE||: Compile cache path: {cache}",
            f"{stamp}:  {os.getpid()}  INFO ||NEURON_CC_WRAPPER||: Using a cached neff at {cache}/{COMPILER}/"
            "MODULE_50a122f44c378e1567a4+ede6753c/model.neff. Exiting with a successfully compiled graph."]


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return "%02d:%02d" % (minutes, secs) if minutes < 60 else "%d:%02d:%02d" % (minutes // 60, minutes % 60, secs)


def bar_update(step: int, total: int, elapsed: float, seconds: float, loss: float, gbs: int, lr: float) -> str:
    """PyTorch Lightning's tqdm bar as NxDT fills it (base.py log_metrics; Lightning adds loss and v_num)."""
    done = step + 1
    filled = done * 10 // total
    rate = ("%.2fs/it" % seconds) if seconds >= 1 else ("%.2fit/s" % (1.0 / seconds if seconds > 0 else 0.0))
    throughput = gbs / seconds if seconds > 0 else 0.0
    return ("Epoch 0: %3d%%|%s%s| %d/%d [%s<%s, %s, loss=%.3g, v_num=1, reduced_train_loss=%.3f, lr=%.3g, "
            "parameter_norm=1.95e+3, global_step=%.3f, consumed_samples=%.1f, throughput=%.3g, throughput_peak=%.3g, "
            "gradient_norm=%.3f]" % (done * 100 // total, "#" * filled, " " * (10 - filled), done, total,
                                     clock(elapsed), clock(seconds * (total - done)), rate, loss, loss, lr, step,
                                     done * float(gbs), throughput, throughput * 1.02, 1.0 + 8.0 / done))


def train(values: Mapping[str, Any], env: Mapping[str, str], topology: Mapping[str, Any]) -> int:
    checked(values, topology)
    first = topology["rank"] == 0
    say(f"{BANNER} simulated Neuronx Distributed Training (no Trainium, no model): node rank {topology['rank']} "
        f"of {topology['nnodes']}, {topology['gpus']} simulated NeuronCores per node, {token_note(env)}"
        + ("" if first else "; the progress bar is printed by global rank 0, on the first node"))
    check_node(env, topology)
    faults = Faults.from_env(env, topology["rank"])
    rendezvous = torchrun_rendezvous(env, topology, faults)
    for line in compile_cache_lines(env, values):
        say(line)
    speed = Speed.from_env(env, faults, seed=topology["rank"] + 53)
    total = int(values.get("trainer.max_steps") or 1)
    gbs = int(values.get("data.global_batch_size") or 1)
    lr = float(values.get("model.optim.lr") or 1.5e-4)
    elapsed = 0.0
    try:
        for step in range(total):
            if faults.hangs_at(step):
                hang_forever()
            if faults.crashes_at(step):
                raise SimFailure(([""] if first and step else []) + crash_lines(topology, ENTRY_POINT))
            seconds = rendezvous.collective(step, pace(speed, rendezvous, first=step == 0))
            elapsed += seconds
            loss = float("nan") if faults.loss_is_nan(step) else speed.loss(step, 9.0)
            if first:
                sys.stdout.write("\r" + bar_update(step, total, elapsed, seconds, loss, gbs, lr))
                sys.stdout.flush()
        if first:
            say()
        rendezvous.finish()
    except PeerLost as lost:
        raise SimFailure(["" if first else f"{BANNER} node rank {lost.rank} is gone",
                          f"RuntimeError: [{rendezvous.peer_address(lost.rank)}] Connection reset by peer"]) from None
    except RendezvousTimeout as err:
        raise SimFailure([f"torch.distributed.DistStoreError: {len(err.joined)}/{topology['nnodes']} ranks "
                          "arrived"]) from None
    return 0


def torchrun_main(argv: list[str], env: Mapping[str, str]) -> int:
    topology, index = torchrun_topology(argv)
    if index >= len(argv) or os.path.basename(argv[index]) != ENTRY_POINT:
        raise SimFailure([f"{BANNER} the NxDT stand-in runs {ENTRY_POINT} only"])
    if not os.path.isfile(argv[index]):
        raise SimFailure([f"/usr/bin/python3: can't open file '{os.path.abspath(argv[index])}': [Errno 2] No such "
                          "file or directory"], exit_code=2)
    check_nproc(env, topology, "NeuronCores")
    return train(read_nested(config_file(argv[index + 1:])), env, topology)


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    return run_guarded(lambda: torchrun_main(argv[2:], env), lambda: False)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
