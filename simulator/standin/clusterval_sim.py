"""Shared core of the training stand-ins of the clusterval simulator image.

Knobs (environment), rendezvous over TCP, fault injection and the simulated
speed.  Pure standard library: the image carries Python without PyYAML.
"""
from __future__ import annotations

import math
import os
import random
import select
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NoReturn

BANNER = "[clusterval simulator]"
DEFAULT_GPUS = 8
DEFAULT_STEP_SECONDS = 0.2
# Wall-clock seconds of the first step: real frameworks compile (XLA, torch.compile, NCCL warm-up) there.
DEFAULT_FIRST_STEP_SECONDS = 2.0
DEFAULT_TFLOPS = 400.0
RENDEZVOUS_CAP_S = 120.0


class SimFailure(Exception):
    """Ends the run: the lines are printed as the real framework would, then exit."""

    def __init__(self, lines: list[str], exit_code: int = 1) -> None:
        super().__init__(lines[-1] if lines else "failure")
        self.lines = lines
        self.exit_code = exit_code


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def token_note(env: Mapping[str, str]) -> str:
    """Whether the framework got an HF token, never the token."""
    return "HF_TOKEN set" if env.get("HF_TOKEN") else "no HF_TOKEN"


def env_int(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SimFailure([f"{BANNER} {name}={raw!r} is not an integer"]) from None


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise SimFailure([f"{BANNER} {name}={raw!r} is not a number"]) from None


def rank_selected(env: Mapping[str, str], name: str, rank: int) -> bool:
    """A fault knob's rank: unset means every rank."""
    wanted = env_int(env, name)
    return wanted is None or wanted == rank


@dataclass
class Faults:
    crash_at: int | None = None
    crash_here: bool = False
    hang_at: int | None = None
    hang_here: bool = False
    nan_at: int | None = None
    slow_factor: float = 1.0
    start_delay: float = 0.0
    exit_zero_on_failure: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], rank: int) -> "Faults":
        slow = env_float(env, "CLUSTERVAL_SIM_SLOW_FACTOR", 1.0)
        if slow <= 0:
            raise SimFailure([f"{BANNER} CLUSTERVAL_SIM_SLOW_FACTOR must be > 0, got {slow}"])
        return cls(
            crash_at=env_int(env, "CLUSTERVAL_SIM_CRASH_AT_STEP"),
            crash_here=rank_selected(env, "CLUSTERVAL_SIM_CRASH_RANK", rank),
            hang_at=env_int(env, "CLUSTERVAL_SIM_HANG_AT_STEP"),
            hang_here=rank_selected(env, "CLUSTERVAL_SIM_HANG_RANK", rank),
            nan_at=env_int(env, "CLUSTERVAL_SIM_NAN_AT_STEP"),
            slow_factor=slow if rank_selected(env, "CLUSTERVAL_SIM_SLOW_RANK", rank) else 1.0,
            start_delay=env_float(env, "CLUSTERVAL_SIM_START_DELAY", 0.0),
            exit_zero_on_failure=env.get("CLUSTERVAL_SIM_EXIT_ZERO_ON_FAILURE", "0") == "1",
        )

    def crashes_at(self, step: int) -> bool:
        return self.crash_here and self.crash_at is not None and step == self.crash_at

    def hangs_at(self, step: int) -> bool:
        return self.hang_here and self.hang_at is not None and step == self.hang_at

    def loss_is_nan(self, step: int) -> bool:
        return self.nan_at is not None and step >= self.nan_at


