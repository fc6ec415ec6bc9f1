"""The fabric gate where a real cluster has the tests: the container it runs in, a gate that cannot run (said once,
no node named), and ranks that did not meet across nodes (not measured, never judged)."""
import struct

from real_logs import repo_excerpts

from ansible_collections.clusterval.training.plugins.filter.fabric import fabric_container, fabric_not_run
from ansible_collections.clusterval.training.plugins.module_utils import _fabric, _fabric_container, _fabric_html
from ansible_collections.clusterval.training.plugins.module_utils._console import verdict_lines
from ansible_collections.clusterval.training.plugins.module_utils._report import junit_xml

REAL = repo_excerpts("rccl_tests_real.txt")
HOSTS = ["node1", "node2", "node3", "node4"]
IMAGE = "rocm/jax-training:maxtext-v25.9"
DEFAULTS = [{"name": "all_reduce_perf", "command": ["/opt/rccl-tests/build/all_reduce_perf", "-b", "8M", "-g", "{gpus}"]},
            {"name": "alltoall_perf", "command": ["/opt/rccl-tests/build/alltoall_perf", "-b", "8M", "-g", "{gpus}"]}]
PLAN = {"run_id": "r1", "nodes": {"node1": {
    "hf_token_file": "/home/a/.cache/hf_token", "launch": {"hf_token_path": "/run/clusterval/hf_token"},
    "container": {"name": "clusterval-r1", "image": "rocm/jax-training:maxtext-v25.9", "network_mode": "host",
                  "devices": ["/dev/kfd", "/dev/dri"], "labels": {"clusterval.run_id": "r1"},
                  "env": {"NCCL_IB_HCA": "bnxt_re0,bnxt_re1", "NCCL_IB_GID_INDEX": 3, "NCCL_SOCKET_IFNAME": "ens51np0"}}}}}


