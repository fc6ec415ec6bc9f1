# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The node side of the run: the supervisor, and the one read of every node's status stream.

The supervisor is the training container's first process on every node.

It waits for the gang start, runs the launch script as its child, parses the training log incrementally
with ``_logs`` and appends what it found to its node's status stream on the shared ``data_cache_dir``
(``<status dir>/nodes/<host>.jsonl``, one JSON object a line) and to ``<node run dir>/status.json``.
The controller reads every stream with one task per poll and renews one lease file; the supervisor stops
its job (SIGTERM to the process group, then SIGKILL) when no lease was renewed for ``lease_timeout``
seconds, when the run's deadline passed, or when the controller writes ``stop`` into the lease.
While it waits for the gang start, each container of the run that comes up (a new status stream: the
controller is starting them) renews its lease too; with ``gang_lease`` (no node pulls its image, so the
containers start within seconds of each other) it stops waiting when the lease lapses, else at
``gang_timeout``. Whatever ended it, it removes the HF token's copy the controller handed over
(``token_copy``): the job is over. The container ends with it: no job outlives its run. Standard library
only (it runs in the framework's image); Python 3.6+.

Stream records (``t``): ``up`` (waiting for the gang start), ``start`` (child started), ``step``,
``error``, ``advisory``, ``beat`` (every poll: alive, last step), ``summary``, ``sample`` (after
``sample_after_s`` without a new step, and again each time as long: the state and kernel wait channel of every
process of the job, and its Python stacks where ``py-spy`` is in the image), ``exit`` (the end:
``exit_code``, ``reason`` exit|lease|deadline|stopped|signal|gang|launch; ``lease`` before ``start``: the
lease lapsed while the container waited for the gang start).

``poll`` (the module clusterval.training.training_status, on one node) renews the lease and reads what every
supervisor appended since the previous poll.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _atomic
from ansible_collections.clusterval.training.plugins.module_utils._logs import run_training_log

STOP_GRACE_S = 10.0
# Less free space than this on the log's file system, when the job failed or went quiet: its log could not grow.
FULL_DISK_BYTES = 64 * 1024
GANG_POLL_S = 0.1
# Exit status of the supervisor when it stopped the job itself (as timeout(1) does).
STOPPED_STATUS = 124


def stream_path(status_dir: str, host: str) -> str:
    return os.path.join(status_dir, "nodes", "%s.jsonl" % host)


def append_records(path: str, records: List[Dict[str, Any]], fresh: bool = False) -> None:
    """Open, append, close: closing flushes to an NFS server so that other clients see the lines.
    ``fresh`` starts the stream anew (a new container of the run: nothing of an earlier one is read)."""
    if not records:
        return
    data = "".join(json.dumps(r, allow_nan=True, separators=(",", ":")) + "\n" for r in records)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if fresh else 0), 0o644)
    try:
        os.write(fd, data.encode("utf-8"))
    finally:
        os.close(fd)


def read_small(path: str) -> Optional[str]:
    try:
        with open(path, "r", errors="replace") as handle:
            return handle.read(4096)
    except OSError:
        return None


class Lease:
    """Renewed when any lease file's content changed since the last look, by this node's monotonic clock
    (the controller's and the file server's clocks never count)."""

    def __init__(self, paths: List[str], timeout: float, now: float) -> None:
        self.paths = paths
        self.timeout = timeout
        self.seen: Dict[str, Optional[str]] = {p: read_small(p) for p in paths}
        self.renewed_at = now

    def look(self, now: float) -> Dict[str, bool]:
        """``go`` and ``stop`` as any lease file says them, renewing when any content changed."""
        said = {"go": False, "stop": False}
        for path in self.paths:
            text = read_small(path)
            if text is not None and text != self.seen.get(path):
                self.seen[path] = text
                self.renewed_at = now
            content = parse_lease(self.seen.get(path))
            for key in said:
                said[key] = said[key] or bool(content.get(key))
        return said

    def expired(self, now: float) -> bool:
        return now - self.renewed_at > self.timeout