@dataclass
class Speed:
    """Wall-clock pace of the simulation and the simulated device speed."""

    step_seconds: float
    tflops_per_device: float
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    first_step_seconds: float = DEFAULT_FIRST_STEP_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str], faults: Faults, seed: int) -> "Speed":
        step = env_float(env, "CLUSTERVAL_SIM_STEP_SECONDS", DEFAULT_STEP_SECONDS)
        tflops = env_float(env, "CLUSTERVAL_SIM_TFLOPS", DEFAULT_TFLOPS)
        first = env_float(env, "CLUSTERVAL_SIM_FIRST_STEP_SECONDS", DEFAULT_FIRST_STEP_SECONDS)
        if step < 0 or tflops <= 0 or first < 0:
            raise SimFailure([f"{BANNER} CLUSTERVAL_SIM_STEP_SECONDS and CLUSTERVAL_SIM_FIRST_STEP_SECONDS must be >= 0 "
                              "and CLUSTERVAL_SIM_TFLOPS > 0"])
        return cls(step * faults.slow_factor, tflops / faults.slow_factor, random.Random(seed),
                   max(first, step) * faults.slow_factor)

    def jitter(self, spread: float = 0.02) -> float:
        return 1.0 + self.rng.uniform(-spread, spread)

    def loss(self, step: int, start: float = 12.0) -> float:
        """Decreasing loss with a little noise, as a healthy run shows."""
        return start * math.exp(-0.04 * step) + 1.5 + self.rng.uniform(-0.02, 0.02)


def gpus_per_node(env: Mapping[str, str]) -> int:
    count = env_int(env, "CLUSTERVAL_SIM_GPUS", DEFAULT_GPUS)
    assert count is not None
    if count < 1:
        raise SimFailure([f"{BANNER} CLUSTERVAL_SIM_GPUS must be >= 1, got {count}"])
    return count


def device_root(env: Mapping[str, str]) -> str:
    return env.get("CLUSTERVAL_SIM_DEVICE_ROOT", "/dev")


def gpu_devices_visible(env: Mapping[str, str]) -> bool:
    """AMD's device nodes (/dev/kfd and a render node), or NVIDIA's (/dev/nvidiactl and /dev/nvidia0: what the
    NVIDIA Container Toolkit's hook, here the simulated cluster's stand-in, makes for a device request)."""
    root = device_root(env)
    dri = os.path.join(root, "dri")
    has_render = os.path.isdir(dri) and any(n.startswith("renderD") for n in os.listdir(dri))
    amd = os.path.exists(os.path.join(root, "kfd")) and has_render
    nvidia = os.path.exists(os.path.join(root, "nvidiactl")) and os.path.exists(os.path.join(root, "nvidia0"))
    return amd or nvidia


def missing_required_paths(env: Mapping[str, str]) -> list[str]:
    """CLUSTERVAL_SIM_REQUIRE_PATHS: colon-separated paths the volumes must provide."""
    wanted = [p for p in env.get("CLUSTERVAL_SIM_REQUIRE_PATHS", "").split(":") if p]
    return [p for p in wanted if not os.path.exists(p)]


def rendezvous_timeout(env: Mapping[str, str], framework_default: float | None) -> float:
    explicit = env.get("CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT", "")
    if explicit:
        return env_float(env, "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT", RENDEZVOUS_CAP_S)
    if framework_default is None:
        return RENDEZVOUS_CAP_S
    return min(framework_default, RENDEZVOUS_CAP_S)


class RendezvousTimeout(Exception):
    def __init__(self, joined: list[int], nnodes: int, role: str) -> None:
        super().__init__(f"{len(joined)}/{nnodes} joined")
        self.joined = joined
        self.nnodes = nnodes
        self.role = role  # "server": rank 0 waiting; "connect": cannot reach rank 0; "go": joined, no go


class PeerLost(Exception):
    def __init__(self, rank: int) -> None:
        super().__init__(f"rank {rank} lost")
        self.rank = rank


