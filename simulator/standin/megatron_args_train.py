"""Stand-in for Megatron-LM's pretrain_gpt.py under torchrun (NGC images) and for Primus's
examples/run_pretrain.sh (its Megatron backend), in the clusterval simulator image.

Both read the job's Megatron-LM arguments (the command line, or the ``overrides`` of Primus's experiment file),
check them as Megatron would (batch divisibility, parallel sizes), print Megatron-LM's argument dump from
rank 0 (Primus runs Megatron's own validate_args, which prints the same block), rendezvous over TCP and
print the iteration lines from the job's last node: Megatron-LM's plain lines, or Primus's (its log prefix,
``instant/average`` pairs, tokens per GPU, hip memory). The loss follows ``--seed``: two jobs with the same
seed and data print losses that agree within a fraction of a percent, as two vendors' runs should.
"""
from __future__ import annotations

import json
import math
import os
import random
import shlex
import sys
import time
from typing import Any, Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from clusterval_sim import (  # noqa: E402
    BANNER, Faults, PeerLost, Rendezvous, RendezvousTimeout, SimFailure, Speed, gpu_devices_visible,
    hang_forever, pace, rendezvous_timeout, run_guarded, say, token_note,
)
from simyaml import scalar  # noqa: E402

# What the dump prints for arguments the job leaves out (Megatron-LM's defaults of the arguments that matter
# to the comparison; the real dump has about 350).
DEFAULTS: dict[str, Any] = {
    "accumulate_allreduce_grads_in_fp32": False, "adam_beta1": 0.9, "adam_beta2": 0.999, "add_bias_linear": True,
    "apply_rope_fusion": True, "bf16": False, "bias_dropout_fusion": True, "bias_swiglu_fusion": True,
    "context_parallel_size": 1, "cross_entropy_loss_fusion": False, "data_path": None, "eval_iters": 100,
    "fp16": False, "fp32_residual_connection": False, "fp8": None, "global_batch_size": None,
    "group_query_attention": False, "init_method_std": 0.02, "load": None, "log_interval": 100,
    "log_throughput": False, "lr": None, "lr_decay_style": "linear", "lr_warmup_iters": 0,
    "masked_softmax_fusion": True, "micro_batch_size": None, "min_lr": 0.0, "mock_data": False,
    "no_persist_layer_norm": False, "overlap_grad_reduce": False, "overlap_param_gather": False,
    "pipeline_model_parallel_size": 1, "recompute_granularity": None, "save": None, "seed": 1234,
    "seq_length": None, "sequence_parallel": False, "split": None, "tensor_model_parallel_size": 1,
    "tokenizer_model": None, "tokenizer_type": None, "train_iters": None, "use_distributed_optimizer": False,
    "use_flash_attn": False, "weight_decay": 0.01, "gradient_accumulation_fusion": True, "use_torch_fsdp2": False,
    "untie_embeddings_and_output_weights": False,
}
# Upstream Megatron-LM's parser as data (core_v0.19.0: tests/fixtures/megatron-lm/SOURCE.md): every option
# pretrain_gpt.py accepts, its dest and kind; the stand-in refuses what that parser refuses.
UPSTREAM_ARGUMENTS = os.path.join(HERE, "megatron_lm_arguments.json")
CASTS = {"int": int, "float": float}


def upstream_options() -> dict[str, dict[str, Any]]:
    with open(UPSTREAM_ARGUMENTS, encoding="utf-8") as handle:
        return json.load(handle)["options"]


def usage_error(message: str) -> SimFailure:
    return SimFailure([f"pretrain_gpt.py: error: {message}"], exit_code=2)


def option_values(argv: list[str], index: int, option: str, nargs: Any) -> tuple[list[str], int]:
    """The values an option takes from argv[index:] (argparse's nargs: None one, an int that many, +/* a run)."""
    if nargs in ("+", "*"):
        end = index
        while end < len(argv) and not argv[end].startswith("--"):
            end += 1
        if nargs == "+" and end == index:
            raise usage_error(f"argument {option}: expected at least one argument")
        return argv[index:end], end
    count = 1 if nargs in (None, "?") else int(nargs)
    taken = argv[index:index + count]
    if len(taken) < count or any(value.startswith("--") for value in taken):
        raise usage_error(f"argument {option}: expected {'one argument' if count == 1 else f'{count} arguments'}")
    return taken, index + count


