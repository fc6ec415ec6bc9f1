"""Every ansible-core release meta/runtime.yml admits plans, trains and judges a crash on one node of four of the
simulated cluster: the venv's release (Python 3.11) on the host, the others in the execution environment
(Python 3.13; scripts/ee), the image's own ansible-core or one of its venvs."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from controller import ansible_playbook, controller_env
from test_train_e2e import JAX_MULTI, REPO, assert_no_training_container, results, sim_env, train_argv

pytestmark = pytest.mark.cluster

ENV = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


def supported_releases() -> list[str]:
    spec = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    low, high = (int(re.search(pattern, spec).group(1)) for pattern in (r">=\s*2\.(\d+)", r"<\s*2\.(\d+)"))
    return [f"2.{minor}" for minor in range(low, high)]


def controller_of(release: str) -> str:
    """The venv when it has the release, else the execution environment's (its own, or one of its venvs)."""
    from ansible.release import __version__ as venv_core
    image_core = re.search(r">=\s*(2\.\d+)", yaml.safe_load((REPO / "execution-environment.yml").read_text())[
        "dependencies"]["ansible_core"]["package_pip"]).group(1)
    if venv_core.startswith(release + "."):
        return "venv"
    return "ee" if release == image_core else f"ee:{release}"


def run(controller: str, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([ansible_playbook(controller), *argv[1:]], cwd=REPO, env=controller_env(controller, **ENV),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("release", supported_releases())
def test_the_release_plans_trains_and_judges_a_crash(simcluster, four_nodes, ee_image, tmp_path, release):
    controller = controller_of(release)
    version = run(controller, ["ansible-playbook", "--version"])
    assert re.search(rf"\[core {re.escape(release)}\.\d+\]", version.stdout), version.stdout + version.stderr
    plan = run(controller, ["ansible-playbook", "-i", str(simcluster.inventory), str(REPO / "playbooks" / "plan.yml"),
                            "-e", f"training_config={JAX_MULTI}", "-e", "training_hosts=" + ":".join(four_nodes)])
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-2000:]
    assert all(f'"node_rank": {rank}' in plan.stdout for rank in range(4))
    crashed = four_nodes[2]
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, four_nodes, sim_env(CRASH_AT_STEP="5", CRASH_RANK="2"),
                      ["-e", json.dumps({"train_hang_timeout": 8})])
    train = run(controller, argv)
    assert train.returncode != 0, train.stdout[-3000:]
    document = results(tmp_path)
    assert document["verdict"] == "FAIL" and document["culprit"]["host"] == crashed, document["headline"]
    assert f"VERDICT: FAIL: {crashed} " in train.stdout
    assert_no_training_container(simcluster, four_nodes)