class Rendezvous:
    """Rank 0 listens on the coordinator port; every other rank connects.

    Text lines over TCP: ``HELLO <rank> <nnodes>`` from each rank, ``GO`` from
    rank 0 once all ``nnodes`` joined.  The connections stay open during
    training so a rank that dies is noticed by the others (``DONE`` marks a
    normal end, ``BYE`` releases everyone at shutdown).
    """

    def __init__(self, address: str, port: int, rank: int, nnodes: int, timeout: float) -> None:
        self.address = address
        self.port = port
        self.rank = rank
        self.nnodes = nnodes
        self.timeout = timeout
        self.peers: dict[int, socket.socket] = {}
        self.done: set[int] = set()
        self.server: socket.socket | None = None
        self.buffers: dict[int, bytes] = {}

    # ---- joining
    def join(self) -> None:
        if self.nnodes == 1:
            return
        if self.rank == 0:
            self._serve()
        else:
            self._connect()

    def _serve(self) -> None:
        deadline = time.monotonic() + self.timeout
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("", self.port))
        except OSError as exc:
            raise SimFailure([f"RuntimeError: The server socket has failed to listen on any local network address. "
                              f"port: {self.port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: {exc.strerror}"])
        listener.listen(self.nnodes)
        self.server = listener
        while len(self.peers) < self.nnodes - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([listener], [], [], remaining)[0]:
                raise RendezvousTimeout([0, *sorted(self.peers)], self.nnodes, "server")
            conn, dummy = listener.accept()
            self._admit(conn, deadline)
        for conn in self.peers.values():
            conn.sendall(b"GO\n")

    def _admit(self, conn: socket.socket, deadline: float) -> None:
        line = read_line(conn, deadline)
        parts = (line or "").split()
        if len(parts) != 3 or parts[0] != "HELLO" or not parts[1].isdigit() or not parts[2].isdigit():
            conn.close()  # not one of ours
            return
        rank, nnodes = int(parts[1]), int(parts[2])
        if nnodes != self.nnodes:
            conn.sendall(f"ERR NNODES={self.nnodes} on rank 0\n".encode())
            raise SimFailure([f"RuntimeError: inconsistent world: rank {rank} says NNODES={nnodes}, "
                              f"rank 0 says NNODES={self.nnodes}"])
        if rank in self.peers or rank <= 0 or rank >= self.nnodes:
            conn.sendall(f"ERR rank {rank} already joined or out of range\n".encode())
            raise SimFailure([f"RuntimeError: duplicate or invalid NODE_RANK {rank} joined the rendezvous"])
        self.peers[rank] = conn

    def _connect(self) -> None:
        deadline = time.monotonic() + self.timeout
        conn = None
        while conn is None:
            try:
                conn = socket.create_connection((self.address, self.port), timeout=1.0)
            except OSError:
                if time.monotonic() >= deadline:
                    raise RendezvousTimeout([], self.nnodes, "connect") from None
                time.sleep(0.2)
        conn.sendall(f"HELLO {self.rank} {self.nnodes}\n".encode())
        reply = read_line(conn, deadline)
        if reply is None:
            raise RendezvousTimeout([self.rank], self.nnodes, "go")
        if reply.startswith("ERR"):
            raise SimFailure([f"RuntimeError: rendezvous refused by rank 0: {reply[4:]}"])
        self.peers[0] = conn

    # ---- during training
    def check_peers(self) -> None:
        """Raise PeerLost when a peer's connection closed before it said DONE."""
        for rank, conn in list(self.peers.items()):
            if rank in self.done:
                continue
            while select.select([conn], [], [], 0)[0]:
                chunk = conn.recv(4096)
                if not chunk:
                    if rank == 0 and b"BYE" in self.buffers.get(rank, b""):
                        return
                    raise PeerLost(rank)
                self.buffers[rank] = self.buffers.get(rank, b"") + chunk
                if b"DONE" in self.buffers[rank]:
                    self.done.add(rank)
                    break

    def collective(self, step: int, seconds: float) -> float:
        """The step's collective, as every real train step all-reduces: no rank completes step ``step`` before
        every rank has reached it (lock-step). A hung rank stops every other rank here, a slow rank slows
        them all, a dead rank's closed connection is PeerLost. Every rank gets the step's slowest seconds."""
        if self.nnodes == 1:
            return seconds
        if self.rank == 0:
            slowest = seconds
            for rank in sorted(self.peers):
                slowest = max(slowest, float(self._await(rank, "AT %d" % step)))
            for conn in self.peers.values():
                conn.sendall(b"GO %d %.6f\n" % (step, slowest))
            return slowest
        self.peers[0].sendall(b"AT %d %.6f\n" % (step, seconds))
        return float(self._await(0, "GO %d" % step))

    def _await(self, rank: int, word: str) -> str:
        """Blocks until the peer sent the line ``<word> <value>``; its value. No timeout: a real collective
        waits for its peers as long as the peers' connections stay open."""
        conn, prefix = self.peers[rank], ("\n" + word + " ").encode()
        while True:
            buffered = b"\n" + self.buffers.get(rank, b"")
            start = buffered.find(prefix)
            end = buffered.find(b"\n", start + len(prefix)) if start >= 0 else -1
            if end >= 0:
                return buffered[start + len(prefix):end].decode()
            if not select.select([conn], [], [], 1.0)[0]:
                continue
            chunk = conn.recv(4096)
            if not chunk:
                raise PeerLost(rank)
            self.buffers[rank] = self.buffers.get(rank, b"") + chunk
            if b"DONE" in self.buffers[rank]:
                self.done.add(rank)

    def peer_address(self, rank: int) -> str:
        try:
            host, port = self.peers[rank].getpeername()[:2]
        except (KeyError, OSError):
            return "%s:%d" % (self.address, self.port)
        return "[%s]:%d" % (host, port)

    def finish(self) -> None:
        """Shutdown barrier: every rank reports DONE to rank 0, which answers BYE."""
        if self.nnodes == 1:
            return
        deadline = time.monotonic() + self.timeout
        if self.rank == 0:
            while len(self.done) < self.nnodes - 1:
                if time.monotonic() >= deadline:
                    raise RendezvousTimeout([0, *sorted(self.done)], self.nnodes, "shutdown")
                self.check_peers()
                time.sleep(0.05)
            for conn in self.peers.values():
                conn.sendall(b"BYE\n")
        else:
            self.peers[0].sendall(b"DONE\n")
            buffered = self.buffers.get(0, b"")
            while b"BYE" not in buffered:
                line = read_line(self.peers[0], deadline)
                if line is None:
                    raise RendezvousTimeout([self.rank], self.nnodes, "shutdown")
                buffered += line.encode()
        self.close()

    def close(self) -> None:
        for conn in self.peers.values():
            conn.close()
        if self.server is not None:
            self.server.close()


