# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""XLA flag catalogue, typed checks and deterministic `XLA_FLAGS` and `LIBTPU_INIT_ARGS` rendering.

The catalogue holds the flags MaxText's high-performance notes document (seed 002) and the
flags the seed configs set. XLA aborts at start-up on an unknown flag, so an unknown name is
reported with the closest known one before any node starts.

Which flags an XLA build knows depends on its version: ``KNOWN_IN`` records, for each catalogue flag
that some measured jaxlib does not know, the measured versions that know it. With the version that
the image runs (``jaxlib_version``), the plan warns about every flag that version does not know.

On TPU hosts a flag goes where it is accepted, measured: libtpu parses ``LIBTPU_INIT_ARGS`` (``LIBTPU_KNOWN_IN``),
jaxlib ``XLA_FLAGS``. A catalogue flag that neither accepts on the job's platform is refused before any node
starts, naming where it would be accepted.
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
# The libtpu releases asked about every catalogue flag on a host without a TPU (simulator/real/xla_probe.py
# --tpu: each flag alone in LIBTPU_INIT_ARGS, then alone in XLA_FLAGS, with jaxlib 0.12.0.1 on Python 3.13,
# 2026-11-29; the answers are in tests/fixtures/xla/libtpu-*.json; 0.0.50.1 is what jax[tpu] 0.12.0.1 pins).
# libtpu refuses every other catalogue flag ("ERROR: Unknown command line flag"), exit 1; on a TPU host
# jaxlib answers for XLA_FLAGS as on CPU (KNOWN_IN).
MEASURED_LIBTPU = ("0.0.50.1", "0.0.52")
# The catalogue flags libtpu accepts in LIBTPU_INIT_ARGS: the measured versions that accept them.
LIBTPU_KNOWN_IN: Dict[str, Tuple[str, ...]] = {
    name: MEASURED_LIBTPU for name in (
        "xla_tpu_enable_data_parallel_all_reduce_opt", "xla_tpu_data_parallel_opt_different_sized_ops",
        "xla_tpu_enable_async_collective_fusion", "xla_tpu_enable_async_collective_fusion_fuse_all_gather",
        "xla_tpu_enable_async_collective_fusion_multiple_steps", "xla_tpu_overlap_compute_collective_tc",
        "xla_tpu_spmd_rng_bit_generator_unsafe", "xla_tpu_megacore_fusion_allow_ags",
        "xla_tpu_enable_ag_backward_pipelining", "xla_enable_async_all_gather",
        "xla_enable_async_collective_permute")}
XLA_FLAGS = "XLA_FLAGS"
LIBTPU_INIT_ARGS = "LIBTPU_INIT_ARGS"

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
        return "auto"   # libtpu refuses XLA's own spelling: "Illegal value 'kAuto' ... Valid options are: auto, ..."
    try:
        return _render_bool(value, path)
    except ConfigError:
        raise ConfigError(path, "auto, true or false", show(value)) from None


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
    """`XLA_FLAGS` from several (flags, path) sources in order (see render_flag_variables)."""
    variables, warnings = render_flag_variables(sources, platform, version)
    return variables.get(XLA_FLAGS, ""), warnings


def render_flag_variables(sources: Sequence[Tuple[Mapping[str, Any], str]], platform: str = "",
                          version: Optional[Tuple[str, str]] = None) -> Tuple[Dict[str, str], List[str]]:
    """{variable: its flags} from several (flags, path) sources in order; a later source's value of a flag wins
    (in the place of its first appearance).

    Warns about unknown flags; with `platform` (gpu or tpu) puts each flag where that platform accepts it and
    refuses a catalogue flag accepted nowhere there; with `version` (the jaxlib version and where it comes
    from), warns about flags in XLA_FLAGS that version does not know."""
    rendered: Dict[str, Tuple[str, str]] = {}
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
            variable = flag_variable(bare, platform, flag_path, warnings)
            rendered[bare] = (variable, "--%s=%s" % (bare, render_value(bare, value, flag_path)))
            if variable == XLA_FLAGS and version and knows(bare, version[0]) is False:
                warnings.append("%s: jaxlib %s (%s) does not know %s (%s); its XLA aborts at start-up on it"
                                % (flag_path, version[0], version[1], bare, known_range(bare)))
    variables: Dict[str, str] = {}
    for variable, token in rendered.values():
        variables[variable] = (variables[variable] + " " + token) if variable in variables else token
    return variables, warnings


def accepting_variables(name: str, platform: str) -> List[str]:
    """Where `platform` nodes accept the catalogue flag `name`, as measured: libtpu's LIBTPU_INIT_ARGS (TPU hosts
    only), then jaxlib's XLA_FLAGS (which never registers libtpu's xla_tpu_* flags)."""
    places = [LIBTPU_INIT_ARGS] if platform == "tpu" and LIBTPU_KNOWN_IN.get(name) else []
    if KNOWN_IN.get(name, MEASURED_JAXLIB) and flag_platform(name) != "tpu":
        places.append(XLA_FLAGS)
    return places


def flag_variable(name: str, platform: str, path: str, warnings: List[str]) -> str:
    """The variable the flag goes in on `platform` nodes; a catalogue flag accepted nowhere there is refused."""
    if name not in CATALOGUE or not platform:
        return LIBTPU_INIT_ARGS if platform == "tpu" and flag_platform(name) == "tpu" else XLA_FLAGS
    places = accepting_variables(name, platform)
    if not places:
        raise ConfigError(path, "a flag %s nodes accept (%s)" % (platform.upper(), where_accepted(name)),
                          "%s, refused in %s on %s nodes" % (name, " and ".join(
                              (LIBTPU_INIT_ARGS, XLA_FLAGS) if platform == "tpu" else (XLA_FLAGS,)),
                              platform.upper()))
    if flag_platform(name) == "gpu" and platform == "tpu":
        warnings.append("%s: %s is a GPU flag: jaxlib accepts it in XLA_FLAGS on TPU hosts, where it does "
                        "nothing" % (path, name))
    return places[0]


def where_accepted(name: str) -> str:
    """`name` is accepted in LIBTPU_INIT_ARGS on TPU nodes (libtpu 0.0.50.1), in XLA_FLAGS (jaxlib ...)."""
    places = []
    if LIBTPU_KNOWN_IN.get(name):
        places.append("in LIBTPU_INIT_ARGS on TPU nodes (measured: libtpu %s)" % ", ".join(LIBTPU_KNOWN_IN[name]))
    if XLA_FLAGS in accepting_variables(name, "gpu"):
        places.append("in XLA_FLAGS (%s)" % known_range(name))
    return "%s is accepted %s" % (name, " and ".join(places)) if places else \
        "%s is accepted by no measured libtpu (%s) nor jaxlib" % (name, ", ".join(MEASURED_LIBTPU))


def flag_platform(name: str) -> str:
    return next((platform for prefix, platform in PLATFORM_PREFIXES.items() if name.startswith(prefix)), "")


def unknown_flag_warning(name: str, path: str) -> str:
    nearest = closest_flag(name)
    hint = "; did you mean %s?" % nearest if nearest else ""
    return ("%s: unknown XLA flag %s (XLA aborts at start-up on flags it does not know)%s"
            % (path, name, hint))
