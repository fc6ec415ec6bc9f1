"""The verdict's next step when it names no node: the exact isolate command, with every inventory of the run."""
import shlex

from ansible_collections.clusterval.training.plugins.action.training_assert import next_step
from ansible_collections.clusterval.training.plugins.module_utils import _console

PLAN = {"config_path": "/opt/configs/jax/x.json", "nodes": {"node1": {}, "node2": {}, "node3": {}, "node4": {}},
        "model": "llama3.1-70b", "gpu_arch": "mi300x"}
HANG = {"verdict": "FAIL", "culprit": None, "checks": [],
        "run_cause": {"class": "hang", "text": "all 4 nodes stopped after step 11; no node stands out"}}
SLOW = {"verdict": "FAIL", "culprit": None, "run_cause": None, "checks": [
    {"node": n, "check": "threshold", "metric": "tokens_per_sec_per_gpu", "status": "fail"}
    for n in ("node1", "node2", "node3", "node4")]}


def command_of(advice):
    return shlex.split(advice.split("rounds): ", 1)[1])


def test_a_lock_step_hang_recommends_the_isolate_command_on_the_run_s_hosts():
    advice = next_step(HANG, PLAN, {"ansible_inventory_sources": ["/inv/hosts.yml", "/inv/slow node.yml"]})
    assert advice.startswith("hang: all 4 nodes stopped after step 11; no node stands out. To find the node, ")
    assert command_of(advice) == [
        "ansible-playbook", "-i", "/inv/hosts.yml", "-i", "/inv/slow node.yml", "clusterval.training.isolate",
        "-e", "training_config=/opt/configs/jax/x.json", "-e", "training_hosts=node1:node2:node3:node4",
        "-e", "training_gpu_arch=mi300x", "-e", "training_model=llama3.1-70b"]


def test_a_cluster_slow_as_a_whole_recommends_it_too_and_the_console_keeps_the_command_whole():
    advice = next_step(SLOW, PLAN, {"inventory_file": "/inv/hosts.yml"})
    assert "every node is below the tokens_per_sec_per_gpu threshold: the cluster is slow as a whole" in advice
    assert "clusterval.training.isolate" in command_of(advice)
    lines = _console.advice_lines({"advice": advice}, 80)
    assert lines[0].startswith("next step: To find the node, re-run the same config for a few steps on halves")
    assert lines[-1] == "  " + advice.split("rounds): ", 1)[1]


def test_a_named_culprit_needs_no_isolation():
    assert next_step(dict(HANG, culprit={"host": "node2"}), PLAN, {}) is None
    assert next_step(dict(SLOW, checks=SLOW["checks"][:1]), PLAN, {}) is None


def test_a_deadline_is_the_runs_cause_with_no_hunt_for_a_node():
    deadline = {"verdict": "FAIL", "culprit": None, "checks": [],
                "run_cause": {"class": "deadline", "text": "300 s passed at step 957 of 999 on every node"}}
    assert next_step(deadline, PLAN, {"inventory_file": "/inv/hosts.yml"}) is None
