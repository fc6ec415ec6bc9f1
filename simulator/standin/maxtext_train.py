"""Stand-in for MaxText's train.py: ``train.py <config.yml> [key=value ...]``.

Checks its inputs the way MaxText, JAX and XLA would, rendezvouses with the
other nodes over TCP and prints MaxText's step lines.  Every node prints.
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

import simyaml  # noqa: E402
from clusterval_sim import (  # noqa: E402
    BANNER, Faults, PeerLost, Rendezvous, RendezvousTimeout, SimFailure, Speed, env_float, env_int,
    gpu_devices_visible, gpus_per_node, hang_forever, missing_required_paths, pace,
    rendezvous_timeout, run_guarded, say, token_note,
)

TRAIN_PY = "/workspace/maxtext/src/MaxText/train.py"
# How long real survivors take to exit after a peer process died: JAX's heartbeat timeout (measured 85 s
# with maxtext 0.2.5 / jax 0.12.0.1 on CPU, 2026-11-26; CLUSTERVAL_SIM_PEER_EXIT_SECONDS sets another).
DEFAULT_PEER_EXIT_SECONDS = 85.0
ICI_KEYS = ("data", "fsdp", "fsdp_transpose", "sequence", "tensor", "tensor_sequence",
            "pipeline", "expert", "autoregressive")


def traceback_lines(*frames: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        where, code = frame.split("|", 1)
        lines += [f"  File \"{where}", f"    {code}"]
    return lines


def config_error(exc_line: str) -> SimFailure:
    return SimFailure(traceback_lines(
        f"{TRAIN_PY}\", line 1080, in <module>|app.run(main)",
        f"{TRAIN_PY}\", line 1063, in main|config = pyconfig.initialize(argv)",
        "/workspace/maxtext/src/MaxText/pyconfig.py\", line 1214, in initialize|pyconfig = HyperParameters(argv, **kwargs)",
    ) + [exc_line])


# ---------------------------------------------------------------- config
def load_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise config_error(f"FileNotFoundError: [Errno {exc.errno}] {exc.strerror}: '{path}'") from None
    try:
        return simyaml.loads(text)
    except simyaml.YamlError as exc:
        raise config_error(f"yaml.parser.ParserError: {exc} in \"{path}\", line {exc.lineno}") from None


def base_config(script_path: str) -> dict[str, Any]:
    with open(os.path.join(os.path.dirname(os.path.abspath(script_path)), "base.yml"), encoding="utf-8") as handle:
        return simyaml.loads(handle.read())


def convert_cli(key: str, raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        if raw.lower() not in ("true", "false"):
            raise config_error(f"ValueError: Could not convert {raw!r} to bool for key {key}")
        return raw.lower() == "true"
    try:
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise config_error(f"ValueError: invalid literal for {type(default).__name__}() with base 10: {raw!r}") from None
    if isinstance(default, list):
        return simyaml.flow_list(raw, 0) if raw.startswith("[") else raw.split(",")
    return raw


def type_problem(key: str, value: Any, default: Any) -> str | None:
    if default is None or value is None:
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, list):
        ok = isinstance(value, list)
    else:
        ok = not isinstance(value, (list, dict))
    if ok:
        return None
    return (f"TypeError: config key {key!r} has value {value!r} of type {type(value).__name__}, "
            f"expected {type(default).__name__} (MaxText does not convert YAML values)")


def build_config(argv: list[str], script_path: str, env: Mapping[str, str]) -> dict[str, Any]:
    if len(argv) < 2:
        raise config_error("IndexError: list index out of range (usage: train.py <config.yml> [key=value ...])")
    defaults = base_config(script_path)
    given = load_yaml(argv[1])
    given.pop("base_config", None)
    unknown = sorted(k for k in given if k not in defaults)
    if unknown and env.get("CLUSTERVAL_SIM_STRICT_YAML_KEYS") == "1":
        raise config_error(f"ValueError: Keys {unknown} are not in base.yml (unknown config keys)")
    for key, value in given.items():
        problem = type_problem(key, value, defaults.get(key))
        if problem:
            raise config_error(problem)
    config = {**defaults, **given}
    for override in argv[2:]:
        key, sep, raw = override.partition("=")
        if not sep:
            raise config_error(f"ValueError: argument {override!r} is not of the form key=value")
        if key not in defaults:
            raise config_error(f"ValueError: Key {key} was passed at the command line but isn't in config.")
        config[key] = convert_cli(key, raw, defaults[key])
    return config


# ---------------------------------------------------------------- XLA
def load_flag_catalogue() -> dict[str, str]:
    catalogue = {}
    with open(os.path.join(HERE, "xla_flags.txt"), encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                name, kind = line.split()
                catalogue[name] = kind
    return catalogue


def flag_value_ok(kind: str, value: str | None) -> bool:
    if kind == "bool":
        return value is None or value in ("true", "false", "1", "0")
    if kind == "int":
        return value is not None and value.lstrip("-").isdigit()
    if kind == "tristate":
        return value in ("true", "false", "auto")
    return value is not None


def check_xla_flags(env: Mapping[str, str]) -> None:
    catalogue = load_flag_catalogue()
    unknown, illegal = [], []
    for token in env.get("XLA_FLAGS", "").split():
        name, sep, value = token[2:].partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("--") or name not in catalogue:
            unknown.append(token)
        elif not flag_value_ok(catalogue[name], value if sep else None):
            illegal.append(token)
    stamp = time.strftime("%m%d %H:%M:%S")
    if unknown:
        # as jaxlib >= 0.5 prints it (observed with 0.12.0.1: the first unknown flag, then the abort)
        raise SimFailure([f"F{stamp}.000000       1 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: "
                          + unknown[0], "*** Check failure stack trace: ***"], exit_code=134)
    if illegal:
        raise SimFailure([f"F{stamp}.000000       1 parse_flags_from_env.cc:234] Illegal value for flag in "
                          f"XLA_FLAGS: {' '.join(illegal)}", "Aborted (core dumped)"], exit_code=134)


# ---------------------------------------------------------------- cluster
def cluster_env(config: Mapping[str, Any], env: Mapping[str, str]) -> tuple[int, int, str, int]:
    """NNODES, NODE_RANK, coordinator address and port, as MaxText on GPU reads them."""
    coordinator = env.get("JAX_COORDINATOR_IP", "")
    if not str(config.get("hardware", "")).startswith("gpu") or not coordinator:
        return 1, 0, "localhost", 1234
    for name in ("NNODES", "NODE_RANK"):
        if name not in env:
            raise SimFailure(traceback_lines(
                "/workspace/maxtext/src/MaxText/max_utils.py\", line 228, in initialize_jax_for_gpu|"
                f"{name.lower()} = int(os.environ[\"{name}\"])",
            ) + [f"KeyError: '{name}'"])
    nnodes = env_int(env, "NNODES")
    rank = env_int(env, "NODE_RANK")
    port = env_int(env, "JAX_COORDINATOR_PORT", 1234)
    assert nnodes is not None and rank is not None and port is not None
    if nnodes < 1 or not 0 <= rank < nnodes:
        raise SimFailure([f"ValueError: NODE_RANK={rank} is not in [0, NNODES={nnodes})"])
    if not 0 < port < 65536:
        raise SimFailure([f"ValueError: JAX_COORDINATOR_PORT={port} is not a TCP port"])
    return nnodes, rank, coordinator, port


def resolve_product(config: Mapping[str, Any], prefix: str, total: int) -> int:
    values = [int(config.get(f"{prefix}_{axis}_parallelism", 1)) for axis in ICI_KEYS]
    if values.count(-1) > 1:
        raise SimFailure([f"AssertionError: at most one {prefix}_*_parallelism may be -1, found {values.count(-1)}"])
    known = math.prod(v for v in values if v != -1)
    if -1 in values:
        if known == 0 or total % known:
            raise SimFailure([f"AssertionError: Unable to infer the -1 {prefix} parallelism: {total} is not "
                              f"divisible by {known}"])
        return total
    return known


def check_parallelism(config: Mapping[str, Any], gpus: int, nnodes: int) -> None:
    ici = resolve_product(config, "ici", gpus)
    if ici != gpus:
        raise SimFailure([f"AssertionError: Number of devices per slice {gpus} does not match the product "
                          f"of the ICI parallelism {ici}"])
    dcn = resolve_product(config, "dcn", nnodes)
    if dcn != nnodes:
        raise SimFailure([f"AssertionError: Number of slices {nnodes} does not match the product of the "
                          f"DCN parallelism {dcn}"])


def check_environment(env: Mapping[str, str]) -> None:
    if not gpu_devices_visible(env):
        raise SimFailure(traceback_lines(
            "/usr/local/lib/python3.10/dist-packages/jax/_src/xla_bridge.py\", line 929, in backends|"
            "backend = _init_backend(platform)",
        ) + ["RuntimeError: Unable to initialize backend 'rocm': FAILED_PRECONDITION: No visible GPU devices. "
             "(you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)"])
    missing = missing_required_paths(env)
    if missing:
        raise SimFailure([f"FileNotFoundError: [Errno 2] No such file or directory: '{missing[0]}'"])


# ---------------------------------------------------------------- training
def flops_per_token(config: Mapping[str, Any]) -> float:
    emb = float(config["base_emb_dim"])
    layers = float(config["base_num_decoder_layers"])
    head_dim = float(config["head_dim"])
    attn = emb * head_dim * (2 * float(config["base_num_query_heads"]) + 2 * float(config["base_num_kv_heads"]))
    mlp = 3 * emb * float(config["base_mlp_dim"])
    params = layers * (attn + mlp) + 2 * float(config["vocab_size"]) * emb
    attention_scores = 12 * layers * emb * float(config["max_target_length"])
    return 6 * params + attention_scores


def crash_lines() -> list[str]:
    return traceback_lines(
        f"{TRAIN_PY}\", line 1080, in <module>|app.run(main)",
        f"{TRAIN_PY}\", line 954, in train_loop|state, metrics = p_train_step(state, example_batch, nextrng)",
    ) + ["jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RCCL operation ncclAllReduce(send_buffer, recv_buffer, "
         "element_count, dtype, reduce_op, comm, gpu_stream) failed: unhandled system error (run with NCCL_DEBUG=INFO "
         "for details); current tracing scope: all-reduce-start.1; current profiling annotation: XlaModule:#prefix=jit(train_step)"]


def gloo_peer_closed_line(address: str) -> str:
    """What every survivor prints at once when a peer process on another node dies (observed: maxtext 0.2.5,
    jax 0.12.0.1 on CPU, gloo; the GPU build's collectives name NCCL/RCCL instead)."""
    return ("jax.errors.JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: [external/xla++third_party_ext+gloo/gloo/"
            f"transport/tcp/pair.cc:538] Read error {address}: Connection reset by peer")


def lost_peer_lines(rank: int) -> list[str]:
    stamp = time.strftime("%m%d %H:%M:%S")
    return [
        f"E{stamp}.000000       1 coordination_service_agent.cc:332] Polled an error from coordination service "
        "(this can be an error from this or another task).",
        f"F{stamp}.000000       1 client.h:77] Terminating process because the JAX distributed service detected "
        "fatal errors. This most likely indicates that another task died; see the other task logs for more details. "
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        f"/job:jax_worker/replica:0/task:{rank}",
        "The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, "
        "eviction) to debug further.",
    ]


def barrier_timeout_lines(err: RendezvousTimeout, barrier: str) -> list[str]:
    missing = [r for r in range(err.nnodes) if r not in err.joined]
    return [
        f"jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: {barrier}. This usually "
        "happens because a task triggered the barrier too early or too slowly. Please look at the task logs (both "
        "timed out and first task) to debug further.",
        f"# of tasks that reached the barrier: {len(err.joined)}/{err.nnodes}.",
        f"The first task at the barrier: /job:jax_worker/replica:0/task:{err.joined[0] if err.joined else 0}. "
        "Some timed out task names:",
        *[f"/job:jax_worker/replica:0/task:{r}" for r in missing],
    ]


def step_seconds(step: int, compute_s: float, speed: Speed) -> float:
    if step == 0:
        return compute_s * 8.0 * speed.jitter()
    if step == 1:
        return compute_s * 0.06 * speed.jitter()
    return compute_s * speed.jitter()


def train(config: Mapping[str, Any], env: Mapping[str, str], script_path: str) -> int:
    check_xla_flags(env)
    nnodes, rank, coordinator, port = cluster_env(config, env)
    faults = Faults.from_env(env, rank)
    gpus = gpus_per_node(env)
    check_environment(env)
    check_parallelism(config, gpus, nnodes)
    steps = int(config["steps"])
    say(f"{BANNER} simulated MaxText training (no GPU, no model): {script_path} on node rank {rank} of {nnodes}, "
        f"{gpus} simulated GPUs per node, {steps} steps, {token_note(env)}")
    time.sleep(faults.start_delay)
    timeout = rendezvous_timeout(env, env_float(env, "JAX_DISTRIBUTED_INITIALIZATION_TIMEOUT_SECONDS", 300.0))
    rendezvous = Rendezvous(coordinator, port, rank, nnodes, timeout)
    try:
        rendezvous.join()
    except RendezvousTimeout as err:
        raise SimFailure(barrier_timeout_lines(err, "PjRT_Client_Connect")) from None
    speed = Speed.from_env(env, faults, seed=rank + 17)
    devices = gpus * nnodes
    tokens_per_device = float(config["per_device_batch_size"]) * int(config["max_target_length"])
    flops_device_step = flops_per_token(config) * tokens_per_device
    compute_s = flops_device_step / (speed.tflops_per_device * 1e12)
    say(f"Num_devices: {devices}, shape ({nnodes}, {gpus})")
    say(f"Per train step:\n Total TFLOPs: {flops_device_step / 1e12:.2f} \n split as 100.00% learnable weight "
        "flops and 0.00% attention flops")
    try:
        for step in range(steps):
            if faults.hangs_at(step):
                hang_forever()
            if faults.crashes_at(step):
                raise SimFailure(crash_lines())
            pace(speed, rendezvous, first=step == 0)
            # lock-step, as real JAX: the step completes when every rank reached it, at the slowest's pace
            seconds = rendezvous.collective(step, step_seconds(step, compute_s, speed))
            loss = "nan" if faults.loss_is_nan(step) else f"{speed.loss(step):.3f}"
            say(f"completed step: {step}, seconds: {seconds:.3f}, "
                f"TFLOP/s/device: {flops_device_step / seconds / 1e12:.3f}, "
                f"Tokens/s/device: {tokens_per_device / seconds:.3f}, "
                f"total_weights: {int(tokens_per_device * devices)}, loss: {loss}")
        rendezvous.finish()
    except PeerLost as lost:
        # Real survivors print gloo's error at once, then wait for JAX's heartbeat timeout before they abort.
        say(gloo_peer_closed_line(rendezvous.peer_address(lost.rank)))
        time.sleep(env_float(env, "CLUSTERVAL_SIM_PEER_EXIT_SECONDS", DEFAULT_PEER_EXIT_SECONDS))
        raise SimFailure(lost_peer_lines(lost.rank), exit_code=134) from None
    except RendezvousTimeout as err:
        raise SimFailure(barrier_timeout_lines(err, "Shutdown")) from None
    say("Distributed task shutdown result: OK")
    return 0


def main(argv: list[str], script_path: str, env: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)

    def body() -> int:
        return train(build_config(argv, script_path, env), env, script_path)

    return run_guarded(body, lambda: False)


if __name__ == "__main__":
    sys.exit(main(sys.argv, os.path.abspath(__file__)))
