# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Failure signatures of distributed training output, each with a class.

A signature is a literal that is searched for with ``bytes.find`` (fast, so a
gigabyte of NCCL INFO noise costs little), optionally refined by a regex on
the matching line. User patterns are regexes with a class.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Pattern

CLASSES = ("network", "gpu", "memory", "coordination", "crash", "nan", "timeout", "disk", "port")


@dataclass(frozen=True)
class Signature:
    name: str
    failure_class: str
    literal: bytes
    refine: Optional[Pattern[str]] = None

    @property
    def text(self) -> str:
        return self.literal.decode()


def _sig(name: str, failure_class: str, literal: str, refine: Optional[str] = None) -> Signature:
    return Signature(name, failure_class, literal.encode(), re.compile(refine) if refine else None)


BUILTIN_SIGNATURES: List[Signature] = [
    # first match wins: the GPU cause that NCCL/RCCL reports beats the generic NCCL signatures
    _sig("hip_failure", "gpu", "HIP failure"),
    _sig("unhandled_cuda_error", "gpu", "unhandled cuda error"),
    # a peer went away: what the survivors of another node's failure print
    _sig("remote_peer_closed", "network", "Connection closed by remote peer"),
    # JAX's gloo collectives on CPU when the peer process died (observed, jaxlib 0.12.0.1)
    _sig("peer_closed", "network", "Connection closed by peer"),
    _sig("peer_reset", "network", "Connection reset by peer"),
    # network (NCCL/RCCL, PyTorch distributed backend)
    _sig("nccl_warn", "network", "NCCL WARN"),
    _sig("nccl_error", "network", "NCCL error"),
    _sig("nccl_system_error", "network", "ncclSystemError"),
    _sig("nccl_remote_error", "network", "ncclRemoteError"),
    _sig("nccl_unhandled_system_error", "network", "unhandled system error"),
    _sig("nccl_test_failure", "network", "Test NCCL failure"),
    _sig("nccl_catastrophic", "network", "local work queue catastrophic error"),
    _sig("dist_backend_error", "network", "DistBackendError"),
    _sig("remote_network_error", "network", "there was a network error"),
    # the launch script's RDMA check in the container (_rdma.py)
    _sig("rdma_in_container", "network", "[clusterval] RDMA failure:"),
    # timeouts
    _sig("nccl_timeout", "timeout", "NCCL timeout"),
    _sig("watchdog_timeout", "timeout", "Watchdog caught collective operation timeout"),
    _sig("deadline_exceeded", "timeout", "DEADLINE_EXCEEDED"),
    # coordination (JAX distributed service)
    _sig("coordination_service_error", "coordination", "CoordinationServiceError"),
    _sig("jax_fatal", "coordination", "Terminating process because the JAX distributed service detected fatal errors"),
    _sig("tasks_unhealthy", "coordination", "UNAVAILABLE: The following tasks are unhealthy"),
    _sig("coordination_rpc", "coordination", "UNAVAILABLE: Failed to send RPC to coordination service"),
    _sig("task_not_connected", "coordination", "FAILED_PRECONDITION: Task with incarnation id"),
    # gpu
    _sig("no_visible_gpu", "gpu", "FAILED_PRECONDITION: No visible GPU devices"),
    _sig("hw_exception", "gpu", "HW Exception by GPU"),
    _sig("gpu_hang", "gpu", "GPU Hang"),
    _sig("gpu_reset", "gpu", "GPU Reset"),
    _sig("uncorrectable", "gpu", "Uncorrectable error"),
    _sig("hip_no_device", "gpu", "hipErrorNoDevice"),
    _sig("hip_illegal_state", "gpu", "hipErrorIllegalState"),
    _sig("tpu_slice_failure", "gpu", "SLICE_FAILURE_CHIP_DRIVER_ERROR"),
    _sig("accelerator_fatal", "gpu", "A program or fatal error occurred"),
    # Neuron runtime (Trainium): the device or its driver missing, the runtime unable to start or load
    _sig("neuron_no_device", "gpu", "No neuron device available"),
    _sig("neuron_driver", "gpu", "Unable to determine Neuron Driver version"),
    _sig("neuron_device_open", "gpu", "Could not open the nd"),
    _sig("neuron_runtime_init", "gpu", "Neuron runtime cannot be initialized"),
    _sig("neuron_load_failed", "gpu", "Nrt::Load failed"),
    _sig("neuron_topology", "crash", "NRT:nrt_load_collectives", r"ERROR\s+NRT:nrt_load_collectives"),
    # EFA missing under the Neuron collectives (CCOM's libfabric plugin)
    _sig("neuron_efa_init", "network", "CCOM WARN", r"aws-ofi-nccl initialization failed|initNet\(\) failed"),
    # memory
    _sig("xla_oom", "memory", "RESOURCE_EXHAUSTED: Out of memory"),
    _sig("hip_oom", "memory", "HIP out of memory"),
    _sig("cuda_oom", "memory", "CUDA out of memory"),
    _sig("torch_oom", "memory", "OutOfMemoryError"),
    # the node itself
    _sig("no_space", "disk", "No space left on device"),
    _sig("address_in_use", "port", "Address already in use"),
    _sig("eaddrinuse", "port", "EADDRINUSE"),
    # torch elastic's agent ending the workers after another failed
    _sig("elastic_closing_sigterm", "crash", "closing signal SIGTERM"),
    _sig("elastic_death_signal", "crash", "death signal, shutting down workers"),
    # crash
    # XLA refusing XLA_FLAGS at start-up ("Unknown flag in" since jaxlib 0.5, "Unknown flags in" in 0.4)
    _sig("xla_unknown_flag", "crash", "Unknown flag"),
    # libtpu refusing LIBTPU_INIT_ARGS (observed, libtpu 0.0.50.1: "ERROR: Unknown command line flag 'x'",
    # "ERROR: Illegal value 'kAuto' specified for flag 'x'; ..."), then exit 1
    _sig("libtpu_unknown_flag", "crash", "Unknown command line flag"),
    _sig("libtpu_illegal_value", "crash", "Illegal value", r"Illegal value '.*' specified for flag '"),
    _sig("segfault", "crash", "Segmentation fault"),
    _sig("sigsegv", "crash", "SIGSEGV"),
    _sig("core_dumped", "crash", "core dumped"),
    _sig("fatal_python", "crash", "Fatal Python error"),
    _sig("traceback", "crash", "Traceback (most recent call last)"),
    _sig("module_not_found", "crash", "ModuleNotFoundError"),
    _sig("child_failed", "crash", "ChildFailedError"),
    _sig("terminate_called", "crash", "terminate called after throwing"),
    _sig("exitcode", "crash", "exitcode  :", r"exitcode\s+:\s*-?[1-9]"),
    _sig("job_cancelled", "crash", "CANCELLED AT"),
    # nan
    _sig("unexpected_nan", "nan", "Unexpected result nan"),
    _sig("found_nan", "nan", "found NaN in"),
]


