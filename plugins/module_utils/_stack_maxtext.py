# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""MaxText (JAX): typed YAML config, model checks, parallelism checks and the launch line."""
from __future__ import annotations

import difflib
import math
import re
import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils import _gpus
from ansible_collections.clusterval.training.plugins.module_utils._config import is_unset, to_bool, type_name
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import ENV_LIKE_KEY, Context
from ansible_collections.clusterval.training.plugins.module_utils._xla import (
    MEASURED_JAXLIB, XLA_FLAGS, checked_version, render_flag_variables, version_from_image)
from ansible_collections.clusterval.training.plugins.module_utils import _tpu

try:  # PyYAML comes with ansible-core; this module runs on the controller only (the plan), never on a node
    import yaml
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None
    YAML_IMPORT_ERROR = str(exc)
from ansible_collections.clusterval.training.plugins.module_utils._maxtext_keys import LAYOUT_KEYS
from ansible_collections.clusterval.training.plugins.module_utils._models import (
    MODELS, canonical, contradicting_maxtext_keys, model_with_maxtext_dims)

WORKDIR = "/workspace/maxtext"


class Layout(NamedTuple):
    """One layout of a MaxText checkout: where its train script is, and what differs."""
    name: str
    train_script: str
    note: str


# The launch script runs the first train script the image has and writes the layout's name to the log.
# The sources of each note: docs/config.md ("MaxText layouts") and tests/fixtures/maxtext/SOURCE.md.
LAYOUTS = (
    Layout("maxtext-package", "/workspace/maxtext/src/maxtext/trainers/pre_train/train.py",
           "today's MaxText (the PyPI wheel maxtext 0.2.5, run by the simulated cluster's real-framework "
           "image): package maxtext, trainers/pre_train/train.py, its configs/base.yml found by pyconfig; needs "
           "DECOUPLE_GCLOUD=TRUE without Google Cloud; refuses a key it does not know (MAXTEXT CONFIG ERROR); "
           "step lines add lm_loss and perplexity"),
    Layout("maxtext-2025", "/workspace/maxtext/src/MaxText/train.py",
           "MaxText of September 2025 on (src/MaxText/train.py, src/MaxText/configs/base.yml; upstream's layout "
           "from 2025-09-03, the validation suite's from 2026-03); ignores a config file key it does not know; "
           "step lines end with loss"),
    Layout("maxtext-legacy", "/workspace/maxtext/MaxText/train.py",
           "MaxText before its src/ layout (upstream until 2025-09-03), and ROCm's MaxText in "
           "rocm/jax-training:maxtext-v25.9 as the validation suite ran it (MaxText/train.py); ignores a config "
           "file key it does not know; step lines end with loss"),
)
TRAIN_SCRIPTS = tuple(layout.train_script for layout in LAYOUTS)
# Seed model_params keys that MaxText does not know; they must never reach it.
NON_MAXTEXT_KEYS = frozenset((
    "tokenizer_model", "model_size", "xla_flags", "micro_batch_size", "precision", "sequence_length",
    "tensor_parallelism", "pipeline_parallelism", "recompute", "fsdp", "result_dict", "batch_size",
))
_INT = re.compile(r"^[+-]?[0-9][0-9_]*$")
_FLOAT = re.compile(r"^[+-]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9]+|[0-9][0-9_]*)(?:[eE][+-]?[0-9]+)?$")
_YAML_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A config file key that pyconfig reads itself, in every layout: the parent config (pyconfig.py, _BASE_CONFIG_ATTR).
PYCONFIG_KEYS = frozenset(("base_config",))
# ROCm's images of 2025 (maxtext-v25.9: September 2025) run MaxText of 2025.
_IMAGE_2025 = re.compile(r"(?:^|/)rocm/jax-training:maxtext-v25\.")
_ICI = re.compile(r"^ici_[a-z_]+_parallelism$")
_DCN = re.compile(r"^dcn_[a-z_]+_parallelism$")


class ModelCheck(NamedTuple):
    model_name: Optional[str]
    trains: str
    warnings: List[str]


def typed(value: Any, path: str) -> Any:
    """The value MaxText expects: booleans and numbers typed, strings kept, lists element-wise."""
    if isinstance(value, list):
        return [typed(item, join_path(path, index)) for index, item in enumerate(value)]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if not isinstance(value, str):
        raise ConfigError(path, "a string, number, boolean or list", show(value))
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return value


def maxtext_params(params: Mapping[str, Any], path: str) -> Dict[str, Any]:
    return {key: typed(value, join_path(path, key)) for key, value in params.items()
            if key not in NON_MAXTEXT_KEYS}


