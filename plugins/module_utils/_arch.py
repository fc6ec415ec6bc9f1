# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The run's GPU arch detected from the nodes' GPUs instead of given by hand (docs/config.md, "GPU arch").

When ``training_gpu_arch`` is not given and the config offers several arch entries for the chosen model (or
``training_gpu_arch=auto``), the nodes' GPU tools are asked before the plan (``plugins/modules/training_gpus.py``,
one light task per node) and their reports come here: every node must have GPUs, all of one arch, and the config
an entry for it. Each refusal is a ConfigError naming the config's path, what was expected and what each node
showed, before any node is changed. Pure Python, no Ansible.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils import _gpus
from ansible_collections.clusterval.training.plugins.module_utils._config import (
    arch_choices, deep_merge, is_documentation_key, validate_sections)
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show
from ansible_collections.clusterval.training.plugins.module_utils._hostlist import compact_hosts
from ansible_collections.clusterval.training.plugins.module_utils._versioned import is_versioned

AUTO = "auto"
TOOLS_TEXT = "amd-smi, rocm-smi or nvidia-smi"


def is_auto(gpu_arch: Optional[str]) -> bool:
    return isinstance(gpu_arch, str) and gpu_arch.strip().lower() == AUTO


def given(gpu_arch: Optional[str]) -> bool:
    """Whether the user named an arch (``auto`` and an empty value name none)."""
    return isinstance(gpu_arch, str) and bool(gpu_arch.strip()) and not is_auto(gpu_arch)


def needs_detection(gpu_arch: Optional[str], archs: Sequence[str]) -> bool:
    """The nodes are asked only when the arch is ``auto``, or not given and the config offers several."""
    return is_auto(gpu_arch) or (not given(gpu_arch) and len(archs) > 1)


def detection_reason(gpu_arch: Optional[str], path: str, archs: Sequence[str]) -> str:
    if is_auto(gpu_arch):
        return "training_gpu_arch=auto"
    if needs_detection(gpu_arch, archs):
        return "%s offers %s and training_gpu_arch is not given" % (path, ", ".join(archs))
    if given(gpu_arch):
        return "training_gpu_arch=%s" % gpu_arch
    return "%s offers %s only" % (path, ", ".join(archs) or "no arch")


class Detected(NamedTuple):
    key: str                 # the config's arch key the nodes' GPUs pick (as the config writes it)
    arch: str                # the canonical arch key detected (mi300x, mi325, h100)
    vendor: Optional[str]
    nodes: List[str]
    tools: List[str]         # the tools that told (basenames)
    models: List[str]
    text: str                # "detected on node[1-4] by amd-smi (8 x AMD Instinct MI300X (mi300x, gfx942))"

    def as_dict(self) -> Dict[str, Any]:
        return {"key": self.key, "arch": self.arch, "vendor": self.vendor, "nodes": self.nodes,
                "tools": self.tools, "models": self.models, "text": self.text}


def _tool(report: Mapping[str, Any]) -> str:
    return str(report.get("tool") or "").rsplit("/", 1)[-1] or "?"


def _label(report: Mapping[str, Any]) -> Optional[str]:
    """The arch a report says, canonical; ``mi300x/mi300a/mi325`` when only the gfx target tells."""
    if report.get("arch"):
        return _gpus.arch_key(report["arch"])
    candidates = [_gpus.arch_key(a) for a in report.get("arch_candidates") or []]
    return "/".join(candidates) or None


def _grouped(by_host: Mapping[str, str]) -> str:
    groups: Dict[str, List[str]] = {}
    for host, label in by_host.items():
        groups.setdefault(label, []).append(host)
    return "; ".join("%s on %s" % (label, compact_hosts(hosts)) for label, hosts in sorted(groups.items()))


def _no_gpu(host: str, found: Any) -> str:
    if not isinstance(found, Mapping):
        return "%s: no report (%s)" % (host, show(found))
    if found.get("unreachable") or found.get("failed"):
        return "%s: %s (%s)" % (host, "unreachable" if found.get("unreachable") else "the GPU probe failed",
                                str(found.get("msg") or "no message").strip()[:300])
    tried = [str(t) for t in found.get("tried") or []]
    gpu = found.get("gpu")
    if isinstance(gpu, Mapping) and gpu.get("count") == 0:
        tried = ["%s lists no GPU" % (gpu.get("tool") or "the GPU tool")] + tried
    return "%s: %s" % (host, "; ".join(tried) or "no GPU tool (%s) on the node" % TOOLS_TEXT)


