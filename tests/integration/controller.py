"""Which controller runs the integration tests' playbooks: CLUSTERVAL_CONTROLLER=venv (the default: the venv's
ansible-playbook, ansible-core 2.19 on Python 3.11), `ee` (the execution environment of scripts/ee: ansible-core
2.21 on Python 3.13) or `ee:2.X` (the execution environment's venv of ansible-core 2.X)."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = os.environ.get("CLUSTERVAL_CONTROLLER", "venv")


def ansible_playbook(controller: str = CONTROLLER) -> str:
    if controller == "venv":
        return str(Path(sys.executable).parent / "ansible-playbook")
    if re.fullmatch(r"ee(:2\.\d+)?", controller):
        return str(REPO / "scripts" / "ee-ansible-playbook")
    raise ValueError(f"CLUSTERVAL_CONTROLLER={controller}: expected venv, ee or ee:2.X")


def controller_env(controller: str = CONTROLLER, **extra: str) -> dict:
    """The environment that runs ``ansible_playbook(controller)``."""
    return dict(os.environ, CLUSTERVAL_CONTROLLER=controller, **extra)
