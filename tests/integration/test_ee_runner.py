"""Jobs run as AWX runs them: ansible-runner inside the execution environment (scripts/ee: Debian 13, Python
3.13, ansible-core 2.21, the collection installed from its tarball) against the simulated cluster, the private
data directory laid out as AWX lays it out (project, inventory, env/extravars) and mounted at /runner, the
host's network (the nodes' bridge). The results are read as AWX reads them: the job events of
artifacts/<ident>/job_events and the run-level stats of the playbook_on_stats event (``clusterval_training``).
The reports go to a directory that outlives the job (docs/awx.md), mounted as a persistent volume would be."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from test_lease import running_anywhere
from test_train_e2e import JAX_MULTI, REPO, assert_no_training_container, sim_env, training_underway

pytestmark = pytest.mark.cluster

EE = REPO / "scripts" / "ee"
# Where the survey's runs directory points by default: a persistent volume mounted into the EE (docs/awx.md).
VOLUME = next(question["default"] for question in json.loads((REPO / "extensions" / "awx" / "survey_train.json")
              .read_text())["spec"] if question["variable"] == "training_runs_dir")
JOB_TIMEOUT_S = 300
# The image's entrypoint, as ansible-builder sets it: dumb-init passes the cancel's signal to the runner.
ENTRYPOINT = ["/opt/builder/bin/entrypoint", "dumb-init"]


def ansible_cfg() -> str:
    """The repository's settings for the project, less its paths: the job uses the collection the EE holds."""
    lines = (REPO / "ansible.cfg").read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith(("collections_path", "roles_path", "inventory"))) + "\n"