def typed(option: str, spec: Mapping[str, Any], raw: str) -> Any:
    kind = spec["kind"]
    if kind == "choice" and raw not in spec["choices"]:
        choices = ", ".join(repr(choice) for choice in spec["choices"])
        raise usage_error(f"argument {option}: invalid choice: {raw!r} (choose from {choices})")
    try:
        return CASTS.get(kind, str)(raw)
    except ValueError:
        raise usage_error(f"argument {option}: invalid {kind} value: {raw!r}") from None


def parse_command_line(argv: list[str], options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """pretrain_gpt.py's arguments by dest, as upstream's parser reads them (allow_abbrev=False)."""
    options = upstream_options() if options is None else options
    values: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        option, sep, inline = argv[index].partition("=")
        spec = options.get(option)
        if spec is None or not option.startswith("--"):
            raise usage_error(f"unrecognized arguments: {argv[index]}")
        if spec["kind"] in ("store_true", "store_false"):
            values[spec["dest"]] = spec["kind"] == "store_true"
            index += 1
            continue
        raw, index = ([inline], index + 1) if sep else option_values(argv, index + 1, option, spec.get("nargs"))
        parsed = [typed(option, spec, value) for value in raw]
        values[spec["dest"]] = parsed if spec.get("nargs") not in (None, "?") else parsed[0]
    return values


def validate(values: Mapping[str, Any]) -> None:
    """The assertions of upstream's validate_args that the collection's launches could trip."""
    def check(condition: bool, message: str) -> None:
        if not condition:
            raise SimFailure([f"AssertionError: {message}"])

    if values.get("overlap_param_gather"):
        check(bool(values.get("use_distributed_optimizer")), "--overlap-param-gather only supported with "
              "distributed optimizer, megatron fsdp, or dist_muon")
        check(bool(values.get("overlap_grad_reduce")), "Must use --overlap-param-gather with --overlap-grad-reduce")
    if values.get("use_torch_fsdp2"):
        check(values.get("pipeline_model_parallel_size") == 1,
              "--use-torch-fsdp2 is not supported with pipeline parallelism")
        check(not values.get("use_distributed_optimizer"),
              "--use-torch-fsdp2 is not supported with MCore's distributed optimizer")
        check(not values.get("gradient_accumulation_fusion"),
              "--use-torch-fsdp2 is not supported with gradient accumulation fusion")
        check(bool(values.get("untie_embeddings_and_output_weights")),
              "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights")


def read_experiment(path: str) -> dict[str, Any]:
    """The nested mappings of a Primus experiment file (block style, as PyYAML's safe_dump writes it)."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            indent = len(raw) - len(raw.lstrip(" "))
            key, _sep, rest = raw.strip().partition(":")
            while stack[-1][0] >= indent:
                stack.pop()
            if rest.strip():
                stack[-1][1][key] = scalar(rest)
            else:
                child: dict[str, Any] = {}
                stack[-1][1][key] = child
                stack.append((indent, child))
    return root


def dump_value(value: Any) -> str:
    if isinstance(value, str) and value == "":
        return ""
    if isinstance(value, list):
        return repr(value)
    return str(value)


def argument_dump(values: Mapping[str, Any]) -> list[str]:
    """Megatron-LM's block, as its _print_args writes it: sorted, dots to column 48."""
    lines = ["------------------------ arguments ------------------------"]
    for name in sorted(values, key=str.lower):
        lines.append("  {} {} {}".format(name, "." * (48 - len(name)), dump_value(values[name])).rstrip())
    lines.append("-------------------- end of arguments ---------------------")
    return lines


class Job:
    def __init__(self, values: Mapping[str, Any], nnodes: int, rank: int, gpus: int, master: str, port: int) -> None:
        self.values = dict(values)
        self.nnodes, self.rank, self.gpus, self.master, self.port = nnodes, rank, gpus, master, port
        for name in ("micro_batch_size", "global_batch_size", "seq_length", "train_iters"):
            if not isinstance(values.get(name), int):
                raise SimFailure([f"{BANNER} {name} is not set: the collection always passes it"])
        self.world = nnodes * gpus
        tp, pp = int(values["tensor_model_parallel_size"]), int(values["pipeline_model_parallel_size"])
        if self.world % (tp * pp):
            raise SimFailure([f"RuntimeError: world_size ({self.world}) is not divisible by tensor_model_parallel_size"
                              f" ({tp}) times pipeline_model_parallel_size ({pp})"])
        self.dp = self.world // (tp * pp)
        mbs, gbs = int(values["micro_batch_size"]), int(values["global_batch_size"])
        if gbs % (mbs * self.dp):
            raise SimFailure([f"AssertionError: global batch size ({gbs}) is not divisible by micro batch size "
                              f"({mbs}) times data parallel size ({self.dp})"])
        self.values["data_parallel_size"] = self.dp
        self.values["world_size"] = self.world
        self.iters = int(values["train_iters"])
        self.gbs = gbs

    def flops_per_iteration(self) -> float:
        layers = int(self.values.get("num_layers") or 32)
        hidden = int(self.values.get("hidden_size") or 4096)
        ffn = int(self.values.get("ffn_hidden_size") or 14336)
        heads = int(self.values.get("num_attention_heads") or 32)
        groups = int(self.values.get("num_query_groups") or heads)
        seq = int(self.values["seq_length"])
        attn = hidden * (hidden / heads) * (2 * heads + 2 * groups)
        params = layers * (attn + 3 * hidden * ffn) + 2 * 128256 * hidden
        return (6 * params + 12 * layers * hidden * seq) * self.gbs * seq

    def loss(self, it: int, vendor_spread: float, vendor_seed: int) -> float:
        """Same seed, same data: the same curve; each vendor's numerics move it by up to ``vendor_spread``."""
        shared = random.Random(int(self.values.get("seed") or 1234) * 100003 + it).uniform(-0.02, 0.02)
        own = random.Random(vendor_seed * 7919 + it).uniform(-vendor_spread, vendor_spread)
        return (9.0 * math.exp(-0.08 * it) + 2.2 + shared) * (1 + own)


def lr_at(values: Mapping[str, Any], it: int) -> float:
    peak, warmup = float(values.get("lr") or 1e-4), int(values.get("lr_warmup_iters") or 0)
    return peak * min(1.0, it / warmup) if warmup else peak


def megatron_line(job: Job, it: int, ms: float, tflops: float, loss: float | None) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    loss_part = f" lm loss: {loss:.6E} |" if loss is not None else ""
    return (f" [{stamp}] iteration {it:8d}/{job.iters:8d} | consumed samples: {it * job.gbs:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | "
            f"learning rate: {lr_at(job.values, it):.6E} | global batch size: {job.gbs:5d} |{loss_part} "
            f"loss scale: 1.0 | grad norm: {1.5 + 1.0 / it:.3f} | number of skipped iterations:   0 | "
            f"number of nan iterations: {0 if loss is not None else 1:3d} |")


def primus_line(job: Job, it: int, ms: tuple[float, float], tflops: tuple[float, float], tokens: tuple[float, float],
                loss: float | None) -> str:
    stamp = time.strftime("%Y%m%d %H:%M:%S")
    world = job.world
    used, total = 153.81, 255.98
    loss_part = f" lm loss: {loss:.6E} |" if loss is not None else ""
    return (f"[{stamp}][rank-{world - 1}/{world}][INFO ] [--------trainer.py:2560] : iteration {it:8d}/{job.iters:8d}"
            f" | consumed samples: {it * job.gbs:12d} | elapsed time per iteration (ms): {ms[0]:.1f}/{ms[1]:.1f} | "
            f"hip mem usage/free/total/usage_ratio: {used:.2f}GB/{total - used:.2f}GB/{total:.2f}GB/"
            f"{100 * used / total:.2f}% | throughput per GPU (TFLOP/s/GPU): {tflops[0]:.1f}/{tflops[1]:.1f} | "
            f"tokens per GPU (tokens/s/GPU): {tokens[0]:.1f}/{tokens[1]:.1f} | learning rate: {lr_at(job.values, it):.6E}"
            f" | global batch size: {job.gbs:5d} |{loss_part} loss scale: 1.0 | grad norm: {1.5 + 1.0 / it:.3f} | "
            f"number of skipped iterations:   0 | number of nan iterations: {0 if loss is not None else 1:3d} |")


def env_number(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SimFailure([f"{BANNER} {name}={raw!r} is not an integer"]) from None


def train(values: Mapping[str, Any], env: Mapping[str, str], topology: Mapping[str, Any], style: str) -> int:
    merged = dict(DEFAULTS)
    merged.update(values)
    validate(merged)
    job = Job(merged, topology["nnodes"], topology["rank"], topology["gpus"], topology["master"], topology["port"])
    if not gpu_devices_visible(env):
        raise SimFailure(["RuntimeError: No HIP GPUs are available" if style == "primus"
                          else "RuntimeError: No CUDA GPUs are available"])
    faults = Faults.from_env(env, job.rank)
    label = "Primus (run_pretrain.sh, Megatron backend)" if style == "primus" else "Megatron-LM pretrain_gpt.py"
    prints = job.rank == job.nnodes - 1
    say(f"{BANNER} simulated {label} training (no GPU, no model): node rank {job.rank} of {job.nnodes}, "
        f"{job.gpus} simulated GPUs per node, {token_note(env)}"
        + ("" if prints else "; iteration lines are printed by the last node"))
    if job.rank == 0:
        say(f"using world size: {job.world}, data-parallel size: {job.dp}, context-parallel size: "
            f"{merged.get('context_parallel_size')}, tensor-model-parallel size: {merged['tensor_model_parallel_size']}, "
            f"pipeline-model-parallel size: {merged['pipeline_model_parallel_size']}")
        for line in argument_dump(job.values):
            say(line)
    time.sleep(faults.start_delay)
    timeout = rendezvous_timeout(env, None)
    rendezvous = Rendezvous(job.master, job.port, job.rank, job.nnodes, timeout)
    try:
        rendezvous.join()
    except RendezvousTimeout as err:
        raise SimFailure([f"torch.distributed.DistNetworkError: rendezvous with {job.master}:{job.port} failed: "
                          f"{len(err.joined)}/{job.nnodes} nodes joined"]) from None
    speed = Speed.from_env(env, faults, seed=job.rank + 31)
    tflops = speed.tflops_per_device * (1.0 if style == "primus" else 1.08)
    base_ms = job.flops_per_iteration() / (tflops * 1e12 * job.world) * 1000
    seq = int(merged["seq_length"])
    totals = [0.0, 0.0, 0.0]
    try:
        for it in range(1, job.iters + 1):
            if faults.hangs_at(it):
                hang_forever()
            if faults.crashes_at(it):
                raise SimFailure([f"[rank{job.rank * job.gpus}]: torch.distributed.DistBackendError: NCCL error: "
                                  "unhandled system error", "ChildFailedError: pretrain_gpt.py FAILED"])
            pace(speed, rendezvous, first=it == 1)
            ms = base_ms * speed.jitter() * (6.0 if it == 1 else 1.0)
            it_tflops = job.flops_per_iteration() / (ms / 1000 * job.world) / 1e12
            tokens = job.gbs * seq * 1000 / (ms * job.world)
            loss = None if faults.loss_is_nan(it) else job.loss(it, 0.003, 1 if style == "primus" else 2)
            for index, value in enumerate((ms, it_tflops, tokens)):
                totals[index] += value
            if prints:
                if style == "primus":
                    say(primus_line(job, it, (ms, totals[0] / it), (it_tflops, totals[1] / it),
                                    (tokens, totals[2] / it), loss))
                else:
                    say(megatron_line(job, it, ms, it_tflops, loss))
        rendezvous.finish()
    except PeerLost as lost:
        raise SimFailure([f"torch.distributed.DistBackendError: NCCL communicator was aborted: node rank "
                          f"{lost.rank} is gone"]) from None
    except RendezvousTimeout as err:
        raise SimFailure([f"torch.distributed.DistStoreError: {len(err.joined)}/{job.nnodes} ranks arrived"]) from None
    return 0


def torchrun_main(argv: list[str], env: Mapping[str, str]) -> int:
    """torchrun --nproc_per_node N --nnodes N --node_rank R --master_addr A --master_port P pretrain_gpt.py ..."""
    topology: dict[str, Any] = {"gpus": 8, "nnodes": 1, "rank": 0, "master": "localhost", "port": 29500}
    names = {"--nproc_per_node": ("gpus", int), "--nnodes": ("nnodes", int), "--node_rank": ("rank", int),
             "--master_addr": ("master", str), "--master_port": ("port", int)}
    index = 0
    while index < len(argv) and argv[index].startswith("--"):
        option, _sep, inline = argv[index].partition("=")
        if option not in names:
            raise SimFailure([f"torchrun: error: unrecognized arguments: {argv[index]}"], exit_code=2)
        raw = inline if inline else (argv[index + 1] if index + 1 < len(argv) else "")
        index += 1 if inline else 2
        key, kind = names[option]
        try:
            topology[key] = kind(raw)
        except ValueError:
            raise SimFailure([f"torchrun: error: argument {option}: invalid value: '{raw}'"], exit_code=2) from None
    if index >= len(argv) or os.path.basename(argv[index]) != "pretrain_gpt.py":
        raise SimFailure([f"{BANNER} torchrun stand-in runs pretrain_gpt.py only, got {shlex.join(argv[index:])}"])
    simulated_gpus = env_number(env, "CLUSTERVAL_SIM_GPUS", 8)
    if topology["gpus"] != simulated_gpus:
        raise SimFailure([f"{BANNER} --nproc_per_node {topology['gpus']} but the node has {simulated_gpus} "
                          "(simulated) GPUs"])
    values = parse_command_line(argv[index + 1:])
    return train(values, env, topology, "megatron")


def primus_main(env: Mapping[str, str]) -> int:
    """examples/run_pretrain.sh: EXP names the experiment file; torchrun's topology comes from the environment."""
    exp = env.get("EXP", "")
    if not exp:
        say("[NODE-0] [ERROR] EXP must be specified.")
        return 1
    if not os.path.isfile(exp):
        say(f"[NODE-0] [ERROR] The specified EXP file does not exist: {exp}")
        return 1
    document = read_experiment(exp)
    module = (document.get("modules") or {}).get("pre_trainer") or {}
    if module.get("framework") != "megatron":
        raise SimFailure([f"{BANNER} modules.pre_trainer.framework is {module.get('framework')!r}: the stand-in "
                          "runs the Megatron backend"])
    topology = {"gpus": env_number(env, "GPUS_PER_NODE", 8), "nnodes": env_number(env, "NNODES", 1),
                "rank": env_number(env, "NODE_RANK", 0), "master": env.get("MASTER_ADDR", "localhost"),
                "port": env_number(env, "MASTER_PORT", 1234)}
    if topology["gpus"] != env_number(env, "CLUSTERVAL_SIM_GPUS", 8):
        raise SimFailure([f"{BANNER} GPUS_PER_NODE={topology['gpus']} but the node has "
                          f"{env_number(env, 'CLUSTERVAL_SIM_GPUS', 8)} (simulated) GPUs"])
    host = os.uname().nodename
    say(f"[NODE-{topology['rank']}({host})] [INFO] EXP: {exp}")
    say(f"[NODE-{topology['rank']}({host})] [INFO] TRAIN_LOG: {env.get('TRAIN_LOG', '')}")
    overrides = dict(module.get("overrides") or {})
    if "train_data_path" in overrides:
        overrides["data_path"] = overrides.pop("train_data_path")
    return train(overrides, env, topology, "primus")


def main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    mode = os.path.basename(argv[1]) if len(argv) > 1 else ""
    if mode == "torchrun":
        return run_guarded(lambda: torchrun_main(argv[2:], env), lambda: False)
    return run_guarded(lambda: primus_main(env), lambda: False)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
