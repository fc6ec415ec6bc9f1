# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""XLA flag catalogue, typed checks and deterministic `XLA_FLAGS` rendering.

The catalogue holds the flags MaxText's high-performance notes document (seed 002) and the
flags the seed configs set. XLA aborts at start-up on an unknown flag, so an unknown name is
reported with the closest known one before any node starts.

Which flags an XLA build knows depends on its version: ``KNOWN_IN`` records, for each catalogue flag
that some measured jaxlib does not know, the measured versions that know it. With the version that
the image runs (``jaxlib_version``), the plan warns about every flag that version does not know.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

BOOL = "bool"
TRISTATE = "tristate"
INT = "int"
BYTES = "bytes"
STRING = "string"
STRING_LIST = "string_list"

CATALOGUE: Dict[str, str] = {
    # seed 002, TPU
    "xla_tpu_enable_data_parallel_all_reduce_opt": BOOL,
    "xla_tpu_data_parallel_opt_different_sized_ops": BOOL,
    "xla_tpu_enable_async_collective_fusion": BOOL,
    "xla_tpu_enable_async_collective_fusion_fuse_all_gather": TRISTATE,
    "xla_tpu_enable_async_collective_fusion_multiple_steps": BOOL,
    "xla_tpu_overlap_compute_collective_tc": BOOL,
    "xla_tpu_spmd_rng_bit_generator_unsafe": BOOL,
    "xla_tpu_megacore_fusion_allow_ags": BOOL,
    "xla_tpu_enable_ag_backward_pipelining": BOOL,
    # seed 002, all platforms
    "xla_enable_async_all_gather": TRISTATE,
    "xla_enable_async_collective_permute": TRISTATE,
    "xla_dump_to": STRING,
    "xla_disable_hlo_passes": STRING_LIST,
    # seed 002, GPU
    "xla_gpu_enable_latency_hiding_scheduler": BOOL,
    "xla_gpu_enable_triton_gemm": BOOL,
    "xla_gpu_enable_command_buffer": STRING_LIST,
    "xla_gpu_all_reduce_combine_threshold_bytes": BYTES,
    "xla_gpu_all_gather_combine_threshold_bytes": BYTES,
    "xla_gpu_reduce_scatter_combine_threshold_bytes": BYTES,
    "xla_gpu_enable_pipelined_all_gather": BOOL,
    "xla_gpu_enable_pipelined_reduce_scatter": BOOL,
    "xla_gpu_enable_pipelined_all_reduce": BOOL,
    "xla_gpu_enable_while_loop_double_buffering": BOOL,
    "xla_gpu_enable_all_gather_combine_by_dim": BOOL,
    "xla_gpu_enable_reduce_scatter_combine_by_dim": BOOL,
    # seed configs (ROCm MaxText)
    "xla_gpu_enable_cublaslt": BOOL,
    "xla_gpu_executable_warn_stuck_timeout": INT,
    "xla_gpu_executable_terminate_timeout": INT,
    "xla_gpu_first_collective_call_warn_stuck_timeout_seconds": INT,
    "xla_gpu_first_collective_call_terminate_timeout_seconds": INT,
    "xla_gpu_graph_level": INT,
    "xla_gpu_autotune_level": INT,
    # the validation suite's current JAX configs (ROCm/cvs)
    "xla_gpu_memory_limit_slop_factor": INT,
}

