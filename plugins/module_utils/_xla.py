# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""XLA flag catalogue, typed checks and deterministic `XLA_FLAGS` rendering.

The catalogue holds the flags MaxText's high-performance notes document (seed 002) and the
flags the seed configs set. XLA aborts at start-up on an unknown flag, so an unknown name is
reported with the closest known one before any node starts.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Dict, List, Mapping, Sequence, Tuple

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


def render_xla_flags(flags: Mapping[str, Any], path: str = "xla_flags", platform: str = "") -> Tuple[str, List[str]]:
    """Returns the `XLA_FLAGS` string (config order, `--name=value`) and warnings for unknown flags."""
    return render_flag_sources([(flags, path)], platform)


def render_flag_sources(sources: Sequence[Tuple[Mapping[str, Any], str]],
                        platform: str = "") -> Tuple[str, List[str]]:
    """`XLA_FLAGS` from several (flags, path) sources in order; a later source's value of a flag wins (in the
    place of its first appearance).

    Warns about unknown flags and, with `platform` (gpu or tpu), about another platform's flags."""
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
    return " ".join(rendered.values()), warnings


def flag_platform(name: str) -> str:
    return next((platform for prefix, platform in PLATFORM_PREFIXES.items() if name.startswith(prefix)), "")


def unknown_flag_warning(name: str, path: str) -> str:
    nearest = closest_flag(name)
    hint = "; did you mean %s?" % nearest if nearest else ""
    return ("%s: unknown XLA flag %s (XLA aborts at start-up on flags it does not know)%s"
            % (path, name, hint))