class Job:
    """One AWX job: its private data directory, the volume its reports go to, how it ended."""

    def __init__(self, root: Path, simcluster, playbook: str, extravars: dict):
        root.mkdir(parents=True, exist_ok=True)
        self.pdd, self.volume, self.ident = root / "private_data_dir", root / "volume", "job"
        self.output = root / "output.txt"
        project = self.pdd / "project"
        (project / "configs").mkdir(parents=True)
        self.volume.mkdir()
        shutil.copytree(REPO / "configs", project / "configs", dirs_exist_ok=True)
        (project / "ansible.cfg").write_text(ansible_cfg())
        (project / playbook).write_text(
            f"- name: {playbook}\n  ansible.builtin.import_playbook: clusterval.training.{Path(playbook).stem}\n")
        inventory = self.pdd / "inventory"
        shutil.copytree(simcluster.inventory.parent / "group_vars", inventory / "group_vars")
        shutil.copy(simcluster.inventory, inventory / "hosts.yml")
        (self.pdd / "env").mkdir()
        (self.pdd / "env" / "extravars").write_text(json.dumps({"training_runs_dir": VOLUME, **extravars}))
        self.argv = [str(EE), "run", "--bind", f"{self.pdd}:/runner", "--bind", f"{self.volume}:{VOLUME}",
                     "--bind", str(simcluster.state_dir), "--", *ENTRYPOINT,
                     "ansible-runner", "run", "/runner", "-p", playbook, "--ident", self.ident]

    def start(self) -> subprocess.Popen:
        with self.output.open("w") as output:
            return subprocess.Popen(self.argv, stdout=output, stderr=subprocess.STDOUT)

    def run(self) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False)

    @property
    def artifacts(self) -> Path:
        return self.pdd / "artifacts" / self.ident

    def status(self) -> str:
        return (self.artifacts / "status").read_text().strip()

    def events(self) -> list[dict]:
        files = sorted((self.artifacts / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-")[0]))
        return [json.loads(path.read_text()) for path in files]

    def stats(self) -> dict | None:
        """The job's artifacts as AWX keeps them: clusterval_training of playbook_on_stats."""
        found = [e for e in self.events() if e["event"] == "playbook_on_stats"]
        return (found[-1]["event_data"].get("artifact_data") or {}).get("clusterval_training") if found else None

    def results(self) -> dict:
        found = list(self.volume.glob("*/results.json"))
        assert len(found) == 1, found
        return json.loads(found[0].read_text())


def job(tmp_path, simcluster, playbook: str, nodes: list[str], extra: dict | None = None, **variables) -> Job:
    overrides = {"training_config": JAX_MULTI, "training_hosts": ":".join(nodes), "fabric_enabled": False,
                 "training_overrides_extra": sim_env(**(extra or {}))}
    return Job(tmp_path, simcluster, playbook, {**overrides, **variables})


def failed_tasks(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["event_data"]["host"], e["event_data"]["task"]) for e in events if e["event"] == "runner_on_failed"
            and not e["event_data"].get("ignore_errors")]


def test_the_image_is_what_the_definition_describes(ee_image):
    """The recipe scripts/ee wrote into the image it built, against execution-environment.yml and the bindep files."""
    recipe = json.loads(subprocess.run([str(EE), "recipe"], capture_output=True, text=True, check=True).stdout)
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    deps = definition["dependencies"]
    assert recipe["base_image"] == definition["images"]["base_image"]["name"] == "docker.io/library/debian:trixie-slim"
    assert recipe["python_path"] == deps["python_interpreter"]["python_path"]
    assert recipe["python"].startswith("3.13.")  # Debian 13's python3
    assert set(deps["python_interpreter"]["package_system"].split()) <= set(recipe["system_packages"])
    for package in ("ansible_core", "ansible_runner"):
        name, spec = re.match(r"([a-z-]+)(.*)", deps[package]["package_pip"]).groups()
        assert Version(recipe[name]) in SpecifierSet(spec), (name, recipe[name], spec)
    for wanted in deps["galaxy"]["collections"]:
        assert Version(recipe["collections"][wanted["name"]]) in SpecifierSet(wanted["version"])
    # what ansible-builder's introspection found (this collection's SSH client) went in
    assert "openssh-client [platform:dpkg]  # from collection clusterval.training" in recipe["introspected"]["system"]
    assert "openssh-client" in recipe["system_packages"]
    assert recipe["entrypoint"] == ["/opt/builder/bin/entrypoint", "dumb-init"] and recipe["workdir"] == "/runner"
    assert sorted(recipe["core_venvs"]) == ["2.19", "2.20"]
    assert all(version.startswith(release + ".") for release, version in recipe["core_venvs"].items())


def test_a_plan_job_plans_every_node_and_changes_none(simcluster, ee_image, tmp_path, four_nodes):
    plan = job(tmp_path, simcluster, "plan.yml", four_nodes)
    proc = plan.run()
    assert proc.returncode == 0 and plan.status() == "successful", proc.stdout[-3000:]
    events = plan.events()
    [planned] = [e["event_data"]["res"]["plan"] for e in events if e["event"] == "runner_on_ok"
                 and e["event_data"]["task"] == "Plan the run"]
    assert list(planned["nodes"]) == four_nodes and planned["framework"] == "maxtext"
    shown = {e["event_data"]["host"] for e in events if e["event"] == "runner_on_ok"
             and e["event_data"]["task"] == "Show this node's part"}
    assert shown == set(four_nodes)
    assert not failed_tasks(events)
    assert_no_training_container(simcluster, four_nodes)


def test_a_passing_job_publishes_its_verdict_and_keeps_its_reports_on_the_volume(simcluster, ee_image, tmp_path):
    nodes = simcluster.nodes[:2]
    passing = job(tmp_path, simcluster, "train.yml", nodes)
    proc = passing.run()
    assert proc.returncode == 0 and passing.status() == "successful", proc.stdout[-4000:]
    stats = passing.stats()
    assert stats["verdict"] == "PASS" and stats["culprit"] is None and stats["stopped_in"] is None
    assert stats["headline"].startswith("PASS") and set(stats["nodes"]) == set(nodes)
    assert stats["run_dir"].startswith(VOLUME + "/")
    assert passing.results()["verdict"] == "PASS"
    assert not list((passing.pdd / "project").glob("runs"))
    assert_no_training_container(simcluster, nodes)


def test_a_crash_on_one_node_of_four_names_it_in_the_jobs_artifacts(simcluster, ee_image, tmp_path, four_nodes):
    crashed = four_nodes[2]
    crash = job(tmp_path, simcluster, "train.yml", four_nodes, {"CRASH_AT_STEP": "5", "CRASH_RANK": "2"},
                train_hang_timeout=8)
    proc = crash.run()
    assert proc.returncode != 0 and crash.status() == "failed", proc.stdout[-4000:]
    stats = crash.stats()
    assert stats["verdict"] == "FAIL" and stats["culprit"] == crashed, stats
    assert crashed in stats["headline"] and stats["stopped_in"] is None
    assert crash.results()["culprit"]["host"] == crashed
    assert failed_tasks(crash.events())
    assert_no_training_container(simcluster, four_nodes)


def test_a_job_stopped_in_preflight_publishes_the_stage_and_the_node(simcluster, ee_image, tmp_path):
    nodes = simcluster.nodes[:2]
    private = "/tmp/clusterval-private-cache"  # every simulated node has its own /tmp: not shared
    stopped = job(tmp_path, simcluster, "train.yml", nodes, preflight_shared_wait=3,
                  training_overrides_extra={"config": {"data_cache_dir": private}})
    proc = stopped.run()
    assert proc.returncode != 0 and stopped.status() == "failed", proc.stdout[-4000:]
    stats = stopped.stats()
    assert stats["verdict"] == "FAIL" and stats["stopped_in"] == "preflight", stats
    assert stats["culprit"] == nodes[1] and "shared_cache" in stats["headline"]
    assert stopped.results()["stop"]["stage"] == "preflight"
    assert_no_training_container(simcluster, nodes)


def test_a_canceled_job_leaves_nothing_running_on_any_node(simcluster, ee_image, tmp_path, four_nodes):
    """AWX's cancel: ansible-runner's cancel (SIGINT to the runner) kills the playbook's process group at once,
    teardown included; the nodes' lease (inventories/simulated: 20 s) ends every rank. The teardown job then
    removes what the killed job left (its stopped containers, its lock)."""
    canceled = job(tmp_path / "canceled", simcluster, "train.yml", four_nodes, training_iterations=100000,
                   train_hang_timeout=60)
    runner = canceled.start()
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while runner.poll() is None and time.monotonic() < deadline:
            if any(training_underway(run) for run in canceled.volume.iterdir()):
                break
            time.sleep(0.5)
        assert runner.poll() is None, canceled.output.read_text()[-3000:]
        assert running_anywhere(simcluster, four_nodes)
        runner.send_signal(signal.SIGINT)
        runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert canceled.status() == "canceled"
    deadline = time.monotonic() + 180  # the lease, the stop grace and a loaded machine's margin
    while time.monotonic() < deadline and running_anywhere(simcluster, four_nodes):
        time.sleep(2)
    assert running_anywhere(simcluster, four_nodes) == []
    teardown = Job(tmp_path / "teardown", simcluster, "teardown.yml", {"training_hosts": ":".join(four_nodes)})
    proc = teardown.run()
    assert proc.returncode == 0 and teardown.status() == "successful", proc.stdout[-3000:]
    assert_no_training_container(simcluster, four_nodes)
