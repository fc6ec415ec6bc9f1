#!/usr/bin/python3
"""SIMULATED rccl-tests all_reduce_perf / alltoall_perf for the clusterval simulated cluster (no GPU here).

In the simulator image where the vendors' images keep them: /opt/rccl-tests/build (ROCm) and
/opt/nccl-tests/build (NVIDIA), run by the fabric gate in a container on every node.

It moves real bytes: the ranks of the group (one per node, from CLUSTERVAL_FABRIC_RANK, _NRANKS, _PEERS and
_PORT, which the fabric gate sets) form a ring over TCP between the nodes' network namespaces, and each step of
the ring algorithm sends a chunk to the next rank while receiving one from the previous (all-reduce: 2(n-1)
steps of size/n; all-to-all: n-1). A node alone runs a ring of its -g "GPUs" over loopback. The time is
measured, and rank 0 prints rccl-tests' table with the measured figures, so a `tc` token bucket on one node's
interface slows every ring through that node, as it would slow RCCL.

    all_reduce_perf -b 256K -e 1M -f 2 -g 8 -n 3 -w 1

Real rccl-tests and nccl-tests meet across nodes only through MPI and ignore those variables: each process
started on its own runs its node alone. CLUSTERVAL_SIM_FABRIC_MPI_ONLY=1 makes the stand-in do the same.
"""
import argparse
import os
import socket
import sys
import threading
import time

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
CONNECT_POLL_S = 0.05


def size(text):
    text = text.strip().upper()
    unit = text[-1] if text[-1:] in UNITS else ""
    return int(float(text[:len(text) - len(unit)]) * UNITS[unit])


def arguments(argv):
    parser = argparse.ArgumentParser(prog=os.path.basename(sys.argv[0]), add_help=True)
    parser.add_argument("-b", "--minbytes", type=size, default=size("32M"))
    parser.add_argument("-e", "--maxbytes", type=size, default=size("32M"))
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-g", "--ngpus", type=int, default=1)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup_iters", type=int, default=5)
    parser.add_argument("-c", "--check", type=int, default=1)
    return parser.parse_args(argv)


class Link:
    """This rank's two sockets of the ring: to the next rank and from the previous one."""

    def __init__(self, to_next, from_prev):
        self.to_next, self.from_prev = to_next, from_prev

    def step(self, chunk):
        payload = memoryview(bytearray(chunk))
        sender = threading.Thread(target=self.to_next.sendall, args=(payload,))
        sender.start()
        remaining, buffer = chunk, bytearray(min(chunk, 1 << 20))
        while remaining:
            got = self.from_prev.recv_into(buffer, min(remaining, len(buffer)))
            if not got:
                raise ConnectionError("the previous rank closed the ring")
            remaining -= got
        sender.join()

    def close(self):
        for sock in (self.to_next, self.from_prev):
            sock.close()


def listener(host, port):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(1)
    return server


def connect_ring(server, next_host, next_port, deadline):
    """This rank's link in the ring: the previous rank connects to ``server`` (already listening), this rank to
    the next one."""
    server.settimeout(max(deadline - time.monotonic(), 0.1))
    result = {}

    def accept():
        try:
            result["prev"] = server.accept()[0]
        except OSError as exc:
            result["error"] = exc
    acceptor = threading.Thread(target=accept)
    acceptor.start()
    while True:
        try:
            to_next = socket.create_connection((next_host, next_port), timeout=max(deadline - time.monotonic(), 0.1))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError("rank at %s:%d did not answer" % (next_host, next_port))
            time.sleep(CONNECT_POLL_S)
    acceptor.join()
    server.close()
    if "prev" not in result:
        raise TimeoutError("the previous rank did not connect: %s" % result.get("error"))
    for sock in (to_next, result["prev"]):
        sock.settimeout(max(deadline - time.monotonic(), 0.1))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Link(to_next, result["prev"])