# The jaxlib releases whose XLA was asked about every catalogue flag (simulator/real/xla_probe.py: one
# start of the CPU wheel from PyPI per flag, on Python 3.13, 2026-11-26; the answers are in
# tests/fixtures/xla/). The CPU wheel registers the
# xla_gpu_* flags too; the xla_tpu_* flags belong to libtpu, so no jaxlib version decides them.
MEASURED_JAXLIB = ("0.4.35", "0.5.3", "0.6.2", "0.7.2", "0.9.2", "0.12.0.1")
# Catalogue flags that some measured jaxlib does not know ("Unknown flag(s) in XLA_FLAGS" and an abort):
# the measured versions that know them. A flag not listed here is known to every measured version.
KNOWN_IN: Dict[str, Tuple[str, ...]] = {
    "xla_enable_async_all_gather": (),
    "xla_enable_async_collective_permute": (),
    "xla_gpu_first_collective_call_warn_stuck_timeout_seconds": ("0.6.2", "0.7.2", "0.9.2", "0.12.0.1"),
    "xla_gpu_first_collective_call_terminate_timeout_seconds": ("0.6.2", "0.7.2", "0.9.2", "0.12.0.1"),
    "xla_gpu_graph_level": ("0.4.35", "0.5.3", "0.6.2"),
}
_VERSION = re.compile(r"^[0-9]+(?:\.[0-9]+)*$")
# A version in an image tag: rocm/jax:rocm6.0.0-jax0.4.23-py3.9.0, clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1
_TAG_VERSION = re.compile(r"(?:^|[-_.])jax(?:lib)?-?v?([0-9]+\.[0-9]+(?:\.[0-9]+)*)")

# How a config writes XLA's empty list (`--xla_gpu_enable_command_buffer=` turns command buffers off);
# the validation suite writes the shell's quotes.
EMPTY_LIST = ("", "''", '""')
# Flags only one platform's XLA build registers; another platform's XLA aborts on them at start-up.
PLATFORM_PREFIXES = {"xla_tpu_": "tpu", "xla_gpu_": "gpu"}
_TRUE = ("true", "1")
_FALSE = ("false", "0")
_FLAG_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def closest_flag(name: str) -> str:
    matches = difflib.get_close_matches(name, list(CATALOGUE), n=1, cutoff=0.6)
    return matches[0] if matches else ""


def render_value(name: str, value: Any, path: str) -> str:
    kind = CATALOGUE.get(name)
    if kind == BOOL:
        return _render_bool(value, path)
    if kind == TRISTATE:
        return _render_tristate(value, path)
    if kind in (INT, BYTES):
        return _render_int(value, path, minimum=0 if kind == BYTES else None)
    if kind == STRING_LIST:
        return _render_list(value, path)
    return _render_plain(value, path)


def _render_bool(value: Any, path: str) -> str:
    word = str(value).strip().lower() if isinstance(value, (str, bool)) else ""
    if word in _TRUE:
        return "true"
    if word in _FALSE:
        return "false"
    raise ConfigError(path, "a boolean (true/false)", show(value))


def _render_tristate(value: Any, path: str) -> str:
    word = str(value).strip().lower() if isinstance(value, (str, bool)) else ""
    if word in ("kauto", "auto"):
        return "kAuto"
    try:
        return _render_bool(value, path)
    except ConfigError:
        raise ConfigError(path, "true, false or kAuto", show(value)) from None


def _render_int(value: Any, path: str, minimum: Any) -> str:
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not re.match(r"^-?[0-9]+$", text) or (minimum is not None and int(text) < minimum):
        expected = "a non-negative integer (bytes)" if minimum is not None else "an integer"
        raise ConfigError(path, expected, show(value))
    return str(int(text))


def _render_list(value: Any, path: str) -> str:
    if value == [] or (isinstance(value, str) and value.strip() in EMPTY_LIST):
        return ""
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else None
    if items is None or not all(isinstance(item, str) for item in items):
        raise ConfigError(path, "a comma-separated string or a list of strings", show(value))
    return _render_plain(",".join(item.strip() for item in items if item.strip()), path)


def _render_plain(value: Any, path: str) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (str, int, float)):
        text = str(value)
        if text.lower() in ("true", "false"):
            text = text.lower()
    else:
        raise ConfigError(path, "a string, number or boolean", show(value))
    if not text or any(ch.isspace() for ch in text):
        raise ConfigError(path, "a value without spaces (XLA_FLAGS is space-separated)", show(value))
    return text


