"""The collection as users get it: the built tarball installed into a fresh collections path and run by its
FQCN from a project directory without any ansible.cfg of ours; and through ansible-runner with the HF token
that the AWX credential type hands over as a file."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import ansible_runner
import pytest
import yaml

from test_train_e2e import FAST, REPO, assert_no_training_container, training_containers

pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent
CONFIG = "configs/jax/mi300x_distributed_llama3_1_70b.json"
CREDENTIAL_TYPE = REPO / "extensions" / "awx" / "credential_type_hf_token.json"


def awx_rules():
    spec = importlib.util.spec_from_file_location("awx_rules", REPO / "tests" / "unit" / "packaging" / "awx_rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The collection installed from its tarball; community.docker comes from the ansible package."""
    root = tmp_path_factory.mktemp("installed")
    galaxy = str(BIN / "ansible-galaxy")
    env = user_env()
    # From root: the ansible.cfg of the repository (cwd) would find the checkout as installed already.
    subprocess.run([galaxy, "collection", "build", "--output-path", str(root), str(REPO)], cwd=root, env=env,
                   check=True, capture_output=True, text=True)
    tarball = next(root.glob("clusterval-training-*.tar.gz"))
    subprocess.run([galaxy, "collection", "install", "--no-deps", "-p", str(root / "collections"), str(tarball)],
                   cwd=root, env=env, check=True, capture_output=True, text=True)
    return root / "collections"


def user_env(**extra: str) -> dict:
    """A user's environment: nothing of this repository's Ansible settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", ANSIBLE_NOCOLOR="1", **extra)
    return env


def snapshot(tree: Path) -> dict:
    return {str(path.relative_to(tree)): path.stat().st_mtime_ns for path in tree.rglob("*")}


def seed_config(collections: Path) -> str:
    return str(collections / "ansible_collections" / "clusterval" / "training" / CONFIG)


def fast_overrides(nodes: list[str]) -> dict:
    return {"training_hosts": ":".join(nodes), "training_overrides_extra": {"config": {"container_config": {
        "env_dict": {"CLUSTERVAL_SIM_STEP_SECONDS": FAST}}}}}


def test_the_installed_collection_runs_by_fqcn_and_writes_its_reports_under_the_project(
        simcluster, installed, tmp_path):
    nodes = simcluster.nodes[:2]
    project = tmp_path / "project"
    project.mkdir()
    before = snapshot(installed)
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(simcluster.inventory), "clusterval.training.train",
         "-e", f"training_config={seed_config(installed)}", "-e", json.dumps(fast_overrides(nodes))],
        cwd=project, env=user_env(ANSIBLE_COLLECTIONS_PATH=str(installed)), capture_output=True, text=True,
        timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    runs = list((project / "runs").iterdir())
    assert len(runs) == 1, runs
    for report in ("results.json", "junit.xml", "report.html", "plan.json"):
        assert (runs[0] / report).is_file(), report
    assert json.loads((runs[0] / "results.json").read_text())["verdict"] == "PASS"
    # As users get it, without our ansible.cfg (Ansible's default output): each poll of the watch is a loop item
    # labelled with its progress line, and nothing reads like a failure; the verdict block as the results
    # role's message, and where the reports are.
    assert "(item=[##########] 11/11" in proc.stdout, proc.stdout[-4000:]
    assert "FAILED - RETRYING" not in proc.stdout
    verdict = proc.stdout.split("Results | The verdict", 1)[1]
    assert '"PASS' in verdict and '"passed on every node:"' in verdict
    assert f'"report.html: {runs[0] / "report.html"}"' in verdict
    assert snapshot(installed) == before, "something was written inside the installed collection"
    assert_no_training_container(simcluster, nodes)


def test_ansible_runner_with_the_awx_credential_hands_the_token_to_every_node_and_shows_it_nowhere(
        simcluster, installed, tmp_path):
    nodes = simcluster.nodes[:2]
    token = "hf_clusterval" + os.urandom(8).hex()
    private = tmp_path / "private"
    private.mkdir()
    injected = awx_rules().inject(json.loads(CREDENTIAL_TYPE.read_text()), {"hf_token": token}, str(private))
    # Without an execution environment /runner is the private data directory itself.
    in_ee, here = next(iter(injected.files.items()))
    credential_vars = yaml.safe_load(Path(injected.args[1][1:]).read_text())
    assert credential_vars == {"training_hf_token_controller_file": in_ee}
    credential_vars["training_hf_token_controller_file"] = here
    project = tmp_path / "project"
    project.mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(private), project_dir=str(project), playbook="clusterval.training.train",
        inventory=str(simcluster.inventory), quiet=True,
        extravars={"training_config": seed_config(installed), **fast_overrides(nodes), **credential_vars},
        envvars={"ANSIBLE_COLLECTIONS_PATH": str(installed), "PATH": user_env()["PATH"]})
    assert runner.status == "successful", runner.stdout.read()[-4000:]
    polls = [e["event_data"] for e in runner.events if e.get("event") == "runner_item_on_ok"
             and e["event_data"].get("task_action", "").endswith("training_watch")]
    assert polls and polls[-1]["res"]["done"] and "11/11" in polls[-1]["res"]["line"], "AWX sees each poll"
    stats = [e for e in runner.events if e.get("event") == "playbook_on_stats"][0]["event_data"]["artifact_data"]
    assert stats["clusterval_training"]["verdict"] == "PASS"
    run_dir = next((project / "runs").iterdir())
    logs = [(run_dir / "logs" / node / "training.log").read_text() for node in nodes]
    assert all("HF_TOKEN set" in log for log in logs), "the framework did not get the token"
    for path in [p for p in private.rglob("*") if p.is_file() and str(p) != here] + \
            [p for p in project.rglob("*") if p.is_file()]:
        assert token not in path.read_text(errors="replace"), path
    for node in nodes:
        copies = simcluster.ssh(node, "ls -a /tmp/clusterval-logs/clusterval/*/ | grep -c '^.hf_token$' || true").stdout
        assert copies.strip() == "0", f"{node} still holds the run's token copy"
        assert training_containers(simcluster, node) == []


def test_the_installed_runner_example_runs_the_fqcn_playbook_from_the_project_directory(
        simcluster, installed, tmp_path):
    nodes = simcluster.nodes[:2]
    example = installed / "ansible_collections" / "clusterval" / "training" / "examples" / "runner_example.py"
    project = tmp_path / "project"
    project.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir()
    before = snapshot(installed)
    proc = subprocess.run(
        [sys.executable, str(example), "-i", str(simcluster.inventory),
         "-e", f"training_config={seed_config(installed)}", "-e", json.dumps(fast_overrides(nodes))],
        cwd=project, env=user_env(ANSIBLE_COLLECTIONS_PATH=str(installed), TMPDIR=str(temp)),
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    output = json.loads(proc.stdout)
    assert output["status"] == "successful" and output["clusterval_training"]["verdict"] == "PASS"
    run_dir = Path(output["clusterval_training"]["run_dir"])
    assert run_dir.parent == project / "runs" and (run_dir / "results.json").is_file()
    assert snapshot(installed) == before, "something was written inside the installed collection"
    assert list(temp.iterdir()) == [], "the runner directory was left behind"
    assert_no_training_container(simcluster, nodes)
