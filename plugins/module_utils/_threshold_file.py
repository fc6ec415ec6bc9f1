# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The validation suite's threshold files: cells of thresholds, each named by the run it is for.

A cell's name lists the run's settings (``NNODES=2,STEPS=30,PRECISION=BF16,BATCH=2,GBS=128,SEQLEN=8192``
for MaxText, ``MBS=1,GBS=64,PRECISION=FP8`` for Megatron-LM). As in the suite, the cell the sweep names
judges the run (MaxText: the sweep's name; Megatron-LM: its combination's ``MBS=,GBS=,PRECISION=``).
Where the name and the run differ (``GBS: the cell says 128, this run has 32``), the differences are
data of the plan and of the results document, and ``training_require_thresholds`` makes them a FAIL. Each metric has a kind: ``min``, ``max`` (and the suite's
``min_tok_s``, ``max_ms``, ``within``, ``min_ratio``) or ``info`` (recorded, never judged).
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from ansible_collections.clusterval.training.plugins.module_utils._config import is_documentation_key, type_name
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._metricdefs import canonical_name, direction_of

KINDS = {"min": "min", "max": "max", "info": "info", "within": "within", "min_ratio": "min_ratio",
         "min_tok_s": "min", "max_ms": "max"}


class CellChoice(NamedTuple):
    name: Optional[str]
    thresholds: List[Dict[str, Any]]
    differences: List[Dict[str, Any]]
    note: str


def find(config_path: str, named: Optional[str]) -> Optional[str]:
    """``threshold_json`` relative to the config's directory; else the one ``*threshold.json`` beside it."""
    directory = os.path.dirname(os.path.abspath(config_path)) if config_path else os.getcwd()
    if named is not None:
        return named if os.path.isabs(named) else os.path.join(directory, named)
    found = sorted(glob.glob(os.path.join(directory, "*threshold.json")))
    if len(found) > 1:
        raise ConfigError("threshold_json", "the threshold file's name (%d threshold files beside the config: %s)"
                          % (len(found), ", ".join(os.path.basename(f) for f in found)), "missing")
    return found[0] if found else None


def load(path: str) -> Dict[str, Dict[str, Any]]:
    """The file's cells, checked: each maps ``training.<metric>`` to ``{kind, value}``."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as exc:
        raise ConfigError("threshold_json", "a readable threshold file", "%s (%s)" % (path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise ConfigError(path, "a threshold file in JSON", str(exc)) from None
    if not isinstance(document, dict):
        raise ConfigError(path, "an object of cells", type_name(document))
    cells = {name: cell for name, cell in document.items() if not is_documentation_key(name)}
    for name, cell in cells.items():
        check_cell(cell, '%s["%s"]' % (os.path.basename(path), name))
    return cells


def check_cell(cell: Any, path: str) -> None:
    if not isinstance(cell, dict):
        raise ConfigError(path, "an object of metrics to {kind, value}", type_name(cell))
    for metric, spec in cell.items():
        where = "%s.%s" % (path, metric)
        if not isinstance(spec, dict):
            raise ConfigError(where, "an object with kind and value", type_name(spec))
        if spec.get("kind") not in KINDS:
            raise ConfigError(join_path(where, "kind"), "one of %s" % ", ".join(KINDS), show(spec.get("kind")))
        value = spec.get("value")
        if spec["kind"] != "info" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ConfigError(join_path(where, "value"), "a number", show(value))


def labels_of(name: str) -> Dict[str, str]:
    """``A=1,B=x`` as ``{"A": "1", "B": "x"}``; a name without ``=`` has no labels."""
    pairs = [part.split("=", 1) for part in name.split(",") if "=" in part]
    return {key.strip().upper(): value.strip() for key, value in pairs}


def same(label: str, actual: Any) -> bool:
    try:
        return float(label) == float(actual)
    except (TypeError, ValueError):
        return label.strip().upper() == str(actual).strip().upper()


def differences(name: str, actual: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The settings the cell's name states and the run has otherwise: ``{setting, cell, run}``."""
    return [{"setting": key, "cell": value, "run": actual[key]} for key, value in labels_of(name).items()
            if key in actual and actual[key] is not None and not same(value, actual[key])]


def difference_text(difference: Mapping[str, Any]) -> str:
    """``GBS: the cell says 128, this run has 32``."""
    return "%s: the cell says %s, this run has %s" % (difference["setting"], difference["cell"], difference["run"])


def choose(cells: Mapping[str, Dict[str, Any]], actual: Mapping[str, Any], named: str, enforce: bool,
           path: str) -> CellChoice:
    """The cell the sweep names judges the run, as in the suite; where the name and the run differ, the
    differences are named (and a FAIL with ``training_require_thresholds``)."""
    run = ",".join("%s=%s" % (key, value) for key, value in actual.items() if value is not None)
    if named not in cells:
        return CellChoice(None, unjudged(next(iter(cells.values()), {}), path), [],
                          "%s: no cell named %s (the sweep's cell; the file has %s); its metrics are reported, "
                          "not judged" % (path, named, ", ".join(sorted(cells)) or "none"))
    found = differences(named, actual)
    unknown = [key for key in labels_of(named) if key not in actual or actual[key] is None]
    note = "%s: cell %s judges this run (%s)" % (path, named, run)
    if found:
        note += "; the cell is for another run: %s" % "; ".join(difference_text(d) for d in found)
    if unknown:
        note += "; not compared: %s" % ", ".join(unknown)
    return CellChoice(named, thresholds(cells[named], enforce), found, note)


def thresholds(cell: Mapping[str, Any], enforce: bool) -> List[Dict[str, Any]]:
    """The cell as the plan's thresholds (docs/results.md)."""
    result = []
    for metric, spec in cell.items():
        canonical = canonical_name(metric)
        kind = KINDS[spec["kind"]]
        threshold = {"metric": canonical, "kind": kind, "value": spec.get("value") if kind != "info" else None,
                     "direction": direction_of(canonical), "set": kind != "info", "source": "threshold file",
                     "enforce": enforce}
        if kind == "info":
            threshold["reference"] = spec.get("value")
        if kind == "within":
            threshold["pct"] = spec.get("tolerance_pct", 5.0)
        if kind == "min_ratio":
            threshold["of"] = canonical_name(str(spec.get("reference", "")))
        result.append(threshold)
    return result


def unjudged(cell: Mapping[str, Any], path: str) -> List[Dict[str, Any]]:
    """A cell's gated metrics, named in the verdict as not judged: no cell of the file is for this run."""
    reason = "no cell of %s for this run" % path
    return [dict(threshold, set=False, value=None, unset_reason=reason)
            for threshold in thresholds(cell, True) if threshold["kind"] != "info"]
