"""galaxy.yml, collections/requirements.yml and the role entry points, as Galaxy and AWX read them."""
from __future__ import annotations

import re
import subprocess
import tarfile

import yaml
from conftest import REPO, galaxy_env, galaxy_meta, tool, with_community_docker

# galaxy-importer's rule for names, which tags follow, and its limit on their number
GALAXY_NAME = re.compile(r"^(?!.*__)[a-z]+[0-9a-z_]*$")
GALAXY_MAX_TAGS = 20


def test_tags_follow_galaxys_rules():
    tags = galaxy_meta()["tags"]
    assert 0 < len(tags) <= GALAXY_MAX_TAGS and len(set(tags)) == len(tags)
    assert [tag for tag in tags if not GALAXY_NAME.match(tag) or len(tag) > 64] == []


def test_the_tarball_holds_no_local_state(tarball):
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    top = {name.split("/", 1)[0] for name in names}
    assert not top & {".ansible", ".collections", ".venv", ".ci", "runs", "context", "collections"}
    assert not [name for name in names if "__pycache__" in name or name.endswith(".tar.gz")]
    assert "execution-environment.yml" in names and "extensions/awx/survey_train.json" in names


def test_community_docker_is_required_alike_everywhere():
    wanted = galaxy_meta()["dependencies"]["community.docker"]
    project = yaml.safe_load((REPO / "collections" / "requirements.yml").read_text())
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert project["collections"] == [{"name": "community.docker", "version": wanted}]
    assert ee["dependencies"]["galaxy"]["collections"] == [{"name": "community.docker", "version": wanted}]


def test_ansible_galaxy_takes_the_project_requirements(tmp_path, community_docker):
    """As AWX's project sync runs it; community.docker is already there, since Galaxy cannot be reached here."""
    collections = with_community_docker(tmp_path, community_docker)
    done = subprocess.run([tool("ansible-galaxy"), "collection", "install", "--offline", "-p", str(collections),
                           "-r", str(REPO / "collections" / "requirements.yml")],
                          capture_output=True, text=True, env=galaxy_env(collections), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Nothing to do. All requested collections are already installed." in done.stdout


def test_every_role_entry_point_is_described():
    for specs in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        for name, entry in yaml.safe_load(specs.read_text())["argument_specs"].items():
            where = "%s: %s" % (specs.relative_to(REPO), name)
            assert entry.get("short_description") and entry.get("description"), where
