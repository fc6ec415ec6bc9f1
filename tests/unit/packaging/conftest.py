"""The collection as users get it: the tarball `ansible-galaxy collection build` makes of the checkout."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A tool of the venv running the tests (its bin is not always on PATH)."""
    path = BIN / name
    return str(path) if path.exists() else name


def galaxy_meta() -> dict:
    return yaml.safe_load((REPO / "galaxy.yml").read_text())


@pytest.fixture(scope="session")
def tarball(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build")
    subprocess.run([tool("ansible-galaxy"), "collection", "build", "--output-path", str(out), str(REPO)],
                   check=True, capture_output=True, text=True)
    meta = galaxy_meta()
    path = out / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))
    assert path.is_file()
    return path


@pytest.fixture(scope="session")
def community_docker() -> Path:
    """community.docker as the venv's ansible package carries it (Galaxy cannot be reached here)."""
    import ansible_collections.community.docker as package  # pylint: disable=import-outside-toplevel

    return Path(next(iter(package.__path__)))


def galaxy_env(collections_path: Path) -> dict:
    """ansible-galaxy's environment with `collections_path` as the only collections path (not the checkout's)."""
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CONFIG"}
    return dict(env, ANSIBLE_COLLECTIONS_PATH=str(collections_path),
                PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))


def with_community_docker(collections_path: Path, community_docker: Path) -> Path:
    """A collections path holding community.docker, as an earlier install from Galaxy leaves it."""
    target = collections_path / "ansible_collections" / "community" / "docker"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(community_docker, target, symlinks=True)
    return collections_path