def test_the_gates_container_is_the_training_containers_with_the_plans_network_settings():
    spec = fabric_container(PLAN, "node1", {"capabilities": []})
    assert spec["image"] == IMAGE and spec["network_mode"] == "host" and spec["devices"] == ["/dev/kfd", "/dev/dri"]
    assert spec["mounts"] == []
    group = {"name": "all", "hosts": ["node1", "node2"], "addresses": ["10.0.0.1", "10.0.0.2"]}
    argv = _fabric.substitute(DEFAULTS[0]["command"], group, 8)
    fabric = _fabric_container.fabric_spec(spec, argv, _fabric.rank_env(group, "node1", 29650, 60))
    assert fabric["name"] == "clusterval-r1-fabric" and fabric["command"][-2:] == ["-g", "8"]
    assert fabric["env"]["NCCL_IB_HCA"] == "bnxt_re0,bnxt_re1" and fabric["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert fabric["env"]["NCCL_SOCKET_IFNAME"] == "ens51np0" and fabric["env"]["CLUSTERVAL_FABRIC_NRANKS"] == "2"
    # teardown finds it by the run's labels
    assert fabric["labels"]["clusterval.run_id"] == "r1"
    assert fabric_container(PLAN, "node1", {}, "rocm/rccl-tests:6.4")["image"] == "rocm/rccl-tests:6.4"


def test_dockers_log_frames_are_joined():
    frames = b"".join(struct.pack(">BxxxI", stream, len(data)) + data
                      for stream, data in ((1, b"# Rank 0\n"), (2, b"warn\n"), (1, b"8388608 ...\n")))
    assert _fabric_container.demux(frames) == "# Rank 0\nwarn\n8388608 ...\n"


def test_what_the_benchmarks_need_is_their_program_and_the_binary_a_launcher_is_given():
    assert _fabric.tool_paths(DEFAULTS) == ["/opt/rccl-tests/build/all_reduce_perf", "/opt/rccl-tests/build/alltoall_perf"]
    mpirun = [{"name": "all_reduce_perf", "command": ["mpirun", "-np", "{np}", "-H", "{hosts_slots}",
                                                      "/opt/rccl-tests/build/all_reduce_perf", "-g", "1"]}]
    assert _fabric.tool_paths(mpirun) == ["mpirun", "/opt/rccl-tests/build/all_reduce_perf"]


def test_a_tool_no_node_has_is_said_once_and_names_no_node():
    checks = {h: {"missing": ["/opt/rccl-tests/build/all_reduce_perf"], "where": IMAGE} for h in HOSTS}
    verdict = fabric_not_run(checks, HOSTS, ["all_reduce_perf", "alltoall_perf"])
    assert verdict["msg"] == "fabric gate not run: /opt/rccl-tests/build/all_reduce_perf is not in " + IMAGE
    assert verdict["lines"] == [verdict["msg"]] and verdict["not_run"] == verdict["msg"]
    assert verdict["failed"] is False and verdict["named"] == [] and verdict["pairs_needed"] is False
    assert not any(h in verdict["msg"] for h in HOSTS)


def test_some_nodes_without_the_image_are_counted_not_named():
    checks = {h: {"missing": [], "where": IMAGE} for h in HOSTS}
    checks["node3"] = {"error": "%s is not on the node" % IMAGE}
    reason = _fabric.not_run_reason(checks)
    assert reason == "fabric gate not run: %s is not on the node (on 1 of 4 nodes)" % IMAGE


def test_every_node_with_its_tools_lets_the_gate_run():
    checks = {h: {"missing": [], "where": IMAGE} for h in HOSTS}
    assert fabric_not_run(checks, HOSTS, ["all_reduce_perf"]) == {}


def test_the_reports_say_the_fabric_was_not_measured_and_why():
    reason = "fabric gate not run: /opt/rccl-tests/build/all_reduce_perf is not in " + IMAGE
    fabric = _fabric.not_run_verdict(HOSTS, ["all_reduce_perf"], reason)
    document = {"run_id": "r1", "verdict": "PASS", "headline": "PASS", "checks": [], "fabric": fabric}
    assert reason + " (the fabric was not measured)" in verdict_lines(document, width=400)
    assert '<skipped message="%s"' % reason in junit_xml(document, hostname="controller")
    assert _fabric_html.fabric_view(fabric)["status"].startswith("NOT RUN")


def group_result(round_name, hosts, output, rank=0):
    bench = _fabric.outcome(output, 0, False, 1.0, "all_reduce_perf")
    bench["unmet"] = _fabric.unmet(bench, {"hosts": hosts})
    return {"round": round_name, "group": {"name": round_name if round_name == "all" else hosts[0], "hosts": hosts},
            "rank": rank, "seconds": 1.0, "benchmarks": {"all_reduce_perf": bench}}


def test_ranks_that_ran_alone_on_each_node_are_not_measured_across_nodes_and_name_nobody():
    """Stock rccl-tests started on every node without MPI: each process lists only its own node's GPUs."""
    alone = REAL["RT-01"]
    assert _fabric.unmet(_fabric.outcome(alone, 0, False, 1.0, "all_reduce_perf"), {"hosts": ["node1"]}) == ""
    measured = [group_result("alone", [h], alone) for h in HOSTS] + [group_result("all", HOSTS, alone)]
    verdict = _fabric.judge(HOSTS, measured, ["all_reduce_perf"], {"across_min_busbw": {"all_reduce_perf": 100}})
    assert verdict["failed"] is False and verdict["named"] == [] and verdict["all"] == {}
    assert verdict["pairs_needed"] is False
    assert verdict["not_measured"] == ["all_reduce_perf across nodes: its ranks did not meet: rank 0 lists ranks on "
                                       "1 host of the group's 4 nodes (rccl-tests and nccl-tests meet across nodes "
                                       "only through MPI: set fabric_launch: first with an mpirun command, "
                                       "docs/running.md)"]
    assert verdict["msg"].startswith("fabric gate PASS on 4 nodes; not measured: all_reduce_perf across nodes")


def test_on_the_hosts_a_launcher_and_the_binary_it_is_given_are_looked_for(tmp_path):
    from ansible_collections.clusterval.training.plugins.modules.training_fabric import check_tools
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    command = ["mpirun-not-installed", "-np", "{np}", str(binary), "-g", "1"]
    found = check_tools({"benchmarks": [{"name": "all_reduce_perf", "command": command}], "launch": "first"})
    assert found == {"missing": ["mpirun-not-installed"], "where": "the hosts (fabric_launch: first)"}
    reason = _fabric.not_run_reason({h: found for h in HOSTS})
    assert reason == "fabric gate not run: mpirun-not-installed is not in the hosts (fabric_launch: first)"