def check_model(model: str, params: Mapping[str, Any], path: str) -> ModelCheck:
    """Decides on ``model_name``. Like the validation suite, a model key MaxText knows becomes
    ``model_name``; MaxText then loads its model file, whose values override the base_* keys of the
    config file (they are not command-line keys), so the run trains the model the key names. base_*
    values that contradict it are reported."""
    chosen = str(params["model_name"]) if params.get("model_name") is not None else None
    name = chosen or (canonical(model) if canonical(model) in MODELS else None)
    if name is None:
        return ModelCheck(None, model_with_maxtext_dims(params) or model, [])
    contradicting = contradicting_maxtext_keys(name, params)
    warnings = []
    if contradicting:
        other = model_with_maxtext_dims(params)
        values = ", ".join("%s=%s" % item for item in sorted(contradicting.items()))
        verb = "contradict" if len(contradicting) > 1 else "contradicts"
        whose = " (they are %s's)" % other if other and other != name else ""
        warnings.append("%s: %s %s MaxText's %s model file%s; MaxText's model file wins: this run "
                        "trains %s (model_name: %s)" % (path, values, verb, name, whose, name, name))
    return ModelCheck(name, name, warnings)


def runs_maxtext_2025(image: str) -> bool:
    """Whether the image's tag names a MaxText of 2025 (rocm/jax-training:maxtext-v25.N)."""
    return bool(_IMAGE_2025.search(image.split("@", 1)[0]))


IGNORES = ("maxtext-2025", "maxtext-legacy")  # the layouts that ignore a config file key they do not know


def assumed_layouts(image: str) -> Tuple[Tuple[str, ...], str]:
    """The layouts whose keys the config is checked against, and why those."""
    if runs_maxtext_2025(image):
        return IGNORES, "assumed from the image's tag %s" % image
    return tuple(LAYOUT_KEYS), "every layout the collection knows: the image's tag (%s) does not say which MaxText " \
        "it runs" % (image or "none")


def consequence(layouts: Sequence[str]) -> str:
    ignoring = [name for name in layouts if name in IGNORES]
    parts = ["%s would ignore it without a word" % " and ".join(ignoring)] if ignoring else []
    if "maxtext-package" in layouts:
        parts.append("maxtext-package refuses it when it starts (MAXTEXT CONFIG ERROR)")
    return "; ".join(parts)


def key_warnings(image: str, params: Mapping[str, Any], path: str) -> List[str]:
    """The config keys that a MaxText layout the run may have lacks, naming the layouts assumed: MaxText of 2025
    checks only the command-line keys, so it would ignore them without a word; today's MaxText refuses them when
    it starts. With no layout given away by the image's tag, only a key that no layout has is named (the run's own
    MaxText may be any of them); it gets the nearest known key as a suggestion (a typo)."""
    layouts, why = assumed_layouts(image)
    known = frozenset().union(*LAYOUT_KEYS.values())
    warnings = []
    for key in params:
        lacking = [name for name in layouts if key not in LAYOUT_KEYS[name]]
        if key in PYCONFIG_KEYS or not [name for name in lacking if name in IGNORES]:
            continue
        where = join_path(path, key)
        if len(lacking) < len(layouts):
            if layouts != IGNORES:
                continue
            having = [name for name in layouts if name not in lacking]
            warnings.append("%s: only %s of the MaxText layouts has the key %s: %s (%s)"
                            % (where, " and ".join(having), key, consequence(lacking), why))
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.8) if key not in known else []
        hint = " (did you mean %s?)" % close[0] if close else ""
        missing = "MaxText of 2025 (%s) has no key" % image if runs_maxtext_2025(image) else \
            "no MaxText layout has the key"
        warnings.append("%s: %s %s%s: %s (%s)" % (where, missing, key, hint, consequence(lacking), why))
    return warnings


def check_parallelism(params: Mapping[str, Any], gpus_per_node: int, nnodes: int, path: str,
                      vendor: str = "") -> None:
    """The ici_* axes multiply to the GPUs per node and the dcn_* axes to the nodes; on TPU hosts to the chips
    of a slice and to the slices."""
    (ici, ici_what), (dcn, dcn_what) = _tpu.mesh_totals(params, gpus_per_node, nnodes, path) \
        if vendor == _tpu.TPU else ((gpus_per_node, "GPUs per node"), (nnodes, "nodes in the job"))
    _check_axes(params, _ICI, ici, path, ici_what)
    _check_axes(params, _DCN, dcn, path, dcn_what)


