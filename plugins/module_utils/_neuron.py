# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""AWS Trainium nodes as data: their devices, their NeuronCores and what ``neuron-ls`` says of them.

A leaf module (node-side code reads it). ``neuron-ls`` prints a table, one row per Neuron device, whose columns
changed across releases (``LOGICAL NC`` on trn2 since 2.21; ``instance-type:`` lines above it in later ones):
the parser reads the header's column names, never their positions. Sources: docs/config.md ("Trainium").
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional

TRAINIUM = "trainium"
TOOL = "neuron-ls"
# The containers of a Trainium node: every Neuron device, and the EFA devices (uverbs) for the fabric.
DEVICE_GLOBS = ("/dev/neuron*", "/dev/infiniband/uverbs*")
MAX_DEVICES = 16  # trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge
DEVICE_PATHS = tuple("/dev/neuron%d" % index for index in range(MAX_DEVICES))


class Arch(NamedTuple):
    devices: int            # Neuron devices of the largest instance (trn1.32xlarge, trn2.48xlarge)
    cores_per_device: int   # physical NeuronCores per device
    default_lnc: int        # physical cores per logical one (trainer.lnc); trn1 knows only 1

    def logical_cores(self, lnc: Optional[int] = None) -> int:
        return self.devices * self.cores_per_device // (lnc or self.default_lnc)


ARCHS: Dict[str, Arch] = {"trn1": Arch(16, 2, 1), "trn2": Arch(16, 8, 2)}
_ROW = re.compile(r"^\|(.*)\|\s*$")
_HEADER_LINE = re.compile(r"^\s*([a-z-]+):\s*(\S+)\s*$")


def arch_of_instance(instance_type: str) -> Optional[str]:
    """trn1.32xlarge, trn1n.32xlarge -> trn1; trn2.48xlarge, trn2n.48xlarge -> trn2."""
    match = re.match(r"^(trn[0-9])", instance_type or "")
    return match.group(1) if match and match.group(1) in ARCHS else None


def table_rows(output: str) -> List[List[str]]:
    return [[cell.strip() for cell in match.group(1).split("|")]
            for match in (_ROW.match(line) for line in output.splitlines()) if match]


def column_names(rows: List[List[str]]) -> List[str]:
    """The header is two rows (``NEURON`` over ``DEVICE``): each column's words joined."""
    header = rows[:2]
    return [" ".join(part for part in parts if part).upper() for parts in zip(*header)] if len(header) == 2 else []


def parse_neuron_ls(output: str) -> Dict[str, Any]:
    """Devices, cores and memory per device from neuron-ls's table; the instance type when it prints one."""
    rows = table_rows(output)
    names = column_names(rows)
    devices: List[Dict[str, Any]] = []
    for row in rows[2:]:
        cells = dict(zip(names, row))
        if not cells.get("NEURON DEVICE", "").isdigit():
            continue
        device = {"index": int(cells["NEURON DEVICE"]), "cores": to_int(cells.get("NEURON CORES")),
                  "memory": cells.get("NEURON MEMORY", "")}
        if cells.get("LOGICAL NC", "").isdigit():
            device["logical_cores"] = int(cells["LOGICAL NC"])
        devices.append(device)
    headers = dict(match.groups() for match in map(_HEADER_LINE.match, output.splitlines()) if match)
    instance = headers.get("instance-type")
    return {"tool": TOOL, "count": len(devices), "devices": devices, "instance_type": instance,
            "arch": arch_of_instance(instance) if instance else arch_of_devices(devices),
            "cores": sum(device["cores"] or 0 for device in devices),
            "logical_cores": sum(device.get("logical_cores", device["cores"] or 0) for device in devices)}


def arch_of_devices(devices: List[Dict[str, Any]]) -> Optional[str]:
    """Without an instance-type line: 2 NeuronCores per device is Trainium1, 8 is Trainium2."""
    cores = {device["cores"] for device in devices}
    for name, arch in ARCHS.items():
        if cores == {arch.cores_per_device}:
            return name
    return None


def to_int(text: Optional[str]) -> Optional[int]:
    return int(text) if text and text.isdigit() else None
