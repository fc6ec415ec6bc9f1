# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A comparison run: both sides planned from the comparison file (parity of the rendered launches), then
comparison.json and comparison.html from what each side ran (its plan.json, its nodes' logs, results.json).

Wrapped by the action plugins ``compare_plan`` (before any node is touched) and ``compare_report``.
"""
from __future__ import annotations

import json
import math
import os
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _compare, _logs
from ansible_collections.clusterval.training.plugins.module_utils._compare import SIDES, Comparison, Mismatch
from ansible_collections.clusterval.training.plugins.module_utils._plan import PlanOptions, plan_run
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.module_utils._report_html import (
    PALETTE, Curve, environment, svg_chart)
from ansible_collections.clusterval.training.plugins.module_utils._stacks import log_format

# The figures side by side: the parsed step key, its label, its unit, and whether higher is better.
FIGURES = (
    ("tokens_per_gpu", "tokens/s per GPU", "tokens/s", True),
    ("throughput_per_gpu", "TFLOP/s per GPU", "TFLOP/s", True),
    ("elapsed_time_per_iteration", "step time", "ms", False),
    ("mem_used_gb", "GPU memory in use", "GB", False),
    ("mem_usage", "GPU memory in use (fraction)", "", False),
)


def plan_sides(comparison: Comparison, settings: Mapping[str, Mapping[str, Any]], iterations: Optional[int],
               data_path: Optional[str] = None, tokenizer: Optional[str] = None
               ) -> Tuple[Dict[str, Dict[str, Any]], List[Mismatch]]:
    """Each side's plan and training overrides, and every apple-to-apple difference of the rendered launches.

    ``settings[side]``: hosts (``_plan.Host``), config (the raw training config), config_path, gpu_arch,
    gpus_per_node, run_id, remote_user, base_overrides (the inventory's training_overrides), image, overrides
    (the side's own argument overrides: how a deliberate mismatch is made).
    """
    sides: Dict[str, Dict[str, Any]] = {}
    for side in SIDES:
        mine = settings[side]
        arguments = _compare.side_arguments(comparison, side, iterations, mine.get("overrides"), data_path,
                                            tokenizer or config_tokenizer(mine["config"], comparison.model,
                                                                          settings["nvidia"].get("gpu_arch")))
        overrides = _compare.training_overrides(comparison, side, arguments, _compare.side_env(comparison, side),
                                                data_path)
        if mine.get("image"):
            overrides["config"]["container_image"] = mine["image"]
        merged = _compare.merged(mine.get("base_overrides") or {}, overrides)
        options = PlanOptions(config_path=mine["config_path"], model=comparison.model, gpu_arch=mine.get("gpu_arch"),
                              overrides=merged, run_id=mine["run_id"], gpus_per_node=mine.get("gpus_per_node"),
                              remote_user=mine.get("remote_user", "root"))
        plan = plan_run(mine["config"], list(mine["hosts"]), options)
        sides[side] = {"plan": plan, "training_overrides": overrides,
                       "warnings": vendor_warnings(comparison, side, plan)}
    return sides, rendered_mismatches(comparison, {side: sides[side]["plan"] for side in SIDES})


def config_tokenizer(config: Mapping[str, Any], model: str, gpu_arch: Optional[str]) -> Optional[str]:
    """The training config's tokenizer for the model (the same on both sides: the NVIDIA side's entry)."""
    models = ((config.get("model_params") or {}).get("multi_node") or {}).get(model) or {}
    entry = models.get(gpu_arch or "") or next(iter(models.values()), {}) if isinstance(models, dict) else {}
    value = entry.get("tokenizer_model") if isinstance(entry, dict) else None
    return value if isinstance(value, str) and value and "<changeme>" not in value else None


def vendor_warnings(comparison: Comparison, side: str, plan: Mapping[str, Any]) -> List[str]:
    """A side whose plan names another GPU vendor than the file's (plans that know their hosts' vendor)."""
    found = plan.get("gpu_vendor")
    wanted = comparison.sides[side].vendor
    if found and found != wanted:
        return ["%s: the plan's GPU vendor is %s (%s), not %s: the comparison runs, and says so" % (
            comparison.sides[side].label, found, plan.get("gpu_vendor_source", "planned"), wanted)]
    return []


def rendered_mismatches(comparison: Comparison, plans: Mapping[str, Mapping[str, Any]]) -> List[Mismatch]:
    rendered, worlds = {}, {}
    for side in SIDES:
        plan = plans[side]
        first = sorted(plan["nodes"])[0]
        node = node_view(plan, first)
        rendered[side] = _compare.launch_arguments(node, comparison.sides[side].stack)
        worlds[side] = int(node["nnodes"]) * int(node["gpus"])
    return _compare.check_launch(comparison, rendered, worlds)


def refusal(mismatches: Sequence[Mismatch]) -> str:
    return "comparison refused before the run: the two launches differ on %d apple-to-apple value(s): %s" % (
        len(mismatches), "; ".join(m.describe() for m in mismatches))


# -- what each side ran -------------------------------------------------------------------------------------

def side_record(comparison: Comparison, side: str, run_dir: str) -> Dict[str, Any]:
    """A side's run read back from its run directory: the plan, each node's log (argument dump and steps),
    results.json's verdict."""
    stack = comparison.sides[side].stack
    plan = read_json(os.path.join(run_dir, "plan.json"))
    results = read_json(os.path.join(run_dir, "results.json"))
    hosts = sorted((plan or {}).get("nodes") or [])
    rendered, world, image = None, None, None
    if plan and hosts:
        node = node_view(plan, hosts[0])
        rendered = _compare.launch_arguments(node, stack)
        world = int(node["nnodes"]) * int(node["gpus"])
        image = (node.get("container") or {}).get("image")
    seq = (rendered or {}).get("seq_length")
    dump: Optional[Dict[str, str]] = None
    dump_host = None
    steps: List[Dict[str, Any]] = []
    steps_host = None
    simulated = False
    for host in hosts:
        text = read_text(os.path.join(run_dir, "logs", host, "training.log"))
        if text is None:
            continue
        simulated = simulated or "[clusterval simulator]" in text
        if dump is None:
            dump = _compare.parse_dump(text)
            dump_host = host if dump is not None else None
        # tokens per GPU from the batch when the lines do not print it (Megatron-LM's), as training_log does
        parsed = _logs.parse_text(text, log_format(stack), seq_length=seq if isinstance(seq, int) else None,
                                  world_size=world)
        if len(parsed.steps) > len(steps):
            steps, steps_host = [dict(s) for s in parsed.steps], host
    return {"side": side, "label": comparison.sides[side].label, "vendor": comparison.sides[side].vendor,
            "gpu_vendor": (plan or {}).get("gpu_vendor"),
            "stack": stack, "run_dir": run_dir, "run_id": (plan or {}).get("run_id"), "hosts": hosts,
            "world_size": world, "verdict": (results or {}).get("verdict"),
            "headline": (results or {}).get("headline"), "dump": dump, "dump_host": dump_host,
            "steps": steps, "steps_host": steps_host, "rendered": rendered, "simulated": simulated, "image": image}


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
        return value if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def steady(steps: Sequence[Mapping[str, Any]], key: str, warmup: int) -> Optional[float]:
    values = [float(s[key]) for s in steps if s.get("step", 0) > warmup and isinstance(s.get(key), (int, float))
              and math.isfinite(float(s[key]))]
    return statistics.mean(values) if values else None


def comparison_document(comparison: Comparison, records: Mapping[str, Mapping[str, Any]], warmup: int = 2,
                        data_path: Optional[str] = None) -> Dict[str, Any]:
    """comparison.json: parity (rendered launch and argument dumps), figures side by side, loss agreement."""
    dumps = {side: records[side].get("dump") for side in SIDES}
    rows, mismatches = _compare.row_report(comparison, dumps, data_path)
    mismatches += _compare.common_mismatches(comparison, dumps)
    launch_mismatches: List[Mismatch] = []
    if all(records[side].get("rendered") is not None for side in SIDES):
        launch_mismatches = _compare.check_launch(
            comparison, {side: records[side]["rendered"] for side in SIDES},
            {side: records[side].get("world_size") for side in SIDES})
    figures = []
    for key, label, unit, higher in FIGURES:
        values = {side: steady(records[side].get("steps") or [], key, warmup) for side in SIDES}
        if all(v is None for v in values.values()):
            continue
        ratio = values["amd"] / values["nvidia"] if values["amd"] and values["nvidia"] else None
        figures.append({"metric": key, "label": label, "unit": unit, "higher_is_better": higher,
                        "nvidia": rounded(values["nvidia"]), "amd": rounded(values["amd"]),
                        "amd_over_nvidia": rounded(ratio)})
    curves = {side: [(int(s["step"]), float(s["loss"])) for s in records[side].get("steps") or []
                     if isinstance(s.get("loss"), (int, float))] for side in SIDES}
    agreement = _compare.loss_agreement(curves, comparison.loss_relative, comparison.loss_skip_steps)
    missing_dumps = [side for side in SIDES if dumps[side] is None]
    problems = [m.describe() for m in launch_mismatches + mismatches]
    problems += ["%s: no argument dump in any node's log" % records[side]["label"] for side in missing_dumps]
    if not agreement["agrees"]:
        problems.append(agreement["text"])
    problems += ["%s: the run's verdict is %s" % (records[side]["label"], records[side].get("verdict") or "missing")
                 for side in SIDES if records[side].get("verdict") != "PASS"]
    return {
        "schema_version": 1,
        "comparison": comparison.name,
        "title": comparison.title,
        "model": comparison.model,
        "verdict": "FAIL" if problems else "PASS",
        "problems": problems,
        "simulated": any(records[side].get("simulated") for side in SIDES),
        "sides": {side: {key: records[side].get(key) for key in SIDE_KEYS} for side in SIDES},
        "warmup_steps": warmup,
        "parity": {"rendered_launch": [m._asdict() for m in launch_mismatches],
                   "argument_dump": [m._asdict() for m in mismatches], "missing_dumps": missing_dumps},
        "rows": rows,
        "figures": figures,
        "loss": {"curves": {side: [[step, loss if math.isfinite(loss) else str(loss)] for step, loss in curves[side]]
                            for side in SIDES}, "agreement": agreement},
    }


SIDE_KEYS = ("label", "vendor", "gpu_vendor", "stack", "run_id", "run_dir", "hosts", "world_size", "verdict", "headline",
             "dump_host", "steps_host", "image")


def rounded(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


def comparison_html(document: Mapping[str, Any]) -> str:
    """comparison.html (template plugins/plugin_utils/templates/comparison.html.j2)."""
    curves = []
    for index, side in enumerate(SIDES):
        points = [(float(s), float(l)) for s, l in document["loss"]["curves"][side]
                  if isinstance(l, (int, float)) and math.isfinite(l)]
        # the first side drawn wider: two agreeing curves stay both visible
        curves.append(Curve(document["sides"][side]["label"], points, PALETTE[index], 5.0 if index == 0 else 2.0))
    chart = svg_chart("loss (overlaid)", curves, None, [], False)
    template = environment().get_template("comparison.html.j2")
    return template.render(doc=document, chart=chart, colours=dict(zip(SIDES, PALETTE)))
