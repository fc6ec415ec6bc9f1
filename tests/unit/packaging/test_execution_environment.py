"""execution-environment.yml: the build context ansible-builder makes of it, and what goes into the image."""
from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, galaxy_env, galaxy_meta, tool, with_community_docker

EE_FILE = REPO / "execution-environment.yml"
COLLECTIONS_PATH = "/usr/share/ansible/collections"


def requirement(path: Path, name: str) -> str:
    """The version specifier of package `name` in a pip requirements file."""
    for line in path.read_text().splitlines():
        match = re.match(r"^%s([<>=!~].*)$" % re.escape(name), line.strip())
        if match:
            return match.group(1)
    raise AssertionError("%s names no %s" % (path, name))


def create(workdir: Path, tarball: Path) -> Path:
    """`ansible-builder create` on a copy of the definition with the tarball beside it; returns the context."""
    shutil.copy(EE_FILE, workdir / EE_FILE.name)
    shutil.copy(tarball, workdir / tarball.name)
    done = subprocess.run([tool("ansible-builder"), "create", "-f", str(workdir / EE_FILE.name),
                           "--context", str(workdir / "context"), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return workdir / "context"


def stage(containerfile: str, name: str) -> str:
    """The lines of one build stage (`FROM ... AS name`) of a Containerfile."""
    match = re.search(r"^FROM \S+ AS %s$(.*?)(?=^FROM |\Z)" % name, containerfile, re.M | re.S)
    assert match, "no %s stage" % name
    return match.group(1)


def install_step(containerfile: str) -> str:
    """The shell command of the step that installs this collection's tarball."""
    steps = [line[len("RUN "):] for line in stage(containerfile, "galaxy").splitlines()
             if line.startswith("RUN ") and "clusterval-training-" in line]
    assert len(steps) == 1, steps
    return steps[0]


@pytest.fixture(scope="module")
def context(tarball, tmp_path_factory) -> Path:
    return create(tmp_path_factory.mktemp("ee"), tarball)


def test_the_definition_is_ansible_builder_version_3():
    definition = yaml.safe_load(EE_FILE.read_text())
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"].count(":") == 1  # ansible-builder wants a tag


def test_the_context_installs_ansible_core_and_runner_as_the_project_pins_them(context):
    containerfile = (context / "Containerfile").read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="(.*)"$', containerfile, re.M).group(1).split()
    definition = yaml.safe_load(EE_FILE.read_text())["dependencies"]
    # The release of the image (the newest supported one): test_supported_releases.py.
    assert refs == [definition["ansible_core"]["package_pip"],
                    "ansible-runner" + requirement(REPO / "requirements.txt", "ansible-runner")]


def test_the_context_installs_community_docker_as_galaxy_yml_requires_it(context):
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert requirements == {"collections": [
        {"name": "community.docker", "version": galaxy_meta()["dependencies"]["community.docker"]}]}
    galaxy = stage((context / "Containerfile").read_text(), "galaxy")
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in galaxy


def test_the_context_carries_this_collection_and_installs_it_after_community_docker(context, tarball):
    carried = context / "_build" / "collections" / tarball.name
    assert carried.read_bytes() == tarball.read_bytes()
    containerfile = (context / "Containerfile").read_text()
    galaxy = stage(containerfile, "galaxy")
    assert galaxy.index("-r requirements.yml --collections-path") < galaxy.index(install_step(containerfile))
    # the builder stage reads every installed collection's meta/execution-environment.yml
    assert "introspect.py introspect" in stage(containerfile, "builder")


def run_install_step(containerfile: str, build_dir: Path, collections_path: Path):
    """The install step, run here: /build is `build_dir`, the image's collections path `collections_path`."""
    command = install_step(containerfile).replace("/build/", str(build_dir) + "/")
    command = command.replace(COLLECTIONS_PATH, str(collections_path))
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=galaxy_env(collections_path),
                          check=False)


def test_the_install_step_installs_the_tarball_without_galaxy(context, tmp_path, community_docker):
    collections = with_community_docker(tmp_path / "collections", community_docker)
    done = run_install_step((context / "Containerfile").read_text(), context / "_build", collections)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = collections / "ansible_collections" / "clusterval" / "training" / "MANIFEST.json"
    assert '"version": "%s"' % galaxy_meta()["version"] in manifest.read_text()


@pytest.mark.parametrize("count", [0, 2])
def test_the_install_step_refuses_anything_but_one_tarball(count, context, tarball, tmp_path):
    build = tmp_path / "build"
    (build / "collections").mkdir(parents=True)
    for index in range(count):
        shutil.copy(tarball, build / "collections" / ("clusterval-training-0.0.%d.tar.gz" % index))
    done = run_install_step((context / "Containerfile").read_text(), build, tmp_path / "collections")
    assert done.returncode == 1
    assert "expected one clusterval-training-*.tar.gz beside execution-environment.yml (make build)" in done.stderr


def test_the_installed_collection_declares_what_ansible_builder_adds(tarball, tmp_path, community_docker):
    """ansible-builder's introspection over this collection and community.docker, as the builder stage runs it."""
    collections = with_community_docker(tmp_path, community_docker)
    subprocess.run([tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(collections),
                    str(tarball)], check=True, capture_output=True, text=True, env=galaxy_env(collections))
    done = subprocess.run([tool("ansible-builder"), "introspect", "--sanitize", str(collections)],
                          capture_output=True, text=True, check=True)
    found = yaml.safe_load(done.stdout)
    ours = sorted(line.split("  #")[0] for line in found["system"] if "clusterval.training" in line)
    assert ours == ["openssh-client [platform:dpkg]", "openssh-clients [platform:rpm]"]
    assert not [line for line in found.get("python") or [] if "clusterval.training" in line]
    assert any(line.startswith("requests") for line in found["python"])  # from community.docker


def test_the_dependency_files_ship_in_the_tarball(tarball):
    declaration = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    for path in declaration["dependencies"].values():
        assert path in names


def test_the_collection_declaration_is_not_a_definition():
    """meta/execution-environment.yml lists only what ansible-builder reads from a collection."""
    declaration = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert set(declaration["dependencies"]) <= {"python", "system"}
    assert set(declaration) <= {"version", "dependencies"}