def read_line(conn: socket.socket, deadline: float) -> str | None:
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([conn], [], [], remaining)[0]:
            return None
        chunk = conn.recv(1)
        if not chunk:
            return None
        data += chunk
    return data.decode().strip()


def pace(speed: Speed, rendezvous: Rendezvous, first: bool = False) -> float:
    """Sleep one simulated step (the first one compiles: longer), watching the peers while waiting; its seconds."""
    seconds = (speed.first_step_seconds if first else speed.step_seconds) * speed.jitter(0.05)
    end = time.monotonic() + seconds
    while True:
        rendezvous.check_peers()
        remaining = end - time.monotonic()
        if remaining <= 0:
            return seconds
        time.sleep(min(remaining, 0.05))


def hang_forever() -> NoReturn:
    while True:
        time.sleep(3600)


def run_guarded(body: Callable[[], int], exit_zero_on_failure: Callable[[], bool]) -> int:
    """Run a stand-in: a SimFailure prints its lines and sets the exit status."""
    try:
        return body()
    except SimFailure as failure:
        for line in failure.lines:
            say(line)
        if exit_zero_on_failure():
            return 0
        return failure.exit_code


def torchrun_rendezvous(env: Mapping[str, str], topology: Mapping[str, Any], faults: Faults) -> Rendezvous:
    """The node joins its torchrun job after the fault's start delay; a rendezvous that fails prints PyTorch's
    DistNetworkError."""
    time.sleep(faults.start_delay)
    rendezvous = Rendezvous(topology["master"], topology["port"], topology["rank"], topology["nnodes"],
                            rendezvous_timeout(env, None))
    try:
        rendezvous.join()
    except RendezvousTimeout as err:
        raise SimFailure([f"torch.distributed.DistNetworkError: rendezvous with {topology['master']}:"
                          f"{topology['port']} failed: {len(err.joined)}/{topology['nnodes']} nodes joined"]) from None
    return rendezvous


