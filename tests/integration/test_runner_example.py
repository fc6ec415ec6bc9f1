"""examples/runner_example.py drives a playbook through ansible-runner and reads the metrics back."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(REPO, "tests", "integration", "targets", "report", "report.yml")
LOGS = os.path.join(REPO, "tests", "fixtures", "logs")

pytest.importorskip("ansible_runner")


def load_example():
    spec = importlib.util.spec_from_file_location("runner_example", os.path.join(REPO, "examples", "runner_example.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return str(path)


def run(example, inventory, tmp_path, node_logs, capsys):
    code = example.main(["--playbook", PLAYBOOK, "-i", inventory, "-e", "fixture_dir=%s" % LOGS,
                         "-e", "run_dir=%s" % (tmp_path / "run"), "-e", json.dumps({"node_logs": node_logs})])
    return code, json.loads(capsys.readouterr().out)


def test_metrics_of_a_passing_run_reach_python(inventory, tmp_path, capsys):
    code, output = run(load_example(), inventory, tmp_path,
                       {"node1": "maxtext_node1.log", "node2": "maxtext_node2.log"}, capsys)
    metrics = output["clusterval_training"]
    assert code == 0 and output["status"] == "successful"
    assert metrics["verdict"] == "PASS" and metrics["run_dir"] == str(tmp_path / "run")
    assert 8500 < metrics["nodes"]["node1"]["steady_mean"]["tokens_per_sec_per_gpu"] < 8800
    assert metrics["nodes"]["node2"]["last_step"] == 29
    assert (tmp_path / "run" / "report.html").exists()


def test_metrics_of_a_failing_run_reach_python_too(inventory, tmp_path, capsys):
    code, output = run(load_example(), inventory, tmp_path,
                       {"node1": "maxtext_node1.log", "node2": "maxtext_crash_node2.log"}, capsys)
    metrics = output["clusterval_training"]
    assert code == 1 and output["status"] == "failed"
    assert metrics["verdict"] == "FAIL"
    assert "node2: stopped at step 12 of 29" in metrics["failures"]


def test_the_runner_directory_is_removed_after_the_run(inventory, tmp_path, capsys, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    code, output = run(load_example(), inventory, tmp_path,
                       {"node1": "maxtext_node1.log", "node2": "maxtext_crash_node2.log"}, capsys)
    assert code == 1 and output["clusterval_training"]["verdict"] == "FAIL"  # read before the directory went
    assert list(temp.iterdir()) == []


def test_extra_vars_parsing():
    example = load_example()
    assert example.extra_vars(["a=1", '{"b": {"c": 2}}']) == {"a": "1", "b": {"c": 2}}
    with pytest.raises(SystemExit, match="expected key=value"):
        example.extra_vars(["novalue"])


@pytest.mark.cluster
def test_the_usage_line_works_from_the_checkout_with_a_relative_inventory(simcluster, capsys, monkeypatch):
    """As the docstring says: run from the project (here the checkout), every path relative to it."""
    monkeypatch.chdir(REPO)
    inventory = os.path.relpath(simcluster.inventory, REPO)
    fast = {"training_hosts": ":".join(simcluster.nodes[:2]), "training_overrides_extra": {"config": {
        "container_config": {"env_dict": {"CLUSTERVAL_SIM_STEP_SECONDS": "0.2"}}}}, "fabric_enabled": False}
    code = load_example().main(["-i", inventory, "-e", "training_config=configs/jax/mi300x_distributed_llama3_1_70b.json",
                                "-e", json.dumps(fast)])
    captured = capsys.readouterr()
    output = json.loads(captured.out)
    assert code == 0 and output["clusterval_training"]["verdict"] == "PASS", captured.err[-3000:]
    assert output["clusterval_training"]["run_dir"].startswith(os.path.join(REPO, "runs"))
    shutil.rmtree(output["clusterval_training"]["run_dir"])


@pytest.mark.cluster
def test_a_job_that_publishes_nothing_says_why(simcluster, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code = load_example().main(["-i", os.path.relpath(simcluster.inventory, REPO), "-e", "training_hosts=nosuchnode",
                                "-e", "training_config=configs/jax/mi300x_distributed_llama3_1_70b.json"])
    captured = capsys.readouterr()
    assert code == 2 and json.loads(captured.out)["status"] == "failed"
    assert "published no clusterval_training" in captured.err and "no host matches nosuchnode" in captured.err