def measure(link, nranks, steps_of, sizes, iters, warmup):
    times = []
    for nbytes in sizes:
        chunk = max(nbytes // nranks, 1)
        for dummy in range(warmup):
            for dummy_step in range(steps_of(nranks)):
                link.step(chunk)
        started = time.perf_counter()
        for dummy in range(iters):
            for dummy_step in range(steps_of(nranks)):
                link.step(chunk)
        times.append((time.perf_counter() - started) / max(iters, 1) * 1e6)
    return times


def local_ring(ngpus, steps_of, sizes, iters, warmup, deadline):
    """A node alone: its -g ranks in threads, a ring over loopback; rank 0's times. Every rank listens before
    any connects: a port chosen free and bound later could meanwhile be another rank's outgoing one."""
    servers = [listener("127.0.0.1", 0) for dummy in range(ngpus)]
    ports = [server.getsockname()[1] for server in servers]
    results, errors = {}, []

    def rank(index):
        try:
            link = connect_ring(servers[index], "127.0.0.1", ports[(index + 1) % ngpus], deadline)
            results[index] = measure(link, ngpus, steps_of, sizes, iters, warmup)
            link.close()
        except OSError as exc:
            errors.append(exc)
    threads = [threading.Thread(target=rank, args=(i,)) for i in range(ngpus)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results[0]


def row(nbytes, usec, factor, op):
    count = nbytes // 4
    algbw = nbytes / usec / 1e3 if usec > 0 else 0.0
    busbw = algbw * factor
    timestr = ("%7.2f" % usec) if usec < 10000 else ("%7.0f" % usec)
    part = "  %7s  %6.2f  %6.2f  %5s" % (timestr, algbw, busbw, "N/A")
    return "%12d  %12d  %8s  %6s  %6d%s%s" % (nbytes, count, "float", op, -1, part, part), busbw


def alltoall_steps(nranks):
    return nranks - 1


def all_reduce_steps(nranks):
    return 2 * (nranks - 1)


def main():
    args = arguments(sys.argv[1:])
    alltoall = "alltoall" in os.path.basename(sys.argv[0])
    name = "alltoall_perf" if alltoall else "all_reduce_perf"
    rank = int(os.environ.get("CLUSTERVAL_FABRIC_RANK", "0"))
    nranks = int(os.environ.get("CLUSTERVAL_FABRIC_NRANKS", "1"))
    if os.environ.get("CLUSTERVAL_SIM_FABRIC_MPI_ONLY") == "1":
        rank, nranks = 0, 1
    peers = [p for p in os.environ.get("CLUSTERVAL_FABRIC_PEERS", "").split(",") if p]
    port = int(os.environ.get("CLUSTERVAL_FABRIC_PORT", "29650"))
    deadline = time.monotonic() + float(os.environ.get("CLUSTERVAL_FABRIC_TIMEOUT", "120"))
    sizes, nbytes = [], args.minbytes
    while nbytes <= args.maxbytes:
        sizes.append(nbytes)
        nbytes *= max(args.stepfactor, 2)
    steps_of = alltoall_steps if alltoall else all_reduce_steps
    ring = nranks if nranks > 1 else args.ngpus
    try:
        if nranks > 1:
            link = connect_ring(listener("0.0.0.0", port), peers[(rank + 1) % nranks], port, deadline)
            times = measure(link, nranks, steps_of, sizes, args.iters, args.warmup_iters)
            link.close()
        elif args.ngpus > 1:
            times = local_ring(args.ngpus, steps_of, sizes, args.iters, args.warmup_iters, deadline)
        else:
            times = [0.0 for dummy in sizes]
    except (OSError, ConnectionError) as exc:
        print("%s: simulated %s failed on rank %d: %s" % (socket.gethostname(), name, rank, exc), flush=True)
        return 1
    if rank != 0:
        print("# [clusterval simulator] rank %d of %d done" % (rank, nranks))
        return 0
    factor = (2.0 * (ring - 1) / ring if not alltoall else (ring - 1) / float(ring)) if ring > 1 else 1.0
    print("# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d agg iters: 1 "
          "validation: 0 graph: 0" % (args.ngpus, args.minbytes, args.maxbytes, args.stepfactor, args.warmup_iters,
                                      args.iters))
    print("#")
    print("rccl-tests: Version clusterval-simulated")
    print("# [clusterval simulator] SIMULATED %s: real bytes over TCP between the nodes, no GPU" % name)
    print("# Using devices")
    hosts = peers if nranks > 1 else [socket.gethostname()] * args.ngpus
    for index, host in enumerate(hosts):
        print("#  Rank %2d Group  0 Pid %6d on %10s device %2d [0000:00:00] simulated"
              % (index, os.getpid(), host, index % args.ngpus))
    print("#")
    print("#%62s%35s" % ("out-of-place", "in-place"))
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
          "   busbw #wrong")
    print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
          "  (GB/s)")
    total = 0.0
    for nbytes, usec in zip(sizes, times):
        line, busbw = row(nbytes, usec, factor, "none" if alltoall else "sum")
        total += busbw
        print(line)
    print("# Out of bounds values : 0 OK")
    print("# Avg bus bandwidth    : %g" % (total / max(len(sizes), 1)))
    print("#")
    return 0


if __name__ == "__main__":
    sys.exit(main())
