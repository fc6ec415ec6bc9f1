# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Incremental parsers for MaxText, Megatron-LM (and Primus) and NxDT output.

``parse_log(path, offset=...)`` reads only what lies after ``offset``, in
fixed-size chunks, and returns the step lines, failure lines and the offset of
the end of the last complete line. A partial last line is left for the next
read. Lines longer than ``MAX_LINE`` are skipped. Only lines that contain one
of a few literals (found with ``bytes.find`` over the whole chunk) are decoded
and matched against regexes, which keeps the cost of NCCL INFO noise low.
"""
from __future__ import annotations

import math
import os
import re
import stat
from collections import deque
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._stacks import LOG_FORMATS, NAMES, log_format
from ansible_collections.clusterval.training.plugins.module_utils._steady import SteadyMeans
from ansible_collections.clusterval.training.plugins.module_utils._failures import (
    ANCHORS, BUILTIN_SIGNATURES, UserPattern, compile_advisories, compile_user_patterns, is_consequence,
    is_handled_exception, signature_matches)
from ansible_collections.clusterval.training.plugins.module_utils._timestamps import line_time
from ansible_collections.clusterval.training.plugins.module_utils._tracebacks import (
    exception_line, is_traceback_header)

CHUNK_SIZE = 1024 * 1024
MAX_LINE = 64 * 1024
MAX_ERROR_TEXT = 500
MAX_ADVISORIES = 20
# A traceback header whose exception line has not come within this many lines is reported by itself.
TRACEBACK_LINES = 400
HOLD_MAX_BYTES = 1024 * 1024
# Errors found by their shape (an exception line, a traceback header), not by a known signature.
GENERIC_PATTERNS = ("exception", "traceback")
CONTINUATION_LINES = 3
FRAMEWORKS = LOG_FORMATS
SIMULATOR_BANNER = "[clusterval simulator]"
NCCL_INFO = b" NCCL INFO "
ANCHOR_TEXTS = tuple(anchor.decode() for anchor in ANCHORS)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]{0,8}m")
_NUMBER = re.compile(r"\s*([-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))", re.I)
_NON_WORD = re.compile(r"[^0-9a-z]+")

_MAXTEXT_STEP = re.compile(r"completed step: (\d+), (.*)")
_MAXTEXT_EVAL = re.compile(r"(?:eval metrics after step: |Completed eval after train step )(\d+), (.*)")
_MAXTEXT_KEYS = {
    "seconds": "seconds",
    "tflop/s/device": "tflops_per_sec_per_gpu",
    "tflop/s": "tflops_per_sec_per_gpu",
    "tokens/s/device": "tokens_per_sec_per_gpu",
}

_MEGATRON_ITER = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
_MEGATRON_KEYS = {
    "elapsed time per iteration (ms)": "elapsed_time_per_iteration",
    "throughput per gpu (tflop/s/gpu)": "throughput_per_gpu",
    "tflop/s/gpu": "throughput_per_gpu",
    "tflops": "throughput_per_gpu",
    "tokens per gpu (tokens/s/gpu)": "tokens_per_gpu",
    "mem usages": "mem_usage",
    "lm loss": "loss",
    "loss": "loss",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
}
_HIP_MEM = re.compile(r"([\d.]+)GB/([\d.]+)GB/([\d.]+)GB/([\d.]+)%")

# Summary lines of the ROCm example script and of primus-cli.
_SCRIPT_SUMMARY = re.compile(
    r"^#?\s*(throughput per GPU|elapsed time per iteration|tokens/GPU/s|mem usages):\s*(\S+)\s*$")
_SCRIPT_SUMMARY_KEYS = {
    "throughput per GPU": "throughput_per_gpu",
    "elapsed time per iteration": "elapsed_time_per_iteration",
    "tokens/GPU/s": "tokens_per_gpu",
    "mem usages": "mem_usage",
}
_PRIMUS_SUMMARY = re.compile(
    r"^#?\s*(Throughput \(TFLOP/s/GPU\)|Tokens \(tokens/s/GPU\)|Time per iteration \(ms\)) - .*Avg: ([\d.]+)")
_PRIMUS_SUMMARY_KEYS = {
    "Throughput (TFLOP/s/GPU)": "throughput_per_gpu",
    "Tokens (tokens/s/GPU)": "tokens_per_gpu",
    "Time per iteration (ms)": "elapsed_time_per_iteration",
}

_NXDT_STEP = re.compile(r"global_step=([\d.]+)")
_NXDT_FIELDS = re.compile(r"(reduced_train_loss|throughput|lr)=([-+\w.]+)")
# tqdm's rate: seconds per iteration when slower than one a second, else iterations per second.
_NXDT_SPEED = re.compile(r"([\d.]+)(s/it|it/s)")

# TorchTitan's metrics line (components/metrics.py): "step: N  loss: L  [grad_norm: G]  memory: M GiB(P%)  tps: T
# tflops: F  mfu: U%", numbers grouped with commas; torchrun's --tee prefixes "[rankN]:".
_TITAN_STEP = re.compile(r"(?:\[rank(\d+)\]:)?.*?\bstep:\s*(\d+)\s+loss:")
_TITAN_FIELDS = re.compile(r"\b(loss|grad_norm|memory|tps|tflops|mfu):\s*([-+\w.,]+)")
_TITAN_KEYS = {"loss": ("loss",), "grad_norm": ("grad_norm",), "memory": ("mem_gib",),
               "tps": ("tokens_per_gpu", "tokens_per_sec"), "tflops": ("throughput_per_gpu",), "mfu": ("mfu_pct",)}

# Literals that select the lines worth parsing as steps or summaries, per format
# (see ANCHORS in _failures for the failure lines).
_STEP_ANCHORS = {
    "maxtext": [b"completed step: ", b"eval metrics after", b"Completed eval after"],
    "megatron": [b"iteration", b"GPU", b"mem usages"],
    "nxdt": [b"global_step="],
    "torchtitan": [b"step:"],
}


def to_number(text: str) -> Optional[float]:
    match = _NUMBER.match(text)
    return float(match.group(1)) if match else None


@lru_cache(maxsize=1024)
def snake(name: str) -> str:
    return _NON_WORD.sub("_", name.lower()).strip("_")


def clean_line(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    if "\x1b" in text or "m[" in text or "[0m" in text:
        text = _ANSI.sub("", text)
    return text


def nonfinite_fields(step: Dict[str, Any]) -> List[str]:
    return sorted(k for k, v in step.items() if isinstance(v, float) and not math.isfinite(v))


def parse_maxtext_step(text: str) -> Optional[Dict[str, Any]]:
    if "[Rampup Batch Size Phase]" in text:
        return None
    match = _MAXTEXT_STEP.search(text)
    if not match:
        return None
    step: Dict[str, Any] = {"step": int(match.group(1))}
    for part in match.group(2).split(", "):
        key, sep, value = part.partition(":")
        number = to_number(value) if sep else None
        if number is not None:
            step[_MAXTEXT_KEYS.get(key.strip().lower(), snake(key))] = number
    return step if len(step) > 1 else None


def parse_maxtext_eval(text: str) -> Optional[Dict[str, Any]]:
    match = _MAXTEXT_EVAL.search(text)
    if not match:
        return None
    record: Dict[str, Any] = {"step": int(match.group(1))}
    for part in match.group(2).split(", "):
        key, sep, value = part.partition("=")
        number = to_number(value) if sep else None
        if number is not None:
            record[snake(key)] = number
    return record


def _megatron_field(step: Dict[str, Any], key: str, value: str) -> None:
    lowered = key.strip().lower()
    if lowered.startswith("hip mem usage"):
        match = _HIP_MEM.search(value)
        if match:
            step["mem_used_gb"] = float(match.group(1))
            step["mem_usage"] = float(match.group(4)) / 100.0
        return
    instant, dummy, average = value.strip().partition("/")
    number = to_number(instant)
    if number is None:
        return
    if lowered == "elapsed time per iteration (s)":
        lowered, number = "elapsed time per iteration (ms)", number * 1000.0
    name = _MEGATRON_KEYS.get(lowered, snake(lowered))
    if name == "throughput_per_gpu" and name in step:
        return
    step[name] = number
    if lowered == "lm loss":
        step["lm_loss"] = number
    average_number = to_number(average) if average else None
    if average_number is not None:
        step[name + "_avg"] = average_number


def parse_megatron_step(text: str, seq_length: Optional[int] = None,
                        world_size: Optional[int] = None) -> Optional[Dict[str, Any]]:
    match = _MEGATRON_ITER.search(text)
    if not match:
        return None
    step: Dict[str, Any] = {"step": int(match.group(1)), "total_steps": int(match.group(2))}
    for part in match.group(3).split("|"):
        key, sep, value = part.partition(":")
        if sep:
            _megatron_field(step, key, value)
    if "elapsed_time_per_iteration" not in step:
        return None
    step["seconds"] = step["elapsed_time_per_iteration"] / 1000.0
    if "tokens_per_gpu" not in step and seq_length and world_size and step.get("global_batch_size"):
        if step["seconds"] > 0:
            step["tokens_per_gpu"] = step["global_batch_size"] * seq_length / (step["seconds"] * world_size)
    return step


def parse_script_summary(text: str) -> Optional[Tuple[str, float]]:
    match = _SCRIPT_SUMMARY.match(text.strip())
    if match:
        number = to_number(match.group(2))
        return (_SCRIPT_SUMMARY_KEYS[match.group(1)], number) if number is not None else None
    match = _PRIMUS_SUMMARY.match(text.strip())
    if match:
        return _PRIMUS_SUMMARY_KEYS[match.group(1)], float(match.group(2))
    return None


def parse_nxdt_step(text: str) -> Optional[Dict[str, Any]]:
    match = _NXDT_STEP.search(text)
    if not match:
        return None
    step: Dict[str, Any] = {"step": int(float(match.group(1)))}
    for key, value in _NXDT_FIELDS.findall(text):
        number = to_number(value)
        if number is not None:
            step["loss" if key == "reduced_train_loss" else key] = number
    speed = _NXDT_SPEED.search(text)
    if speed:
        rate = float(speed.group(1))
        if speed.group(2) == "s/it":
            step["seconds"] = rate
        elif rate > 0:
            step["seconds"] = 1.0 / rate
    return step


def parse_torchtitan_step(text: str) -> Optional[Dict[str, Any]]:
    match = _TITAN_STEP.search(text)
    if not match:
        return None
    step: Dict[str, Any] = {"step": int(match.group(2))}
    if match.group(1) is not None:
        step["rank"] = int(match.group(1))
    for key, value in _TITAN_FIELDS.findall(text[match.start(2):]):
        number = to_number(value.replace(",", ""))
        if number is not None:
            step.update(dict.fromkeys(_TITAN_KEYS[key], number))
    return step


def line_bounds(buf: bytes, index: int) -> Tuple[int, int]:
    """Start and end of the line holding ``buf[index]``."""
    end = buf.find(b"\n", index)
    return buf.rfind(b"\n", 0, index) + 1, len(buf) if end < 0 else end


def line_bounds_cr(buf: bytes, index: int) -> Tuple[int, int]:
    """The same where a carriage return also ends a line: a progress bar (tqdm, NxDT) rewrites its line with
    ``\r`` before each update and ends it with one ``\n``, so each update is a line of its own."""
    ends = [end for end in (buf.find(b"\n", index), buf.find(b"\r", index)) if end >= 0]
    return max(buf.rfind(b"\n", 0, index), buf.rfind(b"\r", 0, index)) + 1, min(ends) if ends else len(buf)


@dataclass
class ParseResult:
    """What one read found. ``steps`` keeps the latest ``max_steps`` only, so memory stays
    bounded; ``last_step``, ``steps_total`` and ``steady`` cover every step read."""
    framework: Optional[str]
    offset: int
    lineno: int
    size: int
    steps: Any = field(default_factory=list)
    steps_total: int = 0
    last_step: Optional[int] = None
    total_steps: Optional[int] = None
    steady: Optional[SteadyMeans] = None
    evals: Any = field(default_factory=lambda: deque(maxlen=100))
    errors: List[Dict[str, Any]] = field(default_factory=list)
    errors_total: int = 0
    advisories: List[Dict[str, Any]] = field(default_factory=list)
    advisories_total: int = 0
    # The header of a traceback whose exception line has not been read yet, and where it starts.
    open_traceback: Optional[Dict[str, Any]] = None
    open_traceback_at: Tuple[int, int, int] = (0, 0, 0)  # byte offset, lineno before it, steps_total then
    line_offset: int = 0  # byte offset of the line being parsed
    script_summary: Dict[str, float] = field(default_factory=dict)
    simulated: bool = False
    skipped_long_lines: int = 0


class LogParser:
    """Parses complete lines handed over in chunks; keeps no log text."""

    def __init__(self, framework: str = "auto", patterns: Optional[Iterable[Any]] = None,
                 seq_length: Optional[int] = None, world_size: Optional[int] = None,
                 max_errors: int = 100, max_steps: Optional[int] = None, warmup_steps: Optional[int] = None,
                 advisories: Optional[Iterable[Any]] = None) -> None:
        if framework not in NAMES + ("auto",):
            raise ValueError("framework: expected one of %s, auto, found %r" % (", ".join(NAMES), framework))
        framework = log_format(framework)
        self.requested = framework
        self.user_patterns: List[UserPattern] = compile_user_patterns(patterns)
        self.advisories = compile_advisories(advisories)
        self.seq_length = seq_length
        self.world_size = world_size
        self.max_errors = max_errors
        self.max_steps = max_steps
        self.warmup_steps = warmup_steps
        kinds = FRAMEWORKS if framework == "auto" else (framework,)
        literals = [lit for kind in kinds for lit in _STEP_ANCHORS[kind]]
        literals += ANCHORS + [SIMULATOR_BANNER.encode()]
        self.literals = list(dict.fromkeys(literals))
        self.kinds = kinds

    def new_result(self, offset: int, lineno: int, size: int) -> ParseResult:
        detected = None if self.requested == "auto" else self.requested
        steps = deque(maxlen=self.max_steps) if self.max_steps is not None else []
        return ParseResult(framework=detected, offset=offset, lineno=lineno, size=size, steps=steps)

    def candidate_lines(self, buf: bytes) -> Dict[int, int]:
        """Start -> end of every line holding one of the literals or user patterns."""
        hits: Dict[int, int] = {}
        bounds = line_bounds_cr if b"\r" in buf else line_bounds
        for literal in self.literals:
            index = buf.find(literal)
            while index >= 0:
                start, end = bounds(buf, index)
                hits.setdefault(start, end)
                index = buf.find(literal, end)
        for pattern in self.user_patterns:
            for match in pattern.regex.finditer(buf):
                start, end = bounds(buf, match.start())
                hits.setdefault(start, end)
        return hits

    def feed(self, buf: bytes, result: ParseResult) -> None:
        """Parse ``buf``, made of complete lines only; advances ``result.lineno``."""
        if not self.user_patterns and buf.count(NCCL_INFO) * 2 > buf.count(b"\n"):
            self.feed_without_nccl_info(buf, result)
            return
        self.parse_hits(buf, None, result)
        result.lineno += buf.count(b"\n")

    def feed_without_nccl_info(self, buf: bytes, result: ParseResult) -> None:
        """NCCL INFO lines (often most of a gigabyte log) hold no step and no signature: drop them first."""
        lines = buf.split(b"\n")
        kept_index, kept_starts, start = [], [], 0
        for i, line in enumerate(lines):
            if NCCL_INFO not in line:
                kept_index.append(i)
                kept_starts.append(start)
            start += len(line) + 1
        kept = b"\n".join([lines[i] for i in kept_index])
        self.parse_hits(kept, kept_index, result, kept_starts)
        result.lineno += len(lines) - 1

    def parse_hits(self, buf: bytes, line_index: Optional[List[int]], result: ParseResult,
                   line_starts: Optional[List[int]] = None) -> None:
        """Parse the candidate lines of ``buf``; ``line_index`` maps its lines to the chunk's, ``line_starts``
        gives where they start in the chunk."""
        hits = self.candidate_lines(buf)
        position, line = 0, 0
        for start in sorted(hits):
            line += buf.count(b"\n", position, start)
            position = start
            end = hits[start]
            if end - start > MAX_LINE:
                result.skipped_long_lines += 1
                continue
            lineno = result.lineno + (line if line_index is None else line_index[line]) + 1
            result.line_offset = result.offset + (start if line_starts is None else line_starts[line])
            self.parse_line(clean_line(buf[start:end]), lineno, result)

    def parse_line(self, text: str, lineno: int, result: ParseResult) -> None:
        if SIMULATOR_BANNER in text:
            result.simulated = True
        step = self.parse_step(text, result)
        if step is not None:
            self.add_step(step, text, lineno, result)
        self.match_failures(text, lineno, result)

    def parse_step(self, text: str, result: ParseResult) -> Optional[Dict[str, Any]]:
        for kind in self.kinds:
            if kind == "maxtext":
                step = parse_maxtext_step(text)
                if step is None:
                    record = parse_maxtext_eval(text)
                    if record is not None:
                        result.evals.append(record)
            elif kind == "megatron":
                step = parse_megatron_step(text, self.seq_length, self.world_size)
                if step is None:
                    summary = parse_script_summary(text)
                    if summary is not None:
                        result.script_summary[summary[0]] = summary[1]
            elif kind == "torchtitan":
                step = parse_torchtitan_step(text)
            else:
                step = parse_nxdt_step(text)
            if step is not None:
                if result.framework is None:
                    result.framework = kind
                return step if result.framework == kind else None
        return None

    def add_step(self, step: Dict[str, Any], text: str, lineno: int, result: ParseResult) -> None:
        bad = nonfinite_fields(step)
        if bad:
            step["nonfinite"] = bad
        if bad or step.get("nan_iterations", 0) > 0:
            self.add_error(result, "nan", lineno, text, "nonfinite_step_values" if bad else "nan_iterations")
        if result.framework == "torchtitan" and result.last_step is not None and step["step"] <= result.last_step:
            return  # another local rank's line of a step already read (every rank prints it)
        if result.steady is None:
            result.steady = SteadyMeans(result.framework, self.warmup_steps)
        result.steady.add(step)
        result.last_step = step["step"] if result.last_step is None else max(result.last_step, step["step"])
        result.total_steps = step.get("total_steps", result.total_steps)
        if result.steps and result.steps[-1]["step"] == step["step"] and result.framework == "nxdt":
            result.steps[-1] = step
        else:
            result.steps.append(step)
            result.steps_total += 1

    def match_failures(self, text: str, lineno: int, result: ParseResult) -> None:
        """A failure line becomes an error; a traceback's header waits for its exception line, which is
        the cause; a benign WARN line becomes an advisory."""
        self.close_stale_traceback(lineno, result)
        if is_traceback_header(text):
            if result.open_traceback is None:
                result.open_traceback = self.error_record(result, "crash", lineno, text, "traceback")
                result.open_traceback_at = (result.line_offset, lineno - 1, result.steps_total)
            return
        exception = exception_line(text)
        if exception is not None and is_handled_exception(exception):
            result.open_traceback = None  # its traceback was the context of the next one
            return
        signature = self.signature_of(text)
        if exception is not None:
            header, result.open_traceback = result.open_traceback, None
            failure_class, pattern = signature if signature else ("crash", "traceback" if header else "exception")
            self.add_record(result, self.error_record(result, failure_class, lineno, exception, pattern, header))
        elif signature is not None:
            if any(advisory.search(text) for advisory in self.advisories):
                self.add_advisory(result, lineno, text)
            else:
                self.add_error(result, signature[0], lineno, text, signature[1])

    def signature_of(self, text: str) -> Optional[Tuple[str, str]]:
        """(class, name) of the first built-in signature or user pattern the line matches."""
        if any(anchor in text for anchor in ANCHOR_TEXTS):
            for signature in BUILTIN_SIGNATURES:
                if signature.text in text and signature_matches(signature, text) and signature.name != "traceback":
                    return signature.failure_class, signature.name
        for pattern in self.user_patterns:
            if pattern.regex.search(text.encode("utf-8", errors="replace")):
                return pattern.failure_class, pattern.name
        return None

    def close_stale_traceback(self, lineno: Optional[int], result: ParseResult) -> None:
        """Report a traceback header alone when its exception line did not follow (or at the end)."""
        header = result.open_traceback
        if header is not None and (lineno is None or lineno - header["lineno"] > TRACEBACK_LINES):
            result.open_traceback = None
            self.add_record(result, header)

    def error_record(self, result: ParseResult, failure_class: str, lineno: int, text: str, pattern: str,
                     header: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        when = line_time(text)
        if when is None and header is not None:
            when = header.get("time")
        return {"class": failure_class, "line": lineno, "lineno": lineno, "text": text.strip()[:MAX_ERROR_TEXT],
                "pattern": pattern, "time": when, "first_seen": None, "step": result.last_step,
                "consequence": is_consequence(pattern)}

    def add_record(self, result: ParseResult, record: Dict[str, Any]) -> None:
        """Keep the error; an exception line without a signature of its own takes the class of a failure
        line right after it (``RuntimeError: Rank 3, ...`` then ``Unexpected result nan``)."""
        previous = result.errors[-1] if result.errors else None
        if (previous is not None and previous["pattern"] in GENERIC_PATTERNS and record["pattern"] not in GENERIC_PATTERNS
                and 0 < record["lineno"] - previous["lineno"] <= CONTINUATION_LINES):
            previous["class"] = record["class"]
        result.errors_total += 1
        if len(result.errors) < self.max_errors:
            result.errors.append(record)

    def add_error(self, result: ParseResult, failure_class: str, lineno: int, text: str, pattern: str) -> None:
        self.add_record(result, self.error_record(result, failure_class, lineno, text, pattern))

    def add_advisory(self, result: ParseResult, lineno: int, text: str) -> None:
        result.advisories_total += 1
        if len(result.advisories) < MAX_ADVISORIES:
            result.advisories.append({"class": "advisory", "line": lineno, "lineno": lineno,
                                      "text": text.strip()[:MAX_ERROR_TEXT], "pattern": "advisory",
                                      "time": line_time(text), "step": result.last_step})

    def finish(self, result: ParseResult, final: bool = True) -> None:
        """End of a read. A traceback still open is left for the next read (the offset goes back to its
        header) when nothing was parsed after it but its own lines; at the last read, or when it is long,
        it is reported by its header."""
        offset, lineno, steps_total = result.open_traceback_at
        holdable = result.steps_total == steps_total and result.offset - offset <= HOLD_MAX_BYTES
        if result.open_traceback is not None and not final and holdable:
            result.open_traceback = None
            result.offset, result.lineno = offset, lineno
            return
        self.close_stale_traceback(None, result)


def iter_complete_chunks(handle: Any, chunk_size: int = CHUNK_SIZE):
    """Yield (bytes of complete lines, bytes skipped) until EOF; the partial tail stays unread.

    The caller's offset advances by len(chunk) + skipped for each item.
    Overlong lines (no newline within MAX_LINE) are dropped when their end
    is found; an overlong partial last line is left for the next read.
    """
    tail = b""
    skipping = 0
    while True:
        data = handle.read(chunk_size)
        if not data:
            return
        if skipping:
            newline = data.find(b"\n")
            if newline < 0:
                skipping += len(data)
                continue
            yield b"", skipping + newline + 1
            skipping, data = 0, data[newline + 1:]
        buf = tail + data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        tail = buf[cut:]
        if cut:
            yield buf[:cut], 0
        if len(tail) > MAX_LINE:
            skipping, tail = len(tail), b""


def parse_log(path: str, framework: str = "auto", offset: int = 0, lineno: int = 0,
              patterns: Optional[Iterable[Any]] = None, seq_length: Optional[int] = None,
              world_size: Optional[int] = None, parser: Optional[LogParser] = None,
              final: bool = False) -> ParseResult:
    """Parse ``path`` from ``offset``; raises OSError when it cannot be read.

    Pass a ``parser`` built with ``max_steps`` to bound the steps kept in memory. Unless ``final``
    (the last read of a finished job), a traceback at the end is left for the next read, which then
    finds its exception line.
    """
    parser = parser or LogParser(framework, patterns, seq_length, world_size)
    size = os.path.getsize(path)
    if offset > size:  # the file was truncated or replaced: start again
        offset, lineno = 0, 0
    result = parser.new_result(offset, lineno, size)
    with open(path, "rb") as handle:
        handle.seek(offset)
        for buf, skipped in iter_complete_chunks(handle):
            if skipped:
                result.skipped_long_lines += 1
                result.lineno += 1
            parser.feed(buf, result)
            result.offset += len(buf) + skipped
    parser.finish(result, final)
    return result


def parse_text(text: str, framework: str = "auto", patterns: Optional[Iterable[Any]] = None,
               seq_length: Optional[int] = None, world_size: Optional[int] = None) -> ParseResult:
    """Parse complete lines held in memory (tests, small excerpts)."""
    parser = LogParser(framework, patterns, seq_length, world_size)
    data = text.encode("utf-8")
    if data and not data.endswith(b"\n"):
        data += b"\n"
    result = parser.new_result(0, 0, len(data))
    parser.feed(data, result)
    parser.finish(result)
    result.offset = len(data)
    return result


def read_exit_code(path: Optional[str]) -> Optional[int]:
    if not path or not os.path.exists(path):
        return None
    with open(path, "r", errors="replace") as handle:
        text = handle.read(64).strip()
    try:
        return int(text)
    except ValueError:
        return None


def is_completed(result: ParseResult, final_step: Optional[int]) -> bool:
    target = final_step if final_step is not None else result.total_steps
    return result.last_step is not None and target is not None and result.last_step >= target


FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
              (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def refuse_non_regular(path: str) -> None:
    """Reading a FIFO blocks and /dev/zero never ends: only regular files are logs."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in FILE_KINDS if test(mode)), "not a regular file")
        raise ValueError("the training log %s is %s, not a regular file: refused (it could block or never end)"
                         % (path, kind))