# Literals that every signature above contains: a line is looked at only when it
# holds one of them. Each costs one bytes.find over every chunk, and short ones
# scan slower, so they are few and as long as sharing allows.
ANCHORS: List[bytes] = [
    b"rror", b"ailure", b"NCCL WARN", b"timeout", b"EXCEEDED", b"UNAVAILABLE", b"PRECONDITION", b"ut of memory",
    b"Terminating process", b"GPU", b"SLICE_FAILURE", b"Segmentation fault", b"SIGSEGV", b"core dumped",
    b"Traceback (most recent", b"exitcode  :", b"CANCELLED AT", b"terminate called", b"result nan", b"found NaN",
    b"closed by remote peer", b"No space left", b"already in use", b"EADDRINUSE", b"SIGTERM", b"death signal",
    b"Exception", b"Interrupt", b"closed by peer", b"reset by peer", b"Unknown flag",
    b"command line flag", b"Illegal value",
    b"neuron device", b"Neuron Driver", b"open the nd", b"Neuron runtime", b"Nrt::Load", b"NRT:nrt_load",
    b"CCOM WARN",
]

# Failures that follow from another node's: the survivors' view of a dead peer. A node whose only
# failures are these is a consequence, never the culprit (docs/failures.md).
CONSEQUENCES = frozenset((
    "remote_peer_closed", "peer_closed", "peer_reset", "watchdog_timeout", "nccl_timeout", "deadline_exceeded", "coordination_service_error",
    "jax_fatal", "tasks_unhealthy", "coordination_rpc", "task_not_connected", "elastic_closing_sigterm",
    "elastic_death_signal", "child_failed",
))