def pick_detected(path: str, archs: Sequence[str], found: Mapping[str, Any], reason: str = "",
                  entries: Optional[Mapping[str, Any]] = None) -> Detected:
    """The config's arch entry the nodes' GPUs pick. `found`: host -> the ``training_gpus`` module's result
    (``gpu``: the GPU tool's report or None, ``tried``: why each tool told nothing). `entries`: the config's
    entries by arch key (what lets another vendor's GPUs run them, _other_vendor_key)."""
    why = " (%s)" % reason if reason else ""
    if not found:
        raise ConfigError(path, "the nodes' GPUs, detected to pick one of %s%s" % (", ".join(archs), why),
                          "no node was asked")
    reports: Dict[str, Mapping[str, Any]] = {}
    missing: List[str] = []
    for host, result in found.items():
        gpu = result.get("gpu") if isinstance(result, Mapping) else None
        if isinstance(gpu, Mapping) and gpu.get("count") != 0:
            reports[host] = gpu
        else:
            missing.append(_no_gpu(host, result))
    if missing:
        raise ConfigError(path, "GPUs on every node, told by %s, to pick the config's arch entry (%s)%s; or set "
                          "training_gpu_arch" % (TOOLS_TEXT, ", ".join(archs), why),
                          "no GPU found on " + "; ".join(missing))
    labels: Dict[str, str] = {}
    for host, report in reports.items():
        label = _label(report)
        if label is None:
            raise ConfigError(path, "a GPU model or gfx target known to map to an arch key (%s)%s"
                              % (", ".join(archs), why),
                              "%s: %s: %s" % (host, _tool(report), _gpus.describe(report)))
        labels[host] = label
    if len(set(labels.values())) > 1:
        raise ConfigError(path, "one GPU arch on every node of the run (each arch's nodes as their own group, "
                          "-e training_hosts=<group>)", _grouped(labels))
    label = next(iter(labels.values()))
    hosts = list(reports)
    key, stand_in = _config_key(path, archs, label, hosts, why, entries or {})
    first = reports[hosts[0]]
    tools = sorted(set(_tool(r) for r in reports.values()))
    models = sorted(set(m for r in reports.values() for m in r.get("models") or [] if m))
    text = "detected on %s by %s (%s)%s" % (compact_hosts(hosts), ", ".join(tools), _gpus.describe(first),
                                            "; " + stand_in if stand_in else "")
    return Detected(key, label if stand_in else _gpus.arch_key(key), first.get("vendor"), hosts, tools, models,
                    text)


def _config_key(path: str, archs: Sequence[str], label: str, hosts: Sequence[str], why: str,
                entries: Mapping[str, Any]) -> Tuple[str, str]:
    """The config's key for a detected label (canonical comparison: MI325X, mi325x and mi325 are one arch); a
    gfx-only label (mi300x/mi300a/mi325) picks the one candidate the config has. Second: how the key stands in
    for GPUs of another vendor ("" when it is theirs)."""
    candidates = label.split("/")
    keys = [key for key in archs if _gpus.arch_key(key) in candidates]
    if len(keys) == 1:
        return keys[0], ""
    found = "%s detected on %s" % (label, compact_hosts(hosts))
    if not keys:
        return _other_vendor_key(path, archs, label, found, why, entries)
    raise ConfigError(path, "one entry for the nodes' GPUs (their gfx target fits %s; training_gpu_arch picks one)"
                      % ", ".join(keys), found)


def _other_vendor_key(path: str, archs: Sequence[str], label: str, found: str, why: str,
                      entries: Mapping[str, Any]) -> Tuple[str, str]:
    """GPUs of a vendor the config has no entry for (the seeds' AMD entries on NVIDIA nodes) run the config's
    entries when they agree on every parameter but their targets, which are other GPUs' and not judged. Else
    the refusal says what to set."""
    vendor = _gpus.vendor_of_arch(label)
    fix = _fix(path, archs, label)
    if not archs or vendor is None or any(_gpus.vendor_of_arch(key) in (vendor, None) for key in archs):
        raise ConfigError(path, "an entry for the nodes' GPU arch (the config has: %s)%s%s"
                          % (", ".join(archs) or "none", why, fix), found)
    differ = _differing_parameters([entries.get(key) for key in archs])
    if differ:
        expected = "an entry for the nodes' GPU arch, or entries of %s that agree (the config has: %s, which " \
            "differ in %s)" % (_gpus.vendor_of_arch(archs[0]), ", ".join(archs), ", ".join(differ))
        raise ConfigError(path, expected + why + fix, found)
    others = " and ".join(archs[1:])
    return archs[0], ("the config has no %s entry: %s's values run%s (its targets are %s GPUs', not judged)"
                      % (vendor, archs[0], ", which %s's equal" % others if others else "",
                         _gpus.vendor_of_arch(archs[0])))


