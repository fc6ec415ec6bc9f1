"""Runs the real ansible-playbook playbooks/plan.yml (and the ad-hoc module) against several local hosts."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view
from controller import ansible_playbook

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
BIN = os.path.dirname(sys.executable)
CONFIG = "configs/megatron/mi3xx_megatron_llama_distributed.json"
# The seed's global batch 128 fits 2 nodes; on 3 (24 GPUs, micro batch 2) Megatron-LM needs a multiple of 48.
OVERRIDES = {"training_overrides": {"config": {
    "nic_type": "thor2", "nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_socket_ifname": "ens1",
    "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"},
    "model_params": {"multi_node": {"llama3_1_8b": {"mi300x": {"batch_size": "96"}}}}}}
INVENTORY = """all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  children:
    training_nodes:
      hosts:
        n1: {ansible_host: 10.9.0.1}
        n2: {ansible_host: 10.9.0.2}
        n3: {ansible_host: 10.9.0.3}
"""


@pytest.fixture(scope="module")
def ansible_env(tmp_path_factory):
    """The repository's ansible.cfg, callbacks left out so that only the planner is exercised."""
    tmp = tmp_path_factory.mktemp("plan")
    with open(os.path.join(REPO, "ansible.cfg"), encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("callbacks_enabled")]
    cfg = tmp / "ansible.cfg"
    cfg.write_text("".join(lines).replace("collections_path = .collections",
                                          "collections_path = %s/.collections" % REPO))
    (tmp / "hosts.yml").write_text(INVENTORY)
    # Facts are not injected as variables (a future ansible-core's default): nothing may rely on it.
    env = dict(os.environ, ANSIBLE_CONFIG=str(cfg), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_LOCAL_TEMP=str(tmp / "ltmp"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_INJECT_FACT_VARS="False")
    return env, str(tmp / "hosts.yml")


def run_plan(ansible_env, *extra, playbook="playbooks/plan.yml", cwd=REPO, config=CONFIG):
    env, inventory = ansible_env
    argv = [ansible_playbook(), "-i", inventory, os.path.join(REPO, playbook),
            "-e", "training_config=" + config, "-e", "training_model=llama3_1_8b",
            "-e", "training_gpu_arch=mi300x", *extra]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def task_results(output, name):
    report = json.loads(output)
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                return task["hosts"]
    raise AssertionError("no task %s" % name)


@pytest.mark.parametrize("check", [False, True])
def test_plan_playbook_prints_every_node(ansible_env, check):
    extra = ["-e", "training_iterations=10", "-e", json.dumps(OVERRIDES)] + (["--check"] if check else [])
    proc = run_plan(ansible_env, *extra)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = task_results(proc.stdout, "Show this node's part")
    assert sorted(nodes) == ["n1", "n2", "n3"]
    for rank, name in enumerate(["n1", "n2", "n3"]):
        msg = nodes[name]["msg"]
        assert msg["node_rank"] == str(rank) or msg["node_rank"] == rank
        assert msg["env"]["NODE_RANK"] == str(rank)
        assert msg["env"]["NNODES"] == "3"
        assert msg["env"]["MASTER_ADDR"] == "10.9.0.1"
        assert msg["env"]["TOTAL_ITERS"] == "10"


def test_plan_yml_plans_exactly_what_train_yml_runs(ansible_env):
    extra = ["-e", "training_iterations=10", "-e", "training_run_id=r-same", "-e", "training_framework=megatron",
             "-e", json.dumps(dict(OVERRIDES, training_overrides_extra={"config": {"master_port": "23456"}}))]
    planned = run_plan(ansible_env, *extra)
    trained = run_plan(ansible_env, *extra, "--check", playbook="playbooks/train.yml")
    plan = task_results(planned.stdout, "Plan the run")["n1"]["plan"]
    train_plan = task_results(trained.stdout, "Plan the run")["n1"]["plan"]
    assert plan == train_plan
    assert sorted(plan["nodes"]) == ["n1", "n2", "n3"] and plan["jobs"][0]["coordinator_port"] == 23456


def test_plan_playbook_refuses_changeme_without_traceback(ansible_env):
    proc = run_plan(ansible_env)
    assert proc.returncode != 0
    result = task_results(proc.stdout, "Plan the run")["n1"]
    assert result["failed"] is True
    paths = [problem["path"] for problem in result["problems"]]
    assert paths == ["config.training_iterations", "config.nic_type", "config.nccl_ib_hca_list",
                     "config.nccl_socket_ifname", "config.gloo_socket_ifname", "config.nccl_ib_gid_index"]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_ad_hoc_module_call_with_names_outside_the_inventory(ansible_env):
    env, dummy = ansible_env
    args = {"config": "configs/jax/mi300x_distributed_llama3_1_70b.json", "hosts": ["h1", "h2"],
            "overrides": {"config": {"nccl_ib_hca": "mlx5_0", "nccl_socket_ifname": "eth0",
                                     "gloo_socket_ifname": "eth0", "nccl_ib_gid_index": "3"}}}
    argv = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
            "-m", "clusterval.training.training_plan", "-a", json.dumps(args)]
    env = dict(env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["plan"]
    assert plan["jobs"][0]["coordinator_address"] == "h1"
    assert plan["form"] == "compact"
    assert node_view(plan, "h2")["container"]["env"]["NCCL_IB_HCA"] == "mlx5_0"


NODE_VIEW_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Plan
      clusterval.training.training_plan:
        config: %(config)s
        model: llama3_1_8b
        gpu_arch: mi300x
        iterations: 10
        run_id: node-view
        compact: "{{ compact_form | bool }}"
        overrides: "{{ training_overrides }}"
      run_once: true
      register: planned

    - name: Node view
      ansible.builtin.debug:
        msg:
          form: "{{ ansible_facts.training_plan.form }}"
          node: "{{ ansible_facts.training_plan | clusterval.training.node_view(inventory_hostname) }}"
          own_part: "{{ planned.plan.nodes[inventory_hostname] }}"
"""


def test_node_view_filter_in_a_playbook_gives_the_same_node_from_both_forms(ansible_env, tmp_path):
    env, inventory = ansible_env
    playbook = tmp_path / "node_view.yml"
    playbook.write_text(NODE_VIEW_PLAYBOOK % {"config": os.path.join(REPO, CONFIG)})
    views = {}
    for compact in ("false", "true"):
        argv = [ansible_playbook(), "-i", inventory, str(playbook),
                "-e", "compact_form=" + compact, "-e", json.dumps(OVERRIDES)]
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        views[compact] = {host: result["msg"] for host, result in task_results(proc.stdout, "Node view").items()}
    for rank, host in enumerate(("n1", "n2", "n3")):
        full, compact = views["false"][host], views["true"][host]
        assert (full["form"], compact["form"]) == ("full", "compact")
        assert full["node"] == full["own_part"] == compact["node"]
        assert compact["own_part"]["container"] == {"env": {"NODE_RANK": str(rank)}}
    assert views["true"]["n3"]["node"]["prints_steps"] is True
    assert views["true"]["n3"]["node"]["container"]["env"]["MASTER_ADDR"] == "10.9.0.1"


def test_a_relative_config_not_under_the_working_directory_is_the_collections_and_the_plan_says_so(
        ansible_env, tmp_path):
    proc = run_plan(ansible_env, "-e", json.dumps(OVERRIDES), "-e", "training_iterations=10", cwd=str(tmp_path),
                    config="megatron/mi3xx_megatron_llama_distributed.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shown = task_results(proc.stdout, "Show the run")["n1"]["msg"]["config"]
    assert shown.endswith("/configs/megatron/mi3xx_megatron_llama_distributed.json (found in the collection's "
                          "configs/ (%s/.collections/ansible_collections/clusterval/training/configs))" % REPO), shown
    planned = task_results(proc.stdout, "Plan the run")["n1"]["msg"]
    assert "training config " in planned and "found in the collection's configs/" in planned


@pytest.mark.parametrize("variable", ["training_overrides", "training_overrides_extra"])
def test_overrides_given_as_a_list_fail_with_our_message_before_any_node(ansible_env, variable):
    proc = run_plan(ansible_env, "-e", json.dumps({variable: [{"config": {"nic_type": "thor2"}}]}))
    assert proc.returncode != 0
    failed = task_results(proc.stdout, "Plan the run")["n1"]
    assert failed["msg"].startswith("%s: expected an object in the config's shape" % variable), failed["msg"]
    assert "found a list" in failed["msg"] and "combine" not in proc.stdout


@pytest.mark.parametrize("playbook", ["playbooks/plan.yml", "playbooks/train.yml", "playbooks/preflight.yml",
                                      "playbooks/fabric.yml", "playbooks/isolate.yml", "playbooks/teardown.yml"])
def test_a_misspelt_host_is_refused_before_any_node_is_touched(ansible_env, playbook):
    # Ansible alone would warn about n9 and run on n1: a smaller run than asked, reported as a PASS.
    extra = ["-e", "training_hosts=n1:n9", "-e", "training_iterations=10", "-e", json.dumps(OVERRIDES)]
    proc = run_plan(ansible_env, *extra, playbook=playbook)
    assert proc.returncode != 0
    [(name, result)] = task_results(proc.stdout, "The training hosts are in the inventory").items()
    assert name == "localhost" and result["failed"] is True
    assert result["msg"].startswith("training_hosts: n9 matches no host or group of the inventory (did you mean")
    plays = [play["play"]["name"] for play in json.loads(proc.stdout)["plays"]]
    assert plays == ["Check the inventory"]


def test_a_misspelt_exclusion_is_refused_since_it_would_grow_the_run(ansible_env):
    proc = run_plan(ansible_env, "-e", "training_hosts=training_nodes:!n33", "-e", json.dumps(OVERRIDES))
    assert proc.returncode != 0
    result = task_results(proc.stdout, "The training hosts are in the inventory")["localhost"]
    assert "n33 matches no host or group of the inventory" in result["msg"]