def _check_axes(params: Mapping[str, Any], pattern: "re.Pattern[str]", total: int, path: str, what: str) -> None:
    axes = {key: value for key, value in params.items() if pattern.match(key)}
    if not axes:
        return
    sizes = {}
    for key, value in axes.items():
        size = typed(value, join_path(path, key))
        if not isinstance(size, int) or isinstance(size, bool) or size == 0 or size < -1:
            raise ConfigError(join_path(path, key), "a positive integer or -1", show(value))
        sizes[key] = size
    rest = [key for key, size in sizes.items() if size == -1]
    fixed = math.prod(size for size in sizes.values() if size != -1)
    shown = " x ".join("%s=%d" % item for item in sizes.items())
    if len(rest) > 1:
        raise ConfigError(join_path(path, rest[1]), "at most one -1 among %s" % ", ".join(sizes), shown)
    fits = total % fixed == 0 if rest else fixed == total
    if not fits:
        raise ConfigError(path, "a product of %s equal to the %d %s" % (", ".join(sizes), total, what), shown)


# -- YAML rendering (on the controller, with PyYAML; the nodes receive the finished file) -------------

class FlowList(list):
    """A list written in flow style (``[silu, linear]``), as MaxText's own configs write them."""


if yaml is not None:
    class MaxTextDumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """PyYAML's safe dumper; block mappings, flow lists."""

    MaxTextDumper.add_representer(
        FlowList, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True))