def run_training_log(params: Dict[str, Any]) -> Dict[str, Any]:
    """The training_log module's work (and the supervisor's): parse a regular file from the offset, return a
    small result."""
    for name in ("offset", "lineno", "max_steps"):
        if params.get(name) is not None and params[name] < 0:
            raise ValueError("%s: expected a number >= 0, found %s" % (name, params[name]))
    refuse_non_regular(params["path"])
    max_steps = params.get("max_steps")
    parser = LogParser(params.get("framework") or "auto", params.get("patterns"), params.get("seq_length"),
                       params.get("world_size"), max_steps=max_steps, warmup_steps=params.get("warmup_steps"),
                       advisories=params.get("advisories"))
    result = parse_log(params["path"], offset=params.get("offset") or 0, lineno=params.get("lineno") or 0,
                       parser=parser, final=bool(params.get("final")))
    steady = result.steady or SteadyMeans(result.framework, params.get("warmup_steps"))
    return {
        "log_path": params["path"],
        "framework": result.framework,
        "steps": list(result.steps),
        "steps_total": result.steps_total,
        "last_step": result.last_step,
        "completed": is_completed(result, params.get("final_step")),
        "errors": result.errors,
        "errors_total": result.errors_total,
        "advisories": result.advisories,
        "advisories_total": result.advisories_total,
        "offset": result.offset,
        "lineno": result.lineno,
        "summary": steady.means(result.script_summary),
        "evals": list(result.evals),
        "exit_code": read_exit_code(params.get("exit_code_path")),
        "simulated": result.simulated,
        "size": result.size,
        "skipped_long_lines": result.skipped_long_lines,
    }