def _fix(path: str, archs: Sequence[str], label: str) -> str:
    entry = archs[0] if archs else "<arch>"
    foreign = _gpus.vendor_of_arch(entry) not in (None, _gpus.vendor_of_arch(label))
    return ("; set training_gpu_arch to the entry to run (-e training_gpu_arch=%s: its values on the %s nodes%s) "
            "or add an entry %s (training_overrides)"
            % (entry, label, ", its result_dict targets not judged" if foreign else "", join_path(path, label)))


def _differing_parameters(entries: Sequence[Any]) -> List[str]:
    """The parameters (result_dict and documentation aside) on which the entries differ."""
    shown = [{key: value for key, value in entry.items() if key != "result_dict" and not is_documentation_key(key)}
             if isinstance(entry, Mapping) else {} for entry in entries]
    names = sorted(set(name for entry in shown for name in entry))
    return [name for name in names if any(entry.get(name) != shown[0].get(name) for entry in shown[1:])]


def choose(config: Mapping[str, Any], hosts: Sequence[str], model: Optional[str], gpu_arch: Optional[str],
           mode: Optional[str], found: Optional[Mapping[str, Any]]) -> Tuple[Optional[str], Optional[Detected]]:
    """The arch key to select (None: the config's only one, or select_model_params's error naming the choices)
    and, when the nodes were asked for it, what they said. `found`: host -> the training_gpus result, None when
    the nodes were not asked."""
    choices = arch_choices(config, model, mode, len(hosts))
    if not needs_detection(gpu_arch, choices.archs):
        return (gpu_arch if given(gpu_arch) else None), None
    reason = detection_reason(gpu_arch, choices.path, choices.archs)
    if found is None:
        if is_auto(gpu_arch):
            raise ConfigError("training_gpu_arch", "an arch key of %s (%s), or auto with the nodes' GPUs asked "
                              "before the plan (playbooks/tasks/plan.yml does)" % (choices.path,
                                                                                   ", ".join(choices.archs)),
                              "auto, and no node was asked")
        return None, None
    entries = config["model_params"][choices.mode][choices.model]
    detected = pick_detected(choices.path, choices.archs, {host: found.get(host) for host in hosts}, reason, entries)
    return detected.key, detected


def arch_source(gpu_arch: Optional[str], detected: Optional[Detected]) -> str:
    """How the plan's arch was chosen, for the plan's gpu_arch_source."""
    if detected is not None:
        return detected.text
    return "training_gpu_arch" if given(gpu_arch) else "the config's only arch entry"


def decision(raw_config: Any, overrides: Any, nhosts: int, model: Optional[str], gpu_arch: Optional[str],
             mode: Optional[str] = None) -> Dict[str, Any]:
    """Whether the plan needs the nodes' GPUs (what playbooks/tasks/plan.yml asks before it plans):
    {detect, archs, path, reason}. A config the plan would refuse is not refused here: without ``auto`` the
    nodes are not asked and the plan names the problem."""
    try:
        if is_versioned(raw_config):
            archs = [str(raw_config.get("gpu_arch") or "gpu")]
            path = "gpu_arch"
        else:
            validate_sections(raw_config)
            choices = arch_choices(deep_merge(raw_config, overrides), model, mode, nhosts)
            archs, path = choices.archs, choices.path
    except ConfigError as exc:
        return {"detect": is_auto(gpu_arch), "archs": [], "path": exc.path,
                "reason": "the config's arch entries are not known (%s); the plan says why" % exc.message}
    return {"detect": needs_detection(gpu_arch, archs), "archs": archs, "path": path,
            "reason": detection_reason(gpu_arch, path, archs)}