def builtin(value: Any) -> Any:
    """The plain Python value of a scalar: values that came through Ansible's templating are subclasses of str,
    int and float (tagged with their origin), which PyYAML's safe dumper refuses."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def render_yaml(values: Mapping[str, Any]) -> str:
    """MaxText's flat config as YAML 1.1 (PyYAML, which MaxText reads it with): typed scalars, lists in flow
    style, keys in the given order."""
    for key, value in values.items():
        if not _YAML_KEY.match(key):
            raise ConfigError(key, "a MaxText key (letters, digits, _)", show(key))
        if isinstance(value, dict):
            raise ConfigError(key, "a scalar or a list for MaxText", "an object")
    if yaml is None:
        raise RuntimeError("PyYAML is needed on the controller to write MaxText's config (it comes with "
                           "ansible-core): %s" % YAML_IMPORT_ERROR)
    plain = {str(key): FlowList(builtin(v) for v in value) if isinstance(value, (list, tuple)) else builtin(value)
             for key, value in values.items()}
    return yaml.dump(plain, Dumper=MaxTextDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=100000)


def build_yaml(run_name: str, steps: int, enable_checkpointing: bool, model_name: Optional[str],
               params: Mapping[str, Any]) -> str:
    head: Dict[str, Any] = {"base_config": "base.yml", "run_name": run_name, "steps": steps}
    if model_name:
        head["model_name"] = model_name
    head["enable_checkpointing"] = enable_checkpointing
    body = {key: value for key, value in params.items() if key not in head}
    body.setdefault("hardware", "gpu")
    return render_yaml({**head, **body})


# -- launch ---------------------------------------------------------------------------------------

def command_args(yaml_path: str, output_dir: str) -> List[str]:
    return [yaml_path, "base_output_directory=%s" % output_dir]


def run_lines(yaml_path: str, output_dir: str, log_path: str,
              candidates: Sequence[str] = TRAIN_SCRIPTS) -> Tuple[List[str], str]:
    """Shell lines that pick the first existing train script and run it; and the display command."""
    args = " ".join(shlex.quote(arg) for arg in command_args(yaml_path, output_dir))
    quoted = " ".join(shlex.quote(candidate) for candidate in candidates)
    known = " ".join("%s) echo %s ;;" % (shlex.quote(layout.train_script), layout.name) for layout in LAYOUTS)
    lines = [
        'layout_of() { case "$1" in %s *) echo custom ;; esac; }' % known,
        "train_script=",
        "for candidate in %s; do" % quoted,
        '  if [ -f "$candidate" ]; then train_script=$candidate; break; fi',
        "done",
        'if [ -z "$train_script" ]; then',
        "  echo 'clusterval: no MaxText train script in this image (looked for: %s)' >>%s"
        % (" ".join(candidates), shlex.quote(log_path)),
        "  finish 127",
        "fi",
        'echo "clusterval: MaxText layout: $(layout_of "$train_script") ($train_script)" >>%s' % shlex.quote(log_path),
        'python3 "$train_script" %s >>%s 2>&1' % (args, shlex.quote(log_path)),
    ]
    display = "python3 %s %s" % (shlex.quote(candidates[0]), args)
    return lines, display


# -- the planner's part of the stack (was _plan's) ------------------------------------------------

def maxtext_parts(ctx: Context, _data_cache_dir: str = "") -> Dict[str, Any]:
    path = ctx.selection.path
    check = check_model(ctx.selection.model, ctx.params, path)
    ctx.warnings.extend(check.warnings)
    values = maxtext_params(ctx.params, path)
    if ctx.gpu_vendor == _tpu.TPU:
        values = _tpu.maxtext_values(values, path)
    ctx.warnings.extend(key_warnings(str(ctx.config.get("container_image", "")), values, path))
    enable_checkpointing = to_bool(ctx.config.get("enable_checkpointing", "False"), "config.enable_checkpointing")
    yaml_path = "%s/maxtext.yml" % ctx.run_dir
    output_dir = "%s/output" % ctx.run_dir
    content = build_yaml(ctx.run_id, ctx.total_steps, enable_checkpointing, check.model_name, values)
    root = maxtext_root(ctx)
    candidates = train_script_paths(ctx, root)
    lines, display = run_lines(yaml_path, output_dir, "%s/training.log" % ctx.run_dir, candidates)
    return {"env": xla_flags(ctx), "workdir": root, "run_lines": lines,
            "command": display, "files": [{"path": yaml_path, "mode": "0644", "content": content}],
            "directories": [output_dir], "trains_model": check.trains, "script_candidates": candidates}


def maxtext_root(ctx: Context) -> str:
    """The MaxText checkout in the image: config.maxtext_root, else the vendor's images' (ROCm: /workspace/maxtext,
    NVIDIA's JAX-Toolbox: /opt/maxtext)."""
    root = ctx.config.get("maxtext_root", _gpus.VENDOR_FACTS[ctx.gpu_vendor].maxtext_root)
    if not isinstance(root, str) or not root.startswith("/") or any(ch.isspace() for ch in root):
        raise ConfigError("config.maxtext_root", "an absolute path in the image without spaces", show(root))
    return root.rstrip("/") or "/"


def train_script_paths(ctx: Context, root: str = WORKDIR) -> List[str]:
    """MaxText's train script: the first of config.train_script_paths the image has (default: the known ones,
    under the image's MaxText checkout)."""
    known = [root + path[len(WORKDIR):] for path in TRAIN_SCRIPTS]
    paths = ctx.config.get("train_script_paths", known)
    if not isinstance(paths, list) or not paths:
        raise ConfigError("config.train_script_paths", "a list of paths in the image", show(paths))
    for index, path in enumerate(paths):
        if not isinstance(path, str) or not path.startswith("/") or any(ch.isspace() for ch in path):
            raise ConfigError(join_path("config.train_script_paths", index), "an absolute path without spaces",
                              show(path))
    return list(paths)


def xla_flags(ctx: Context) -> Dict[str, str]:
    """XLA_FLAGS (and on TPU LIBTPU_INIT_ARGS) from the config's xla_* keys, then config.xla_flags, then the
    model's xla_flags (last wins): each flag where the nodes' libraries accept it."""
    top = {key: value for key, value in ctx.config.items()
           if isinstance(key, str) and key.startswith("xla_") and key != "xla_flags" and not ENV_LIKE_KEY.match(key)}
    sources = [(top, "config"), (ctx.config.get("xla_flags", {}), "config.xla_flags"),
               (ctx.params.get("xla_flags", {}), join_path(ctx.selection.path, "xla_flags"))]
    for flags, path in sources[1:]:
        if not isinstance(flags, dict):
            raise ConfigError(path, "an object of flag names to values", type_name(flags))
    hardware = str(ctx.selection.params.get("hardware", "gpu")).lower()
    version = jaxlib_version(ctx)
    ctx.xla_checked = xla_check_statement(version)
    on_tpu = ctx.gpu_vendor == _tpu.TPU or hardware.startswith("tpu")
    rendered, warnings = render_flag_variables(sources, _tpu.TPU if on_tpu else "gpu", version)
    ctx.warnings.extend(warnings)
    return {XLA_FLAGS: "", **rendered}


def jaxlib_version(ctx: Context) -> Optional[Tuple[str, str]]:
    """The jaxlib version the image runs and where that comes from: config.jaxlib_version, else the image tag."""
    if ctx.config.get("jaxlib_version") is not None and not is_unset(ctx.config["jaxlib_version"]):
        return checked_version(ctx.config["jaxlib_version"], "config.jaxlib_version"), "config.jaxlib_version"
    image = str(ctx.config.get("container_image", ""))
    found = version_from_image(image)
    return (found, "from the image tag %s" % image) if found else None


def xla_check_statement(version: Optional[Tuple[str, str]]) -> Dict[str, Any]:
    if version:
        return {"jaxlib": version[0], "source": version[1],
                "text": "XLA flags checked against jaxlib %s (%s)" % version}
    return {"jaxlib": None, "source": None,
            "text": "XLA flags checked against the catalogue only: neither config.jaxlib_version nor the image "
                    "tag names the image's jaxlib (measured: %s)" % ", ".join(MEASURED_JAXLIB)}