def parse_lease(text: Optional[str]) -> Dict[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class GangForming:
    """How many containers of the run came up (their status streams): a new one is the controller at work."""

    def __init__(self, streams_dir: str) -> None:
        self.streams_dir = streams_dir
        self.count = self.counted()

    def counted(self) -> int:
        try:
            return sum(1 for name in os.listdir(self.streams_dir) if name.endswith(".jsonl"))
        except OSError:
            return 0

    def grew(self) -> bool:
        count = self.counted()
        grown, self.count = count > self.count, max(count, self.count)
        return grown


class Supervisor:
    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.host = config["host"]
        self.stream = stream_path(config["status_dir"], self.host)
        self.status_file = os.path.join(config["node_run_dir"], "status.json")
        self.poll_s = float(config.get("poll_s", 2.0))
        self.lease = Lease(list(config["lease_paths"]), float(config["lease_timeout"]), time.monotonic())
        self.parse_args = dict(config.get("parse", {}))
        self.parse_args.update(path=config["log_path"], offset=0, lineno=0,
                               exit_code_path=config.get("exit_path"))
        self.child: Optional[subprocess.Popen] = None
        self.seq = 0
        self.last_step: Optional[int] = None
        self.signalled: Optional[int] = None
        self.started_at: Optional[float] = None
        self.sample_after_s = float(config.get("sample_after_s") or 0)
        self.quiet_since = time.monotonic()
        self.sampled_at: Optional[float] = None
        self.disk_reported = False

    # -- the records -------------------------------------------------------------------------------

    def emit(self, records: List[Dict[str, Any]], fresh: bool = False) -> None:
        try:
            append_records(self.stream, records, fresh)
        except OSError as exc:
            sys.stderr.write("[clusterval] status stream %s: %s\n" % (self.stream, exc))

    def beat(self, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        self.seq += 1
        record = {"t": "beat", "seq": self.seq, "time": time.time(), "last_step": self.last_step,
                  "started_at": self.started_at}
        record.update(extra or {})
        return record

    def write_status(self, record: Dict[str, Any]) -> None:
        try:
            _atomic.write_json(self.status_file, dict(record, host=self.host))
        except OSError:
            pass

    # -- parsing -----------------------------------------------------------------------------------

    def parse(self, final: bool = False) -> List[Dict[str, Any]]:
        args = dict(self.parse_args, final=final)
        try:
            result = run_training_log(args)
        except (OSError, ValueError) as exc:
            if "No such file" in str(exc) and not final:
                return []
            return [{"t": "unreadable", "msg": str(exc), "time": time.time()}]
        self.parse_args.update(offset=result["offset"], lineno=result["lineno"])
        return self.records_of(result)

    def records_of(self, result: Dict[str, Any]) -> List[Dict[str, Any]]:
        now = time.time()
        records: List[Dict[str, Any]] = []
        for step in result.get("steps") or []:
            if self.last_step is None or step.get("step", -1) > self.last_step:
                self.last_step = step.get("step", self.last_step)
                self.quiet_since = time.monotonic()
                records.append(dict(step, t="step", time=step.get("time") or now))
        for error in result.get("errors") or []:
            records.append(dict(error, t="error", first_seen=error.get("first_seen") or now))
        for advisory in result.get("advisories") or []:
            records.append(dict(advisory, t="advisory", first_seen=advisory.get("first_seen") or now))
        meta = {"framework": result.get("framework"), "simulated": bool(result.get("simulated"))}
        if result.get("summary"):
            meta["summary"] = result["summary"]
        if result.get("completed"):
            meta["completed"] = True
        records.append(dict(meta, t="meta"))
        return records

    # -- the job -----------------------------------------------------------------------------------

    def wait_for_gang_start(self) -> Optional[str]:
        """None once the controller opened the start, else why not (lease lapsed, gang timeout, stop, signal)."""
        self.emit([{"t": "up", "time": time.time(), "pid": os.getpid()}], fresh=True)
        bound = time.monotonic() + float(self.config.get("gang_timeout", 600))
        gang = GangForming(os.path.dirname(self.stream))
        next_beat = 0.0
        while time.monotonic() < bound:
            now = time.monotonic()
            lease = self.lease.look(now)
            if self.signalled:
                return "signal"
            if lease.get("stop"):
                return "stopped"
            if lease.get("go"):
                return None
            if now >= next_beat:
                if gang.grew():
                    self.lease.renewed_at = now
                if self.config.get("gang_lease") and self.lease.expired(now):
                    return "lease"
                self.emit([self.beat({"waiting": True})])
                next_beat = now + self.poll_s
            time.sleep(GANG_POLL_S)
        return "gang"

    def start_child(self) -> None:
        self.started_at = time.time()
        self.child = subprocess.Popen(self.config["argv"], start_new_session=True)
        self.lease.renewed_at = time.monotonic()
        self.emit([{"t": "start", "time": self.started_at, "pid": self.child.pid}])

    def stop_reason(self, deadline: float) -> Optional[str]:
        now = time.monotonic()
        lease = self.lease.look(now)
        if self.signalled:
            return "signal"
        if lease.get("stop"):
            return "stopped"
        if self.lease.expired(now):
            return "lease"
        if now > deadline:
            return "deadline"
        return None

    def stop_child(self) -> Optional[int]:
        """SIGTERM to the child's process group, SIGKILL after the grace period; its exit status."""
        child = self.child
        if child is None:
            return None
        for sig, wait_s in ((signal.SIGTERM, float(self.config.get("stop_grace", STOP_GRACE_S))), (signal.SIGKILL, 5.0)):
            if child.poll() is not None:
                break
            try:
                os.killpg(child.pid, sig)
            except OSError:
                pass
            try:
                child.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        return child.poll()

    def follow(self) -> Dict[str, Any]:
        """Poll until the child exits or the job must stop; the exit record."""
        deadline = time.monotonic() + float(self.config["deadline_s"])
        while True:
            exit_code = self.child.poll() if self.child else None
            records = self.parse(final=exit_code is not None)
            if exit_code is not None:
                return self.finish(records, exit_code, "exit")
            reason = self.stop_reason(deadline)
            if reason:
                exit_code = self.stop_child()
                return self.finish(records + self.parse(final=True), exit_code, reason)
            beat = self.beat()
            self.emit(records + self.sample() + [beat])
            self.write_status(beat)
            time.sleep(self.poll_s)

    def sample(self) -> List[Dict[str, Any]]:
        """Evidence of where a quiet job waits, once it was quiet for ``sample_after_s``, and again as long after."""
        now = time.monotonic()
        if not self.sample_after_s or self.child is None or now - self.quiet_since < self.sample_after_s:
            return []
        if self.sampled_at is not None and now - self.sampled_at < self.sample_after_s:
            return []
        self.sampled_at = now
        return self.disk_full() + [dict(process_sample(self.child.pid), t="sample", time=time.time(),
                                        after_step=self.last_step, quiet_s=round(now - self.quiet_since, 1))]

    def disk_full(self) -> List[Dict[str, Any]]:
        """The node's own failure when the file system of its training log is full: the framework's output (its
        failure line included) could not be written, so no line of the log says it. Reported once."""
        if self.disk_reported:
            return []
        record = full_disk_record(self.config["log_path"], self.last_step)
        self.disk_reported = record is not None
        return [record] if record else []

    def finish(self, records: List[Dict[str, Any]], exit_code: Optional[int], reason: str) -> Dict[str, Any]:
        record = {"t": "exit", "time": time.time(), "exit_code": exit_code, "reason": reason,
                  "last_step": self.last_step, "started_at": self.started_at}
        if exit_code is not None and exit_code < 0:
            record["signal"] = -exit_code
        if exit_code and reason == "exit":
            records = records + self.disk_full()
        self.emit(records + [record])
        self.write_status(record)
        self.remove_token_copy()
        return record

    def remove_token_copy(self) -> None:
        """The HF token's copy the controller handed over has no use once the job ended (a lapsed lease
        included: no teardown may come)."""
        path = self.config.get("token_copy")
        if not path:
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            sys.stderr.write("[clusterval] could not remove the HF token's copy %s: %s\n" % (path, exc))

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        not_started = self.wait_for_gang_start()
        if not_started:
            self.finish([], None, not_started)
            return STOPPED_STATUS
        try:
            self.start_child()
        except OSError as exc:
            sys.stderr.write("[clusterval] cannot start %s: %s\n" % (self.config["argv"], exc))
            self.finish([], 127, "launch")
            return 127
        record = self.follow()
        if record["reason"] != "exit":
            sys.stderr.write("[clusterval] supervisor stopped the job on %s: %s\n" % (self.host, record["reason"]))
            return STOPPED_STATUS
        code = record["exit_code"]
        return 128 - code if code < 0 else code

    def on_signal(self, signum: int, frame: Any) -> None:
        del frame
        self.signalled = signum


# Process states from the most to the least telling: stuck in the kernel, running, sleeping.
STATE_ORDER = "DRSTtZXI"


def full_disk_record(log_path: str, step: Optional[int]) -> Optional[Dict[str, Any]]:
    """An error record (class disk) when the file system holding ``log_path`` has less than FULL_DISK_BYTES free."""
    directory = os.path.dirname(log_path) or "."
    try:
        found = os.statvfs(directory)
    except OSError:
        return None
    free = found.f_bavail * found.f_frsize
    if free >= FULL_DISK_BYTES:
        return None
    now = time.time()
    return {"t": "error", "class": "disk", "lineno": None, "step": step, "time": now, "first_seen": now,
            "consequence": False, "evidence": "disk",
            "text": "No space left on device: the file system of the training log %s has %d bytes free; the "
                    "framework's output (its failure line too) could not be written" % (log_path, free)}


def job_processes(session: int, proc: str = "/proc") -> List[Dict[str, Any]]:
    """Every process of the job's session (the launch script started it with a session of its own)."""
    found = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        stat = read_small(os.path.join(proc, name, "stat"))
        if not stat or ")" not in stat:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if len(fields) > 3 and fields[3] == str(session):
            wchan = (read_small(os.path.join(proc, name, "wchan")) or "").strip()
            found.append({"pid": int(name), "ppid": int(fields[1]), "comm": comm, "state": fields[0],
                          "wchan": wchan if wchan != "0" else ""})
    return found


def process_sample(session: int, proc: str = "/proc") -> Dict[str, Any]:
    """The job's processes, the most telling one's state and wait channel, and py-spy's stacks where it exists."""
    processes = job_processes(session, proc)
    sample: Dict[str, Any] = {"processes": processes[:32]}
    parents = {p["ppid"] for p in processes}
    # The framework's own processes (the leaves), not the shell that waits for them.
    leaves = [p for p in processes if p["pid"] not in parents] or processes
    if leaves:
        first = min(leaves, key=lambda p: (STATE_ORDER.find(p["state"]) % len(STATE_ORDER), p["pid"]))
        sample.update(state=first["state"], wchan=first["wchan"], comm=first["comm"])
    python = next((p for p in processes if p["comm"].startswith("python")), None)
    spy = shutil.which("py-spy")
    if spy and python:
        try:
            dump = subprocess.run([spy, "dump", "--pid", str(python["pid"])], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=10, check=False)
            sample["stack"] = dump.stdout.decode("utf-8", "replace")[:4000]
        except (OSError, subprocess.SubprocessError) as exc:
            sample["stack"] = "py-spy failed: %s" % exc
    return sample


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: supervise.py CONFIG.json\n")
        return 2
    with open(argv[1]) as handle:
        config = json.load(handle)
    return Supervisor(config).run()


# -- one read of every stream ---------------------------------------------------------------------

TAKEOVER_FILE = "taken_over.json"
DEFAULT_MAX_BYTES = 1 << 20


def read_new_lines(path: str, offset: int, max_bytes: int) -> Tuple[List[Dict[str, Any]], int, Optional[int]]:
    """The complete JSON lines after ``offset`` (at most about ``max_bytes``), the new offset and the file size.
    A line still being written (no newline yet) waits for the next read. A stream shorter than ``offset`` was
    started anew by a new supervisor: it is read from its start, marked by a ``restarted`` record."""
    restarted: List[Dict[str, Any]] = []
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < offset:
                offset, restarted = 0, [{"t": "restarted"}]
            handle.seek(offset)
            data = handle.read(max(0, min(max_bytes, size - offset)))
    except FileNotFoundError:
        return [], offset, None
    end = data.rfind(b"\n") + 1
    records = []
    for raw in data[:end].splitlines():
        try:
            record = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            record = {"t": "garbled", "text": raw[:200].decode("utf-8", "replace")}
        records.append(record if isinstance(record, dict) else {"t": "garbled", "text": str(record)[:200]})
    return restarted + records, offset + end, size


def read_all(status_dir: str, hosts: Sequence[str], offsets: Mapping[str, int],
             max_bytes: int = DEFAULT_MAX_BYTES) -> Dict[str, Dict[str, Any]]:
    """{host: {records, offset, size}}; ``size`` is None when the node wrote no stream yet."""
    found = {}
    for host in hosts:
        records, offset, size = read_new_lines(os.path.join(status_dir, "nodes", "%s.jsonl" % host),
                                               int(offsets.get(host) or 0), max_bytes)
        found[host] = {"records": records, "offset": offset, "size": size}
    return found


def poll(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The module's work: renew the lease first (a slow read must not let it lapse), then read. A status
    directory removed under the run, or a run taken over by another, is said as such."""
    status_dir = params["status_dir"]
    if not os.path.isdir(status_dir):
        return {"missing": True, "status_dir": status_dir, "nodes": {}, "lease_renewed": False}
    taken = read_small(os.path.join(status_dir, TAKEOVER_FILE))
    if taken is not None:
        return {"taken_over": parse_lease(taken), "nodes": {}, "lease_renewed": False}
    lease = params.get("lease")
    if lease is not None:
        _atomic.write_json(os.path.join(params["status_dir"], "lease"), dict(lease))
    nodes = read_all(params["status_dir"], params["hosts"], params.get("offsets") or {},
                     params.get("max_bytes") or DEFAULT_MAX_BYTES)
    return {"nodes": nodes, "lease_renewed": lease is not None}
