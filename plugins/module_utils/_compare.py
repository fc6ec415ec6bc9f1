# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The apple-to-apple comparison of two training stacks (seed 004: Megatron-LM on NVIDIA, Primus on AMD).

A comparison file (configs/comparison/*.yml) holds the seed's table: each row's text on each side, whether it
must match (``apple_to_apple``) or is each vendor's best (``best_vs_best``) and the Megatron-LM arguments (or
environment variables) that carry it. From it this module

- renders what each side's job is told (Megatron-LM arguments by name, environment) as training overrides;
- reads back what each side's *rendered launch* passes (pretrain_gpt.py's command line in the launch script,
  the overrides in Primus's experiment file) and refuses a launch whose apple-to-apple rows differ;
- reads the argument dump both stacks print at start (Megatron-LM's ``arguments`` block; Primus runs
  Megatron-LM's own ``validate_args``) and flags every apple-to-apple row whose values differ.

Pure Python: the action plugins ``compare_plan`` and ``compare_report`` wrap it.
"""
from __future__ import annotations

import math
import re
import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron, _stack_primus
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

SIDES = ("nvidia", "amd")
APPLE = "apple_to_apple"
BEST = "best_vs_best"
KINDS = (APPLE, BEST)
CHECKS = ("argument", "derived", "stated", "data")
DERIVED = ("gradient_accumulation", "data_parallel_size")
STACKS = ("megatron", "primus")
DUMP_START = re.compile(r"-{10,} arguments -{10,}")
DUMP_END = re.compile(r"-{10,} end of arguments -{10,}")
DUMP_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*) \.+(?: (.*))?$")
# ANSI colour codes, whole or with their ESC lost (Primus's loguru output pasted), and launcher prefixes.
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\[\[?[0-9;]*m")
_PREFIX = re.compile(r"^(?:\[(?:rank|default)?\d+\]:\s?|\[\d{8} [\d:]+\]\[rank-\d+/\d+\]\[\w+\s*\] \[[^\]]*\] : ?)")


class Row(NamedTuple):
    index: int
    section: str
    parameter: str
    kind: str
    text: Dict[str, str]                 # the seed's cells per side
    arguments: Dict[str, Dict[str, Any]]  # side -> Megatron-LM argument -> value
    env: Dict[str, Dict[str, str]]        # side -> environment variable -> value
    check: str
    derived: Optional[str]
    note: str


class Side(NamedTuple):
    name: str
    vendor: str
    stack: str
    label: str
    gpu_arch: Optional[str]
    image: Optional[str]
    training_overrides: Dict[str, Any]   # the side's own training overrides (its stack's volumes, ...)


class Comparison(NamedTuple):
    name: str
    title: str
    model: str
    training_config: str
    sides: Dict[str, Side]
    rows: List[Row]
    common: Dict[str, Any]
    loss_relative: float
    loss_skip_steps: int


class Mismatch(NamedTuple):
    parameter: str
    argument: str
    nvidia: Any
    amd: Any
    source: str   # "rendered launch" or "argument dump"

    def describe(self) -> str:
        return "%s (%s): NVIDIA %s, AMD %s, in the %s" % (
            self.argument, self.parameter, shown(self.nvidia), shown(self.amd), self.source)


def shown(value: Any) -> str:
    return "unset" if value is Unset else str(value)


class _UnsetType:
    def __repr__(self) -> str:
        return "unset"


Unset = _UnsetType()


# -- the comparison file -----------------------------------------------------------------------------------

def load(document: Any, path: str = "comparison") -> Comparison:
    """Check a comparison file's content; every problem names its path."""
    if not isinstance(document, dict):
        raise ConfigError(path, "a mapping (the comparison file)", type(document).__name__)
    sides_doc = document.get("sides")
    if not isinstance(sides_doc, dict) or set(sides_doc) != set(SIDES):
        raise ConfigError(join_path(path, "sides"), "a mapping with nvidia and amd", show(sides_doc))
    sides = {name: side_of(sides_doc[name], name, join_path(join_path(path, "sides"), name)) for name in SIDES}
    rows_doc = document.get("rows")
    if not isinstance(rows_doc, list) or not rows_doc:
        raise ConfigError(join_path(path, "rows"), "a list of rows", show(rows_doc))
    rows = [row_of(item, index, join_path(join_path(path, "rows"), index)) for index, item in enumerate(rows_doc)]
    common = document.get("common_arguments") or {}
    if not isinstance(common, dict):
        raise ConfigError(join_path(path, "common_arguments"), "a mapping of Megatron-LM arguments", show(common))
    agreement = document.get("loss_agreement") or {}
    relative = agreement.get("relative", 0.02) if isinstance(agreement, dict) else None
    if isinstance(relative, bool) or not isinstance(relative, (int, float)) or not 0 < relative < 1:
        raise ConfigError(join_path(join_path(path, "loss_agreement"), "relative"), "a fraction between 0 and 1",
                          show(relative))
    skip = agreement.get("skip_steps", 0)
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
        raise ConfigError(join_path(join_path(path, "loss_agreement"), "skip_steps"), "a whole number >= 0", show(skip))
    for key in ("name", "model", "training_config"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise ConfigError(join_path(path, key), "a string", show(document.get(key)))
    return Comparison(document["name"], str(document.get("title") or document["name"]), document["model"],
                      document["training_config"], sides,
                      rows, dict(common), float(relative), skip)


def side_of(value: Any, name: str, path: str) -> Side:
    if not isinstance(value, dict):
        raise ConfigError(path, "a mapping (vendor, stack, label, gpu_arch, image)", show(value))
    stack = value.get("stack")
    if stack not in STACKS:
        raise ConfigError(join_path(path, "stack"), "one of %s" % ", ".join(STACKS), show(stack))
    optional = {key: value.get(key) for key in ("gpu_arch", "image")}
    for key, found in optional.items():
        if found is not None and not isinstance(found, str):
            raise ConfigError(join_path(path, key), "a string", show(found))
    own = value.get("training_overrides") or {}
    if not isinstance(own, dict):
        raise ConfigError(join_path(path, "training_overrides"), "a mapping (training overrides)", show(own))
    return Side(name, str(value.get("vendor", name)), stack, str(value.get("label", stack)),
                optional["gpu_arch"], optional["image"], dict(own))


def row_of(value: Any, index: int, path: str) -> Row:
    if not isinstance(value, dict):
        raise ConfigError(path, "a mapping (section, parameter, kind, nvidia, amd, ...)", show(value))
    for key in ("section", "parameter", "nvidia", "amd"):
        if not isinstance(value.get(key), str):
            raise ConfigError(join_path(path, key), "a string (the seed's text)", show(value.get(key)))
    if value.get("kind") not in KINDS:
        raise ConfigError(join_path(path, "kind"), "one of %s" % ", ".join(KINDS), show(value.get("kind")))
    arguments = per_side(value.get("set") or {}, join_path(path, "set"))
    for side, values in arguments.items():
        for dest in values:
            if dest not in _stack_megatron.ARGUMENTS and side == "nvidia":
                raise ConfigError(join_path(join_path(path, "set"), dest), "a Megatron-LM argument this collection knows",
                                  show(dest))
    env = per_side(value.get("env") or {}, join_path(path, "env"))
    check = value.get("check", "argument" if any(arguments.values()) or any(env.values()) else "stated")
    if check not in CHECKS:
        raise ConfigError(join_path(path, "check"), "one of %s" % ", ".join(CHECKS), show(check))
    derived = value.get("derived")
    if check == "derived" and derived not in DERIVED:
        raise ConfigError(join_path(path, "derived"), "one of %s" % ", ".join(DERIVED), show(derived))
    return Row(index, value["section"], value["parameter"], value["kind"],
               {side: value[side] for side in SIDES}, arguments, {k: {e: str(v) for e, v in vs.items()}
                                                                  for k, vs in env.items()},
               check, derived, str(value.get("note", "")))


def per_side(value: Any, path: str) -> Dict[str, Dict[str, Any]]:
    """``{arg: value}`` (both sides) or ``{nvidia: {...}, amd: {...}}`` (one side each)."""
    if not isinstance(value, dict):
        raise ConfigError(path, "a mapping", show(value))
    if value and set(value) <= set(SIDES):
        for side, inner in value.items():
            if not isinstance(inner, dict):
                raise ConfigError(join_path(path, side), "a mapping", show(inner))
        return {side: dict(value.get(side) or {}) for side in SIDES}
    return {side: dict(value) for side in SIDES}


# -- what each side is told -------------------------------------------------------------------------------

def side_arguments(comparison: Comparison, side: str, iterations: Optional[int] = None,
                   overrides: Optional[Mapping[str, Any]] = None,
                   data_path: Optional[str] = None, tokenizer: Optional[str] = None) -> Dict[str, Any]:
    """The Megatron-LM arguments a side's job gets: the common ones, every row's, then ``iterations`` (both
    sides), the data and tokenizer, and a side's own ``overrides`` last (that is how a deliberate mismatch is
    made; the parity check refuses it)."""
    arguments = dict(comparison.common)
    for row in comparison.rows:
        arguments.update(row.arguments[side])
    if iterations is not None:
        arguments["train_iters"] = iterations
    if tokenizer:
        arguments["tokenizer_model"] = tokenizer
    if data_path:
        arguments["data_path" if side == "nvidia" or comparison.sides[side].stack == "megatron"
                  else "train_data_path"] = data_path
    arguments.update(overrides or {})
    return arguments


def side_env(comparison: Comparison, side: str) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for row in comparison.rows:
        env.update(row.env[side])
    return env


def training_overrides(comparison: Comparison, side: str, arguments: Mapping[str, Any],
                       env: Mapping[str, str], data_path: Optional[str] = None) -> Dict[str, Any]:
    """The training_overrides of a side's train.yml run: the side's own, then its stack, iterations, arguments
    and environment."""
    config: Dict[str, Any] = {
        "framework": comparison.sides[side].stack,
        "training_iterations": str(arguments.get("train_iters")),
        "megatron_arguments": dict(arguments),
        "container_config": {"env_dict": dict(env)},
    }
    if data_path:
        config.update(mock_data="False", data_path=data_path)
    return merged(comparison.sides[side].training_overrides, {"config": config})


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    """``extra`` deep-merged over ``base`` (objects key by key, anything else replaced)."""
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


# -- what each side's rendered launch passes ---------------------------------------------------------------

def launch_arguments(node: Mapping[str, Any], stack: str) -> Dict[str, Any]:
    """The arguments in a node's rendered launch (its files in the plan): pretrain_gpt.py's command line in
    the launch script, or the overrides of Primus's experiment file."""
    files = {str(f.get("path", "")): str(f.get("content", "")) for f in node.get("files") or []}
    if stack == "primus":
        for path, content in files.items():
            if path.endswith("/primus_experiment.yaml"):
                return _stack_primus.read_overrides(content)
        raise ValueError("the plan has no Primus experiment file")
    for path, content in files.items():
        if path.endswith("/launch.sh"):
            for line in content.splitlines():
                if "pretrain_gpt.py" in line:
                    words = shlex.split(line.split(">>", 1)[0])
                    return _stack_megatron.parse_argv(words[words.index("pretrain_gpt.py") + 1:])
    raise ValueError("the launch script runs no pretrain_gpt.py")


def launch_value(arguments: Mapping[str, Any], dest: str, stack: str) -> Any:
    """A rendered argument's value; a Megatron-LM flag left out has its default."""
    if dest in arguments:
        return arguments[dest]
    if stack == "megatron" and dest in _stack_megatron.ARGUMENTS:
        return _stack_megatron.argument_default(dest)
    return Unset


def derived_value(name: str, values: Mapping[str, Any], world_size: Optional[int]) -> Any:
    """data_parallel_size and gradient_accumulation from the batch and parallel sizes."""
    def number(key: str) -> Optional[float]:
        value = values.get(key)
        try:
            return float(value) if value is not None and value is not Unset else None
        except (TypeError, ValueError):
            return None

    dp = number("data_parallel_size")
    if dp is None and world_size:
        tp, pp = number("tensor_model_parallel_size") or 1.0, number("pipeline_model_parallel_size") or 1.0
        dp = world_size / (tp * pp)
    if name == "data_parallel_size":
        return whole(dp) if dp is not None else Unset
    gbs, mbs = number("global_batch_size"), number("micro_batch_size")
    if None in (gbs, mbs, dp) or not mbs or not dp:
        return Unset
    return whole(gbs / (mbs * dp))


def whole(value: float) -> Any:
    return int(value) if float(value).is_integer() else value


def same(left: Any, right: Any) -> bool:
    """Values equal as the dump prints them: 3e-4 and 0.0003, True and 'True', None and 'None'."""
    if left is Unset or right is Unset:
        return left is right
    a, b = comparable(left), comparable(right)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def comparable(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.startswith("['") and text.endswith("']") and "', '" not in text:
        text = text[2:-2]
    try:
        return float(text)
    except ValueError:
        return text


def checked_arguments(comparison: Comparison) -> List[Tuple[str, str]]:
    """(argument, parameter) of every apple-to-apple argument set on both sides, and the common ones."""
    found: Dict[str, str] = {dest: "common argument" for dest in comparison.common}
    for row in comparison.rows:
        if row.kind != APPLE:
            continue
        for dest in set(row.arguments["nvidia"]) & set(row.arguments["amd"]):
            found[dest] = row.parameter
    return sorted(found.items())


def check_launch(comparison: Comparison, rendered: Mapping[str, Mapping[str, Any]],
                 world_sizes: Mapping[str, Optional[int]]) -> List[Mismatch]:
    """Every apple-to-apple difference between the two rendered launches (refused before the run)."""
    stacks = {side: comparison.sides[side].stack for side in SIDES}
    mismatches = []
    for dest, parameter in checked_arguments(comparison):
        values = {side: launch_value(rendered[side], dest, stacks[side]) for side in SIDES}
        if not same(values["nvidia"], values["amd"]):
            mismatches.append(Mismatch(parameter, dest, values["nvidia"], values["amd"], "rendered launch"))
    for row in comparison.rows:
        if row.check != "derived" or row.kind != APPLE:
            continue
        values = {side: derived_value(row.derived or "", {k: launch_value(rendered[side], k, stacks[side]) for k in
                                                          ("global_batch_size", "micro_batch_size",
                                                           "tensor_model_parallel_size",
                                                           "pipeline_model_parallel_size")},
                                      world_sizes.get(side)) for side in SIDES}
        expected = {side: comparable(row.text[side]) for side in SIDES}
        if row.derived == "data_parallel_size" and any(
                not same(values[side], expected[side]) for side in SIDES if row.text[side] != "-"):
            mismatches.append(Mismatch(row.parameter, row.derived, values["nvidia"], values["amd"],
                                       "rendered launch (the table says %s)" % row.text["nvidia"]))
        elif not same(values["nvidia"], values["amd"]):
            mismatches.append(Mismatch(row.parameter, row.derived or "", values["nvidia"], values["amd"],
                                       "rendered launch"))
    return mismatches


# -- what each side printed ---------------------------------------------------------------------------------

def parse_dump(text: str) -> Optional[Dict[str, str]]:
    """Megatron-LM's argument dump (the first one in ``text``): name -> the printed value; None without one."""
    values: Optional[Dict[str, str]] = None
    for raw in text.splitlines():
        line = _PREFIX.sub("", _ANSI.sub("", raw)).rstrip()
        if values is None:
            if DUMP_START.search(line):
                values = {}
            continue
        if DUMP_END.search(line):
            return values
        match = DUMP_LINE.match(line)
        if match:
            values[match.group(1)] = (match.group(2) or "").strip()
    return values


def dump_value(dump: Mapping[str, str], dest: str) -> Any:
    return dump[dest] if dest in dump else Unset


def row_report(comparison: Comparison, dumps: Mapping[str, Optional[Mapping[str, str]]],
               data_path: Optional[str] = None) -> Tuple[List[Dict[str, Any]], List[Mismatch]]:
    """Each row with what each side's argument dump shows, its status, and the apple-to-apple mismatches.

    Status: ``match``, ``mismatch`` (apple-to-apple values differ), ``best_vs_best`` (shown side by side),
    ``missing`` (a side printed no such argument, or no dump), ``stated`` (not an argument: its note says why),
    ``mock_data`` (the Dataset row when both sides trained on mock data).
    """
    rows, mismatches = [], []
    for row in comparison.rows:
        values: Dict[str, Any] = {}
        arguments: List[str] = []
        if row.check == "derived":
            arguments = [row.derived or ""]
            values = {side: derived_value(row.derived or "", dumps[side] or {}, None) if dumps[side] is not None
                      else Unset for side in SIDES}
        elif row.check in ("argument", "data"):
            arguments = sorted(set(row.arguments["nvidia"]) | set(row.arguments["amd"])) or (
                ["data_path"] if row.check == "data" else [])
            values = {side: "; ".join("%s=%s" % (dest, shown(dump_value(dumps[side] or {}, dest)))
                                      for dest in arguments) if dumps[side] is not None else Unset
                      for side in SIDES}
        status = row_status(row, arguments, dumps, values)
        if status == "mismatch":
            mismatches.extend(argument_mismatches(row, arguments, dumps))
        env = {side: ", ".join("%s=%s" % item for item in sorted(row.env[side].items())) for side in SIDES}
        note = ran_other_than_the_table(row, arguments, dumps) + row.note
        if row.check == "data" and not data_path:
            note = "mock data on both sides (no compare_data_path): the Dataset row is not met. " + note
            status = "mock_data" if status == "match" else status
        rows.append({"section": row.section, "parameter": row.parameter, "kind": row.kind,
                     "seed": dict(row.text), "arguments": arguments, "env": env,
                     "dump": {side: shown(values[side]) if side in values else "" for side in SIDES},
                     "status": status, "note": note})
    return rows, mismatches


def ran_other_than_the_table(row: Row, arguments: Sequence[str],
                             dumps: Mapping[str, Optional[Mapping[str, str]]]) -> str:
    """A one-argument row both sides ran alike but not at the table's value (a shortened run's train_iters)."""
    if row.kind != APPLE or row.check != "argument" or len(arguments) != 1 or any(d is None for d in dumps.values()):
        return ""
    values = [dump_value(dumps[side] or {}, arguments[0]) for side in SIDES]
    numbers = [comparable(values[0]), comparable(row.text["nvidia"])]
    if Unset in values or not same(values[0], values[1]) or not all(isinstance(n, float) for n in numbers) \
            or same(values[0], row.text["nvidia"]):
        return ""
    return "both sides ran %s; the table says %s. " % (values[0], row.text["nvidia"])


def row_status(row: Row, arguments: Sequence[str], dumps: Mapping[str, Optional[Mapping[str, str]]],
               values: Mapping[str, Any]) -> str:
    if row.check == "stated" or (not arguments and any(row.env[side] for side in SIDES)):
        return BEST if row.kind == BEST else "stated"
    if row.kind == BEST:
        return BEST
    if any(dumps[side] is None for side in SIDES):
        return "missing"
    if row.check == "derived":
        if any(values[side] is Unset for side in SIDES):
            return "missing"
        return "match" if same(values["nvidia"], values["amd"]) else "mismatch"
    if argument_mismatches(row, arguments, dumps):
        return "mismatch"
    if any(dump_value(dumps[side] or {}, dest) is Unset for side in SIDES for dest in arguments):
        return "missing"
    return "match"


def argument_mismatches(row: Row, arguments: Sequence[str],
                        dumps: Mapping[str, Optional[Mapping[str, str]]]) -> List[Mismatch]:
    if row.check == "derived":
        values = {side: derived_value(row.derived or "", dumps[side] or {}, None) for side in SIDES}
        if not same(values["nvidia"], values["amd"]):
            return [Mismatch(row.parameter, row.derived or "", values["nvidia"], values["amd"], "argument dump")]
        return []
    found = []
    for dest in arguments:
        values = {side: dump_value(dumps[side] or {}, dest) for side in SIDES}
        if Unset not in values.values() and not same(values["nvidia"], values["amd"]):
            found.append(Mismatch(row.parameter, dest, values["nvidia"], values["amd"], "argument dump"))
    return found


def common_mismatches(comparison: Comparison, dumps: Mapping[str, Optional[Mapping[str, str]]]) -> List[Mismatch]:
    found = []
    for dest in sorted(comparison.common):
        values = {side: dump_value(dumps[side] or {}, dest) for side in SIDES}
        if Unset not in values.values() and not same(values["nvidia"], values["amd"]):
            found.append(Mismatch("common argument", dest, values["nvidia"], values["amd"], "argument dump"))
    return found


# -- the loss curves ------------------------------------------------------------------------------------------

def loss_agreement(curves: Mapping[str, Sequence[Tuple[int, float]]], relative: float,
                   skip_steps: int = 0) -> Dict[str, Any]:
    """Whether the two loss curves agree at every step both printed (after ``skip_steps``):
    |a - b| <= relative x max(|a|, |b|). Non-finite losses never agree."""
    by_step = {side: {int(step): float(loss) for step, loss in curves.get(side) or []} for side in SIDES}
    common = sorted(set(by_step["nvidia"]) & set(by_step["amd"]))
    compared = [step for step in common if step > skip_steps]
    worst: Optional[Dict[str, Any]] = None
    disagreeing = []
    for step in compared:
        a, b = by_step["nvidia"][step], by_step["amd"][step]
        if not (math.isfinite(a) and math.isfinite(b)):
            gap = math.inf
        else:
            gap = abs(a - b) / max(abs(a), abs(b), 1e-12)
        if worst is None or gap > worst["relative_gap"]:
            worst = {"step": step, "nvidia": a, "amd": b, "relative_gap": gap}
        if gap > relative:
            disagreeing.append(step)
    agrees = bool(compared) and not disagreeing
    if not compared:
        text = "no step printed a loss on both sides: the curves cannot be compared"
    elif agrees:
        text = "the loss curves agree within %s%% at all %d common steps (largest gap %.3g%% at step %d)" % (
            short(relative * 100), len(compared), worst["relative_gap"] * 100, worst["step"])
    else:
        text = "the loss curves differ by more than %s%% at %d of %d common steps (largest gap %s at step %d)" % (
            short(relative * 100), len(disagreeing), len(compared),
            "non-finite" if math.isinf(worst["relative_gap"]) else "%.3g%%" % (worst["relative_gap"] * 100),
            worst["step"])
    return {"agrees": agrees, "tolerance_relative": relative, "skip_steps": skip_steps,
            "compared_steps": len(compared), "disagreeing_steps": disagreeing[:50],
            "worst": {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in worst.items()}
            if worst else None, "text": text}


def short(value: float) -> str:
    return ("%.3f" % value).rstrip("0").rstrip(".")
