"""What is shipped to each node's supervisor, computed once for every node."""
from __future__ import annotations

import json
import os

from ansible_collections.clusterval.training.plugins.module_utils import _run_ship
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
MODULE_UTILS = os.path.dirname(os.path.abspath(_run_ship.__file__))
NETWORK = {"config": {"nic_type": "thor2", "nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_socket_ifname": "ens1",
                      "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}
SETTINGS = {"lease_timeout": 60, "deadline": 3600, "gang_timeout": 120, "poll_interval": 5}


def jax_plan(nodes=3):
    config = load_config_file(os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json"))
    hosts = [Host("node%d" % i, "10.0.0.%d" % i) for i in range(1, nodes + 1)]
    return plan_run(config, hosts, PlanOptions(config_path="/c/x.json", overrides=NETWORK, run_id="r1"))


def test_every_nodes_shipment_at_once_is_each_nodes_own():
    plan = jax_plan()
    hosts = list(plan["nodes"])
    together = _run_ship.cluster_shipments(plan, {h: node_view(plan, h) for h in hosts}, SETTINGS, MODULE_UTILS)
    for host in hosts:
        assert together[host] == _run_ship.node_shipment(plan, node_view(plan, host), SETTINGS, MODULE_UTILS)
    configs = [json.loads(next(f["content"] for f in together[h]["container"]["files"]
                               if f["path"].endswith("/config.json")))
               for h in hosts]
    assert [c["host"] for c in configs] == hosts


def test_the_supervisors_sources_are_read_once_and_shared_by_every_node():
    plan = jax_plan()
    hosts = list(plan["nodes"])
    together = _run_ship.cluster_shipments(plan, {h: node_view(plan, h) for h in hosts}, SETTINGS, MODULE_UTILS)
    first, second = (together[h]["container"]["files"] for h in hosts[:2])
    node_side = [(a, b) for a, b in zip(first, second) if a["path"].endswith("/_run_node.py")]
    assert node_side and all(a["content"] is b["content"] for a, b in node_side)


def test_the_container_runs_the_supervisor_on_the_shared_status_directory():
    plan = jax_plan(2)
    shipment = _run_ship.node_shipment(plan, node_view(plan, "node1"), dict(SETTINGS, stop_grace=7.5), MODULE_UTILS)
    run_dir = node_view(plan, "node1")["run_dir"]
    job = shipment["container"]
    python, bootstrap, config = job["command"]
    assert python == "python3" and bootstrap.startswith(run_dir + "/") and bootstrap.endswith("/supervise.py")
    assert config == os.path.join(os.path.dirname(bootstrap), "config.json")
    assert {f["path"] for f in job["files"]} >= {bootstrap, config}
    assert set(job["directories"]) == {os.path.dirname(f["path"]) for f in job["files"]}
    assert job["extra_volumes"] == ["%s:%s" % (shipment["status_dir"], shipment["status_dir"])]
    # Docker's stop timeout is the supervisor's grace: the container outlives the job's own stop.
    assert job["stop_timeout"] == 7
    assert shipment["status_dir"] == _run_ship.status_dir(plan["data_cache_dir"], "r1")


def test_the_supervisor_removes_only_a_token_copy_the_controller_handed_over():
    handed = plan_run(load_config_file(os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json")),
                      [Host("node1", "10.0.0.1"), Host("node2", "10.0.0.2")],
                      PlanOptions(config_path="/c/x.json", overrides=NETWORK, run_id="r1", hf_token_handed=True))
    node = node_view(handed, "node1")
    config = _run_ship.supervisor_config(node, handed, dict(SETTINGS, gang_lease=True))
    assert config["token_copy"] == node["hf_token_file"] == _run_ship.handed_token_path(node["run_dir"])
    assert config["gang_lease"] is True
    own = _run_ship.supervisor_config(node_view(jax_plan(2), "node1"), jax_plan(2), SETTINGS)
    assert own["token_copy"] is None, "the node's own token file is never removed"
    assert own["gang_lease"] is False, "without the setting, the gang timeout bounds the wait"
