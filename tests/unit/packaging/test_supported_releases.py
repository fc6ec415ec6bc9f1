"""The ansible-core releases the collection supports are said the same way everywhere: meta/runtime.yml's
requires_ansible, requirements.txt, the execution environment's definition, the roles' metadata, the sanity ignore
files and the documents. Every one of them is tested (tests/integration/test_core_releases.py)."""
from __future__ import annotations

import re

import pytest
import yaml
from conftest import REPO
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from test_execution_environment import requirement

RUNTIME = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
SPEC = SpecifierSet(RUNTIME["requires_ansible"])
# Those released when this was written: 2.16 to 2.22 cover the range's ends and one past each.
CANDIDATES = ["2.%d" % minor for minor in range(16, 24)]
SUPPORTED = [release for release in CANDIDATES if Version(release + ".0") in SPEC]
DOCS = [REPO / "README.md", REPO / "docs" / "awx.md", REPO / "docs" / "running.md"]


def releases(spec: SpecifierSet) -> list[str]:
    return [release for release in CANDIDATES if Version(release + ".0") in spec]


def sentence() -> str:
    return "ansible-core %s to %s" % (SUPPORTED[0], SUPPORTED[-1])


def test_the_range_is_at_least_2_19_to_2_21_and_closed():
    assert SUPPORTED[0] == "2.19" and "2.21" in SUPPORTED
    assert Version(SUPPORTED[-1] + ".999") in SPEC and Version("2.%d.0" % (int(SUPPORTED[-1][2:]) + 1)) not in SPEC


def test_requirements_txt_admits_the_same_releases():
    core = SpecifierSet(requirement(REPO / "requirements.txt", "ansible-core"))
    assert core == SPEC
    # The ansible package N carries ansible-core 2.(N+7) (12: 2.19, 14: 2.21).
    package = SpecifierSet(requirement(REPO / "requirements.txt", "ansible"))
    carried = ["2.%d" % (major + 7) for major in range(5, 20) if Version("%d.0.0" % major) in package]
    assert carried == SUPPORTED


def test_the_execution_environment_has_the_newest_release():
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert releases(SpecifierSet(definition["dependencies"]["ansible_core"]["package_pip"].removeprefix("ansible-core"))) == SUPPORTED[-1:]
    runner = definition["dependencies"]["ansible_runner"]["package_pip"].removeprefix("ansible-runner")
    assert SpecifierSet(runner) == SpecifierSet(requirement(REPO / "requirements.txt", "ansible-runner"))


@pytest.mark.parametrize("meta", sorted(REPO.glob("roles/*/meta/main.yml")), ids=lambda p: p.parts[-3])
def test_each_roles_minimum_is_the_lowest_release(meta):
    assert str(yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"]) == SUPPORTED[0]


def test_a_sanity_ignore_file_for_each_release_and_no_other():
    found = sorted(path.stem.removeprefix("ignore-") for path in (REPO / "tests" / "sanity").glob("ignore-*.txt"))
    assert found == SUPPORTED


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_documents_say_the_same_range(doc):
    text = doc.read_text()
    assert sentence() in text, "%s does not say %r" % (doc.relative_to(REPO), sentence())
    for other in re.findall(r"ansible-core (2\.\d+) to (2\.\d+)", text):
        assert other == (SUPPORTED[0], SUPPORTED[-1]), "%s says ansible-core %s to %s" % ((doc.name,) + other)
