"""Every flag of the XLA catalogue fed to the real jaxlib of the real-framework image (`pytest -m real`).

The catalogue (plugins/module_utils/_xla.py) says which measured jaxlib versions know each flag; this
asks the jaxlib pinned in simulator/real/requirements.txt, one JAX start per flag, and holds the
catalogue to its answer.
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._xla import (
    BOOL, BYTES, CATALOGUE, INT, MEASURED_JAXLIB, STRING, STRING_LIST, TRISTATE, flag_platform, knows)
from test_train_e2e import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.real]

SAMPLE = {BOOL: "true", TRISTATE: "true", INT: "1", BYTES: "1024", STRING: "/tmp/xla-dump", STRING_LIST: "a"}
# values the flag's own parser accepts (a list of command buffer kinds)
SAMPLE_OF = {"xla_gpu_enable_command_buffer": "FUSION"}


def pinned(package: str) -> str:
    for line in (REPO / "simulator" / "real" / "requirements.txt").read_text().splitlines():
        if line.lower().startswith(package + "=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError("requirements.txt pins no %s" % package)


def test_the_catalogue_knows_what_the_pinned_jaxlib_knows(simcluster):
    image = subprocess.run([str(REPO / "scripts" / "simcluster"), "real-image"], capture_output=True, text=True,
                           timeout=1800, check=False)
    assert image.returncode == 0, image.stderr[-3000:]
    version = pinned("jaxlib")
    assert version in MEASURED_JAXLIB, "the pinned jaxlib must be one the catalogue measured"
    flags = [[name, SAMPLE_OF.get(name, SAMPLE[kind])] for name, kind in CATALOGUE.items()
             if flag_platform(name) != "tpu"]
    probe_dir = simcluster.shared_dir / "xla-probe"
    probe_dir.mkdir(exist_ok=True)
    try:
        shutil.copy(REPO / "simulator" / "real" / "xla_probe.py", probe_dir / "xla_probe.py")
        (probe_dir / "flags.json").write_text(json.dumps(flags))
        node = simcluster.nodes[0]
        proc = simcluster.docker(node, "run", "--rm", "--network", "none", "-v", f"{probe_dir}:/probe:ro",
                                 image.stdout.strip(), "sh", "-c", "python3 /probe/xla_probe.py < /probe/flags.json",
                                 timeout=600)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    answer = json.loads(proc.stdout)
    assert answer["jaxlib"] == version
    wrong = {name: result for name, result in answer["flags"].items() if result["known"] != knows(name, version)}
    assert not wrong, "the catalogue is wrong about jaxlib %s: %s" % (version, wrong)
    refused = {name: result["line"] for name, result in answer["flags"].items()
               if result["known"] and not result["accepted"]}
    assert not refused, refused
    for name, result in answer["flags"].items():
        if not result["known"]:
            assert "Unknown flag in XLA_FLAGS: --%s=" % name in result["line"], result
