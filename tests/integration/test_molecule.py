"""The Molecule scenarios (extensions/molecule/) on the simulated cluster's first two nodes.

Each scenario runs `molecule test` with the default (delegated) driver against
the cluster the `simcluster` fixture brought up: Molecule neither creates nor
destroys it, the scenarios find it through CLUSTERVAL_MOLECULE_INVENTORY (see
extensions/molecule/README.md).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
MOLECULE = VENV_BIN / "molecule"
SCENARIOS = sorted(path.parent.name for path in (REPO / "extensions" / "molecule").glob("*/molecule.yml"))
# A whole `molecule test` of one scenario, with room for a slow machine.
SCENARIO_TIMEOUT_S = 300
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\]8;[^\x1b]*\x1b\\")


def molecule_env(inventory: Path, ephemeral: Path) -> dict:
    # Nothing of the caller's Ansible or Molecule settings: Molecule writes its own ansible.cfg
    # (extensions/molecule/config.yml) and parses the default callback's output for idempotence.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "MOLECULE_"))}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"),
        CLUSTERVAL_MOLECULE_INVENTORY=str(inventory),
        # One state per test: nothing left from a manual run or an earlier session (prepared, converged).
        MOLECULE_EPHEMERAL_DIRECTORY=str(ephemeral),
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
        NO_COLOR="1",
        PY_COLORS="0",
    )
    return env


def test_every_scenario_is_collected():
    assert {"preflight", "node_prep_container_teardown"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(simcluster, scenario, tmp_path):
    assert MOLECULE.exists(), f"{MOLECULE} is missing: pip install -r requirements-test.txt (make setup)"
    assert len(simcluster.nodes) >= 2, "the scenarios need two nodes"
    proc = subprocess.run([str(MOLECULE), "test", "--scenario-name", scenario], cwd=REPO,
                          env=molecule_env(simcluster.inventory, tmp_path / "molecule"),
                          capture_output=True, text=True, timeout=SCENARIO_TIMEOUT_S, check=False)
    output = ANSI.sub("", proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"molecule test -s {scenario} exited {proc.returncode}:\n{output[-8000:]}"
    # Every step of the sequence ran and none was skipped or missing a playbook.
    recap = re.findall(rf"^{re.escape(scenario)}\s*: actions=(\d+)\s+successful=(\d+)", output, re.MULTILINE)
    assert recap, output[-4000:]
    actions, successful = recap[-1]
    assert int(actions) > 0 and successful == actions, f"{successful} of {actions} steps successful:\n{output[-4000:]}"