def check_nproc(env: Mapping[str, str], topology: Mapping[str, Any], unit: str) -> None:
    """torchrun's --nproc_per_node against the node's simulated devices (CLUSTERVAL_SIM_GPUS)."""
    simulated = env_int(env, "CLUSTERVAL_SIM_GPUS")
    if simulated is not None and simulated != topology["gpus"]:
        raise SimFailure([f"{BANNER} --nproc_per_node {topology['gpus']} but the node has {simulated} (simulated) "
                          f"{unit}"])


def crash_lines(topology: Mapping[str, Any], entry: str) -> list[str]:
    """torchrun's summary of a rank (local rank 3 of the node) killed by a signal."""
    rank = topology["rank"] * topology["gpus"] + 3
    pid = os.getpid() + 3
    return ["[%s] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -11) local_rank: 3 "
            "(pid: %d) of binary: /usr/bin/python3" % (time.strftime("%Y-%m-%d %H:%M:%S,000"), pid),
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "============================================================",
            f"{entry} FAILED",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {time.strftime('%Y-%m-%d_%H:%M:%S')}",
            f"  host      : {os.uname().nodename}",
            f"  rank      : {rank} (local_rank: 3)",
            f"  exitcode  : -11 (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : Signal 11 (SIGSEGV) received by PID {pid}",
            "============================================================"]


def torchrun_topology(argv: list[str]) -> tuple[dict, int]:
    """torchrun's options (--nproc_per_node N --nnodes N --node_rank R --master_addr A --master_port P, or
    --option=value; c10d's --rdzv_endpoint A:P; --rdzv_id, --rdzv_backend, --role, --tee taken as given; the flag
    --module) before the script: the topology, and the index of the script (or module) in ``argv``."""
    topology: dict = {"gpus": 8, "nnodes": 1, "rank": 0, "master": "localhost", "port": 29500, "module": False}
    names = {"--nproc_per_node": ("gpus", int), "--nnodes": ("nnodes", int), "--node_rank": ("rank", int),
             "--master_addr": ("master", str), "--master_port": ("port", int), "--rdzv_endpoint": ("endpoint", str),
             "--rdzv_id": ("rdzv_id", str), "--rdzv_backend": ("rdzv_backend", str), "--role": ("role", str),
             "--tee": ("tee", str)}
    index = 0
    while index < len(argv) and argv[index].startswith("--"):
        option, _sep, inline = argv[index].partition("=")
        if option in ("--module", "-m"):
            topology["module"] = True
            index += 1
            continue
        if option not in names:
            raise SimFailure([f"torchrun: error: unrecognized arguments: {argv[index]}"], exit_code=2)
        raw = inline if inline else (argv[index + 1] if index + 1 < len(argv) else "")
        index += 1 if inline else 2
        key, kind = names[option]
        try:
            topology[key] = kind(raw)
        except ValueError:
            raise SimFailure([f"torchrun: error: argument {option}: invalid value: '{raw}'"], exit_code=2) from None
    endpoint = topology.pop("endpoint", None)
    if endpoint is not None:
        # c10d's default port when the endpoint names none (torch.distributed.elastic's parse_rendezvous_endpoint)
        host, sep, port = endpoint.rpartition(":")
        topology["master"], topology["port"] = (host, int(port)) if sep and port.isdigit() else (endpoint, 29400)
    return topology, index