def version_key(version: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def checked_version(version: Any, path: str) -> str:
    text = str(version).strip() if isinstance(version, (str, int, float)) and not isinstance(version, bool) else ""
    if not _VERSION.match(text):
        raise ConfigError(path, "a jaxlib version like 0.12.0.1", show(version))
    return text


def version_from_image(image: str) -> Optional[str]:
    """The jax/jaxlib version an image's tag names (None when it names none)."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name else ""
    found = _TAG_VERSION.search(tag)
    return found.group(1) if found else None


def knows(name: str, version: str) -> Optional[bool]:
    """Whether jaxlib ``version`` knows the catalogue flag ``name``: measured for a measured version; for
    another, what the measured versions on both sides agree on; None where nothing decides it."""
    if name not in CATALOGUE or flag_platform(name) == "tpu":
        return None
    known_in = KNOWN_IN.get(name, MEASURED_JAXLIB)
    if version in MEASURED_JAXLIB:
        return version in known_in
    key = version_key(version)
    below = [v for v in MEASURED_JAXLIB if version_key(v) < key]
    above = [v for v in MEASURED_JAXLIB if version_key(v) > key]
    sides = {v in known_in for v in below[-1:] + above[:1]}
    return sides.pop() if len(sides) == 1 else None


def known_range(name: str) -> str:
    known_in = KNOWN_IN.get(name, MEASURED_JAXLIB)
    if not known_in:
        return "no measured jaxlib (%s to %s) knows it" % (MEASURED_JAXLIB[0], MEASURED_JAXLIB[-1])
    return "measured: jaxlib %s know%s it" % (", ".join(known_in), "s" if len(known_in) == 1 else "")


def render_xla_flags(flags: Mapping[str, Any], path: str = "xla_flags", platform: str = "") -> Tuple[str, List[str]]:
    """Returns the `XLA_FLAGS` string (config order, `--name=value`) and warnings for unknown flags."""
    return render_flag_sources([(flags, path)], platform)


def render_flag_sources(sources: Sequence[Tuple[Mapping[str, Any], str]], platform: str = "",
                        version: Optional[Tuple[str, str]] = None) -> Tuple[str, List[str]]:
    """`XLA_FLAGS` from several (flags, path) sources in order; a later source's value of a flag wins (in the
    place of its first appearance).

    Warns about unknown flags and, with `platform` (gpu or tpu), about another platform's flags; with
    `version` (the jaxlib version and where it comes from), about flags that version does not know."""
    rendered: Dict[str, str] = {}
    warnings: List[str] = []
    for flags, path in sources:
        if not isinstance(flags, Mapping):
            raise ConfigError(path, "an object of flag names to values", show(flags))
        for name, value in flags.items():
            flag_path = join_path(path, name)
            bare = name[2:] if name.startswith("--") else name
            if not _FLAG_NAME.match(bare):
                raise ConfigError(flag_path, "an XLA flag name (lowercase letters, digits, _)", show(name))
            if bare not in CATALOGUE:
                warnings.append(unknown_flag_warning(bare, flag_path))
            other = flag_platform(bare)
            if platform and other and other != platform:
                warnings.append("%s: %s is a %s flag in a %s job (XLA aborts at start-up on flags its build "
                                "does not register)" % (flag_path, bare, other.upper(), platform.upper()))
            rendered[bare] = "--%s=%s" % (bare, render_value(bare, value, flag_path))
            if version and knows(bare, version[0]) is False:
                warnings.append("%s: jaxlib %s (%s) does not know %s (%s); its XLA aborts at start-up on it"
                                % (flag_path, version[0], version[1], bare, known_range(bare)))
    return " ".join(rendered.values()), warnings


def flag_platform(name: str) -> str:
    return next((platform for prefix, platform in PLATFORM_PREFIXES.items() if name.startswith(prefix)), "")


def unknown_flag_warning(name: str, path: str) -> str:
    nearest = closest_flag(name)
    hint = "; did you mean %s?" % nearest if nearest else ""
    return ("%s: unknown XLA flag %s (XLA aborts at start-up on flags it does not know)%s"
            % (path, name, hint))