# Exceptions a framework handles itself: printed only as the context ("During handling of the above
# exception, another exception occurred") of the exception that really ended the run, never its cause.
HANDLED_EXCEPTIONS: List[Pattern[str]] = [
    # MaxText tries Transformer Engine and goes on without it (observed, maxtext 0.2.5 on CPU)
    re.compile(r"^ModuleNotFoundError: No module named 'transformer_engine'"),
]


def is_handled_exception(text: str) -> bool:
    return any(pattern.match(text) for pattern in HANDLED_EXCEPTIONS)


# RCCL/NCCL WARN lines printed by healthy nodes: reported as advisories, never a failure.
# Each entry is a regex searched in a line that carries "NCCL WARN"; users add theirs
# (training_log's ``advisories``, the results role's results_advisory_patterns).
ADVISORY_PATTERNS: List[str] = [
    r"NUMA auto balancing enabled which can lead to variability",
    r'Missing "(?:amd_)?iommu=(?:pt|on)" from kernel command line',
    r'Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment',
    r"LL cutoff points not detected for a supported arch",
]


def anchor_of(literal: bytes) -> Optional[bytes]:
    return next((anchor for anchor in ANCHORS if anchor in literal), None)


@dataclass(frozen=True)
class UserPattern:
    name: str
    failure_class: str
    regex: Pattern[bytes]


def compile_user_patterns(patterns: Optional[Iterable[Any]], path: str = "patterns") -> List[UserPattern]:
    """Validate ``[{regex, class}]``; raise ValueError naming the bad entry."""
    compiled: List[UserPattern] = []
    for index, entry in enumerate(patterns or []):
        where = "%s[%d]" % (path, index)
        if not isinstance(entry, dict) or not isinstance(entry.get("regex"), str):
            raise ValueError("%s: expected a dict with a string 'regex', found %r" % (where, entry))
        failure_class = entry.get("class", "crash")
        if failure_class not in CLASSES:
            raise ValueError("%s.class: expected one of %s, found %r" % (where, ", ".join(CLASSES), failure_class))
        try:
            regex = re.compile(entry["regex"].encode("utf-8"), re.MULTILINE)
        except re.error as exc:
            raise ValueError("%s.regex: expected a valid regular expression, found %r (%s)" % (where, entry["regex"], exc))
        compiled.append(UserPattern(entry.get("name") or entry["regex"], failure_class, regex))
    return compiled


def signature_matches(signature: Signature, line: str) -> bool:
    return signature.refine is None or signature.refine.search(line) is not None


def is_consequence(pattern: str) -> bool:
    return pattern in CONSEQUENCES


def compile_advisories(extra: Optional[Iterable[Any]] = None, path: str = "advisories") -> List[Pattern[str]]:
    """The built-in advisory patterns and the user's (regex strings); ValueError names a bad entry."""
    compiled = [re.compile(pattern) for pattern in ADVISORY_PATTERNS]
    for index, entry in enumerate(extra or []):
        if not isinstance(entry, str):
            raise ValueError("%s[%d]: expected a regular expression string, found %r" % (path, index, entry))
        try:
            compiled.append(re.compile(entry))
        except re.error as exc:
            raise ValueError("%s[%d]: expected a valid regular expression, found %r (%s)" % (path, index, entry, exc))
    return compiled
