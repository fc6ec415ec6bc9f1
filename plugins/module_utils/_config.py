# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Training config engine: load, validate, coerce, `{user-id}`, `<changeme>`, overrides, selection.

The seed format is described in docs/config.md. Everything here is pure Python and raises
`ConfigError` naming the JSON path of the offending value.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _nxdt
from ansible_collections.clusterval.training.plugins.module_utils._errors import (
    ConfigError,
    Problem,
    join_path,
    show,
)

CHANGEME = "<changeme>"
USER_ID = "{user-id}"
MODES = ("single_node", "multi_node")

_TRUE = frozenset(("true", "yes", "on", "1"))
_FALSE = frozenset(("false", "no", "off", "0"))
# Keys that hold a boolean wherever they appear (the engine's, the suite's versioned format's, and MaxText's
# boolean settings the configs carry). XLA's boolean flags are checked by the flag catalogue (_xla.py).
BOOLEAN_KEYS = frozenset((
    "distributed_training", "distributed", "enable_checkpointing", "mock_data", "enforce_thresholds", "privileged",
    "verify_dmesg", "verify_network_errors", "use_generated_config", "enabled", "enforce", "delete_ckpt_dir",
    "async_checkpointing", "checkpoint_is_quantized", "compile", "enable_async_tensor_parallel", "enable_dropout",
    "enable_float8", "enable_goodput_recording", "logits_dot_in_fp32", "logits_via_embedding", "megablox",
    "monitor_goodput", "optimizer_memory_host_offload", "packing", "quantize_kvcache", "scan_layers", "shardy",
    "sparse_matmul", "use_iota_embed", "precompute_float8_dynamic_scale_for_fsdp", "recompute", "fsdp",
))
_INT = re.compile(r"^[+-]?[0-9][0-9_]*$")
_FLOAT = re.compile(r"^[+-]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)?$")


def load_config_text(text: str, source: str = "config") -> Dict[str, Any]:
    """Parses a training JSON; invalid JSON is reported with its line and column."""
    try:
        data = json.loads(text, object_pairs_hook=KeyCheckedObject.from_pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, "valid JSON",
                          "%s at line %d column %d" % (exc.msg, exc.lineno, exc.colno)) from None
    refuse_duplicate_keys(data, "")
    validate_sections(data)
    return plain(data)


class KeyCheckedObject(dict):
    """A JSON object that remembers the keys it had twice (json keeps the last value silently)."""
    duplicates: List[str] = []

    @classmethod
    def from_pairs(cls, pairs: List[Tuple[str, Any]]) -> "KeyCheckedObject":
        obj = cls(pairs)
        seen: set = set()
        obj.duplicates = [key for key, dummy in pairs if key in seen or seen.add(key)]
        return obj


def refuse_duplicate_keys(value: Any, path: str) -> None:
    if isinstance(value, KeyCheckedObject) and value.duplicates:
        key = value.duplicates[0]
        raise ConfigError(join_path(path, key) if path else key, "each key once in its object",
                          "%s given twice (the last would silently win)" % show(key))
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        refuse_duplicate_keys(item, join_path(path, key) if path else str(key))


def plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def load_config_file(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(path, "a readable training config file", exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "UTF-8 text", "undecodable byte at offset %d" % exc.start) from None
    if path.endswith((".yaml", ".yml")):
        return load_nxdt_text(text, path)
    return load_config_text(text, source=path)


def load_nxdt_text(text: str, source: str) -> Dict[str, Any]:
    """A YAML training config is Neuronx Distributed Training's own: in the engine's shape (_nxdt.to_engine)."""
    document = _nxdt.load_text(text, source)
    if not _nxdt.is_nxdt(document):
        raise ConfigError(source, "an NxDT YAML (trainer, exp_manager, distributed_strategy, data, model, precision "
                          "sections; other configs are JSON)", "top-level keys %s" % ", ".join(map(str, document)))
    return _nxdt.to_engine(document)


def validate_sections(data: Any) -> None:
    if not isinstance(data, dict):
        raise ConfigError("(top level)", "a JSON object with config and model_params", type_name(data))
    if "schema_version" in data:
        return  # the versioned format: checked by _versioned when planned
    problems = [Problem(name, "an object", "missing" if name not in data else type_name(data[name]))
                for name in ("config", "model_params") if not isinstance(data.get(name), dict)]
    if problems:
        raise ConfigError.many(problems)


def type_name(value: Any) -> str:
    """What a value is, in words; subclasses (Ansible's tagged lists and strings) as their base type."""
    names = ((bool, "a boolean"), (dict, "an object"), (list, "a list"), (tuple, "a list"), (str, "a string"),
             (int, "an integer"), (float, "a number"), (type(None), "null"))
    return next((name for kind, name in names if isinstance(value, kind)), type(value).__name__)


def is_documentation_key(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_")


def without_documentation(value: Any) -> Any:
    """Drops every `_`-prefixed key (examples and comments), recursively."""
    if isinstance(value, dict):
        return {key: without_documentation(item) for key, item in value.items()
                if not is_documentation_key(key)}
    if isinstance(value, list):
        return [without_documentation(item) for item in value]
    return value


def resolve_user(value: Any, user: str) -> Any:
    """Replaces `{user-id}` in keys and string values with the remote user."""
    if isinstance(value, dict):
        return {resolve_user(key, user): resolve_user(item, user) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_user(item, user) for item in value]
    if isinstance(value, str) and USER_ID in value:
        return value.replace(USER_ID, user)
    return value


def is_unset(value: Any) -> bool:
    return isinstance(value, str) and CHANGEME in value


def find_changeme(value: Any, path: str) -> List[str]:
    """Paths of every value or key containing `<changeme>`, documentation keys excluded."""
    return [found for found, item in walk(value, path) if is_unset(item)] + changeme_keys(value, path)


def changeme_keys(value: Any, path: str) -> List[str]:
    found: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if is_documentation_key(key):
                continue
            if is_unset(key):
                found.append(join_path(path, key))
            found += changeme_keys(item, join_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += changeme_keys(item, join_path(path, index))
    return found


def walk(value: Any, path: str) -> Iterator[Tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_documentation_key(key):
                yield from walk(item, join_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, join_path(path, index))
    else:
        yield path, value


def refuse_non_booleans(data: Any, path: str = "") -> None:
    """Every boolean key (BOOLEAN_KEYS) anywhere in the document holds true/false (or the strings the
    configs use for them, "True", "0", ...): ``distributed_training: "maybe"`` is refused by its path."""
    problems = [Problem(found, "a boolean (true/false)", show(value)) for found, value in boolean_values(data, path)
                if not is_boolean(value)]
    if problems:
        raise ConfigError.many(problems)


def boolean_values(value: Any, path: str) -> Iterator[Tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if is_documentation_key(key):
                continue
            if key in BOOLEAN_KEYS and not isinstance(item, (dict, list)) and item is not None and not is_unset(item):
                yield join_path(path, key), item
            yield from boolean_values(item, join_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from boolean_values(item, join_path(path, index))


def is_boolean(value: Any) -> bool:
    try:
        to_bool(value, "")
    except ConfigError:
        return False
    return True


def check_overrides(value: Any, name: str) -> Dict[str, Any]:
    """``training_overrides`` (or ``_extra``) as an object in the config's shape, or our own message."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return value
    hint = " (pass it as JSON: -e '{\"%s\": {\"config\": {...}}}')" % name if isinstance(value, str) else ""
    raise ConfigError(name, "an object in the config's shape, such as {\"config\": {\"nccl_socket_ifname\": "
                      "\"eth0\"}}%s" % hint, type_name(value))


def merge_overrides(base: Mapping[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    """``extra`` deep-merged over ``base``; a ``null`` stays (it removes the config's key later)."""
    merged = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_overrides(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def deep_merge(base: Any, overrides: Any, path: str = "overrides") -> Any:
    """Merges overrides over base; a `null` override removes the key."""
    if overrides is None:
        return copy.deepcopy(base)
    if not isinstance(overrides, dict):
        raise ConfigError(path, "an object", type_name(overrides))
    merged = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value, join_path(path, key))
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# -- explicit coercion --------------------------------------------------------------------------

def to_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise ConfigError(path, "a boolean (true/false)", show(value))


def to_int(value: Any, path: str, minimum: Optional[int] = None) -> int:
    number: Optional[int] = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INT.match(value.strip()):
        number = int(value.strip())
    if number is None:
        raise ConfigError(path, "an integer", show(value))
    if minimum is not None and number < minimum:
        raise ConfigError(path, "an integer >= %d" % minimum, show(value))
    return number


def to_float(value: Any, path: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text and _FLOAT.match(text) and any(ch.isdigit() for ch in text):
            return float(text)
    raise ConfigError(path, "a number", show(value))


def to_str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(path, "a string", show(value))


def require(mapping: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in mapping or mapping[key] is None:
        raise ConfigError(join_path(path, key), "a value", "missing")
    return mapping[key]


def require_dict(mapping: Mapping[str, Any], key: str, path: str, default: Any = None) -> Dict[str, Any]:
    value = mapping.get(key, default)
    if not isinstance(value, dict):
        raise ConfigError(join_path(path, key), "an object", "missing" if value is None else type_name(value))
    return value


# -- model and GPU arch selection ----------------------------------------------------------------

class Selection(NamedTuple):
    mode: str
    model: str
    gpu_arch: str
    params: Dict[str, Any]
    path: str


class ArchChoices(NamedTuple):
    """The GPU arch entries the config offers for the chosen mode and model (documentation keys left out)."""
    mode: str
    model: str
    path: str               # model_params.<mode>.<model>
    archs: List[str]        # in the config's order


def arch_choices(config: Mapping[str, Any], model: Optional[str] = None, mode: Optional[str] = None,
                 nhosts: int = 1) -> ArchChoices:
    """The mode and model chosen as select_model_params chooses them, and the arch keys offered there."""
    model_params = config["model_params"]
    mode = _select_mode(model_params, mode, nhosts)
    mode_path = join_path("model_params", mode)
    models = require_dict(model_params, mode, "model_params")
    model = _select_key(models, model, mode_path, "model", "training_model")
    model_path = join_path(mode_path, model)
    archs = require_dict(models, model, mode_path)
    return ArchChoices(mode, model, model_path, [key for key in archs if not is_documentation_key(key)])


def select_model_params(config: Mapping[str, Any], model: Optional[str] = None,
                        gpu_arch: Optional[str] = None, mode: Optional[str] = None,
                        nhosts: int = 1) -> Selection:
    """Picks model_params[mode][model][gpu_arch], defaulting to the only choice present."""
    mode, model, model_path, dummy = arch_choices(config, model, mode, nhosts)
    archs = config["model_params"][mode][model]
    gpu_arch = _select_key(archs, gpu_arch, model_path, "GPU arch", "training_gpu_arch")
    params_path = join_path(model_path, gpu_arch)
    params = require_dict(archs, gpu_arch, model_path)
    return Selection(mode, model, gpu_arch, params, params_path)


def _select_mode(model_params: Mapping[str, Any], mode: Optional[str], nhosts: int) -> str:
    present = [name for name in MODES if isinstance(model_params.get(name), dict)]
    if mode is not None:
        if mode not in present:
            raise ConfigError(join_path("model_params", mode), "one of %s" % (", ".join(present) or "single_node, multi_node"),
                              "missing")
        return mode
    if not present:
        raise ConfigError("model_params", "an object with single_node or multi_node",
                          ", ".join(sorted(model_params)) or "an empty object")
    if len(present) == 1:
        return present[0]
    return "multi_node" if nhosts > 1 else "single_node"


def _select_key(choices: Mapping[str, Any], wanted: Optional[str], path: str, what: str, option: str) -> str:
    available = sorted(key for key in choices if not is_documentation_key(key))
    if wanted is not None:
        if wanted not in available:
            raise ConfigError(join_path(path, wanted), "a %s present in the config (%s)" % (what, ", ".join(available)),
                              "no such key")
        return wanted
    if len(available) == 1:
        return available[0]
    if not available:
        raise ConfigError(path, "at least one %s" % what, "an empty object")
    raise ConfigError(path, "a %s chosen with %s (available: %s)" % (what, option, ", ".join(available)),
                      "%d choices and none selected" % len(available))
