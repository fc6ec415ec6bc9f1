"""scripts/setup.sh with stand-ins for apt and dpkg: which Debian packages it asks for, and when."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

TOOLS = ("bash", "cat", "cut", "dirname", "grep", "sha256sum")


def executable(path: Path, text: str) -> None:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(0o755)


@pytest.fixture()
def checkout(tmp_path):
    """A copy of setup.sh in a checkout whose venv is up to date, so that only the apt part runs."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    for name in ("requirements.txt", "requirements-test.txt"):
        (root / name).write_text("# %s\n" % name)
    (root / ".venv" / "bin").mkdir(parents=True)
    # the real-framework image's build (scripts/simcluster build-real) only says it was asked
    executable(root / "scripts" / "simcluster", 'echo "$*" >> "$(dirname "$0")/simcluster.log"\n')
    # so does the execution environment's (scripts/ee build, run by the venv's Python)
    executable(root / ".venv" / "bin" / "python", 'echo "$*" >> "$(dirname "$0")/../../scripts/python.log"\n')
    stamp = hashlib.sha256(b"# requirements.txt\n# requirements-test.txt\n").hexdigest()
    (root / ".venv" / ".requirements.sha").write_text(stamp + "\n")
    return root


def run_setup(checkout: Path, tmp_path: Path, missing=(), engine=None):
    """Runs setup.sh with a PATH of stand-ins: dpkg says `missing` are not installed, apt-get logs its calls.

    `engine`: None (no Docker engine), "works", or "broken" (dockerd and docker present, dockerd fails).
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in TOOLS:
        os.symlink(shutil.which(name), bin_dir / name)
    log = tmp_path / "apt.log"
    executable(bin_dir / "id", "echo 0\n")
    executable(bin_dir / "apt-get", 'echo "$*" >> %s\n' % log)
    executable(bin_dir / "dpkg-query", 'for pkg in %s; do [[ ${!#} == "$pkg" ]] && exit 1; done\n'
                                       'printf "install ok installed"\n' % " ".join(missing))
    if engine:
        executable(bin_dir / "docker", "echo Docker version 28.2.2\n")
        executable(bin_dir / "dockerd", "echo Docker version 28.2.2\n" if engine == "works" else "exit 127\n")
    done = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], capture_output=True, text=True,
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    installs = [call.split() for call in calls if " install " in " %s " % call]
    return done, [pkg for call in installs for pkg in call if not pkg.startswith("-") and pkg != "install"]


def test_without_an_engine_debians_docker_io_is_installed(checkout, tmp_path):
    done, installed = run_setup(checkout, tmp_path, missing=["docker.io"])
    assert done.returncode == 0, done.stderr
    assert installed == ["docker.io"]


def test_an_installed_docker_ce_is_kept(checkout, tmp_path):
    """Docker CE's packages are docker-ce and docker-ce-cli: docker.io is not installed, and not wanted."""
    done, installed = run_setup(checkout, tmp_path, missing=["docker.io"], engine="works")
    assert done.returncode == 0, done.stderr
    assert installed == []


def test_other_packages_are_still_installed_beside_docker_ce(checkout, tmp_path):
    done, installed = run_setup(checkout, tmp_path, missing=["docker.io", "shellcheck"], engine="works")
    assert done.returncode == 0, done.stderr
    assert installed == ["shellcheck"]


def test_an_engine_that_does_not_run_stops_setup_before_apt(checkout, tmp_path):
    done, installed = run_setup(checkout, tmp_path, missing=["docker.io", "shellcheck"], engine="broken")
    assert done.returncode == 1 and installed == []
    assert "does not run" in done.stderr and "leaves an installed engine alone" in done.stderr


@pytest.mark.parametrize("log, call, skip", [
    ("simcluster.log", "build-real", "CLUSTERVAL_SKIP_REAL_IMAGE"),  # the real-framework image
    ("python.log", "scripts/ee build", "CLUSTERVAL_SKIP_EE_IMAGE"),  # the execution environment
], ids=["real-framework-image", "execution-environment"])
def test_setup_builds_the_cached_images_unless_told_not_to(checkout, tmp_path, log, call, skip):
    done, dummy = run_setup(checkout, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (checkout / "scripts" / log).read_text().splitlines() == [call]
    (checkout / "scripts" / log).unlink()
    skipped = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], capture_output=True, text=True,
                             env={"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path), skip: "1"}, check=False)
    assert skipped.returncode == 0, skipped.stderr
    assert not (checkout / "scripts" / log).exists()
