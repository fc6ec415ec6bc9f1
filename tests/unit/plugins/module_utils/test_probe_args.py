"""The preflight probe's arguments for a node, computed from the plan and the role's settings."""
from __future__ import annotations

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._probe_args import (
    kernel_log_only_args, probe_args, takeover_args, token_dest, verdict)


def plan(mode="multi_node", devices=("/dev/kfd", "/dev/dri"), cache="/shared/cache"):
    def node(rank):
        return {"run_dir": "/home/a/LOGS/r1", "node_rank": rank, "nnodes": 2, "coordinator_port": 12345,
                "directories": ["/home/a/LOGS/r1"], "hf_token_file": "/home/a/.hf_token",
                "container": {"image": "rocm/jax:1", "devices": list(devices), "shm_size": "64G",
                              "volumes": ["/home/a/LOGS/r1:/home/a/LOGS/r1", "/data:/data"]}}
    return {"run_id": "r1", "mode": mode, "data_cache_dir": cache, "gpu_arch": "MI300X", "gpus_per_node": 8,
            "mock_data": True, "total_steps": 1024, "nodes": {"node1": node(0), "node2": node(1)}}


def test_the_first_node_writes_the_marker_checks_the_port_and_takes_the_lock():
    args = probe_args(plan(), "node1", {"controller": "alice@login", "address": "10.0.0.1"}, 2, check_mode=False)
    assert args["lock"] == {"run_id": "r1", "run_dir": "/home/a/LOGS/r1", "data_cache_dir": "/shared/cache",
                            "controller": "alice@login", "address": "10.0.0.1", "take": True, "takeover": False,
                            "stale_after": 1800.0}
    assert args["shared_marker"] == {"path": "/shared/cache/.clusterval-preflight-r1", "token": "r1:node1",
                                     "writer": "node1", "wait": 30.0, "mode": "write"}
    assert args["coordinator_port"] == 12345 and args["gpu_count"] == 8 and args["gpu_arch"] == "MI300X"
    assert args["mounts"] == ["/data"], "the run directory is made by the run; /data must exist"
    assert args["expected_log_mib"] == 68 and args["token_required"] is False
    assert args["token_file"] == "/home/a/.hf_token" and args["rdma"] is False and "rdma_ports" not in args


def test_the_other_nodes_read_the_marker_and_leave_the_port_alone():
    args = probe_args(plan(), "node2", {}, 2, check_mode=True)
    assert args["shared_marker"]["mode"] == "read" and "coordinator_port" not in args
    assert args["lock"]["take"] is False, "check mode takes no lock"


def test_rdma_follows_the_containers_infiniband_devices_unless_set():
    args = probe_args(plan(devices=("/dev/kfd", "/dev/infiniband")), "node1", {"rdma_rate_gbps": 400}, 2, False)
    assert args["rdma"] is True and args["rdma_ports"] == {"sysfs": "/sys/class/infiniband", "min_rate_gbps": 400.0}
    off = probe_args(plan(devices=("/dev/infiniband",)), "node1", {"rdma": False}, 2, False)
    assert off["rdma"] is False and "rdma_ports" not in off


def test_settings_override_what_the_plan_gives():
    args = probe_args(plan(), "node1", {"gpu_count": 4, "gpu_arch": "MI325X", "mock_data": False, "lock_take": False,
                                        "check_coordinator_port": False, "check_gpu_errors": False,
                                        "hf_token_file": "/tmp/token", "data_cache_dir": ""}, 2, False)
    assert args["gpu_count"] == 4 and args["gpu_arch"] == "MI325X" and args["token_required"] is True
    assert args["lock"]["take"] is False and "coordinator_port" not in args and "kernel_log" not in args
    assert args["token_file"] == "/tmp/token" and "shared_marker" not in args
    assert "gpu_count" not in probe_args(plan(), "node1", {"gpu_count": 0}, 2, False), "0 skips the count"


def test_a_single_node_or_single_host_run_checks_no_shared_cache_and_a_handed_token_is_not_sought_in_check_mode():
    assert "shared_marker" not in probe_args(plan(mode="single_node"), "node1", {}, 2, False)
    assert "shared_marker" not in probe_args(plan(), "node1", {}, 1, False)
    assert "token_file" not in probe_args(plan(), "node1", {"hf_token_handed": True}, 2, check_mode=True)


def test_the_planned_gpu_vendor_reaches_the_probe():
    nvidia = dict(plan(devices=()), gpu_vendor="nvidia", gpu_arch="h100")
    args = probe_args(nvidia, "node1", {}, 2, False)
    assert args["gpu_vendor"] == "nvidia" and args["gpu_arch"] == "h100" and args["devices"] == []
    assert "gpu_vendor" not in probe_args(plan(), "node1", {}, 2, False)


def test_yes_no_settings_given_as_strings_on_the_command_line_read_as_ansible_reads_them():
    args = probe_args(plan(devices=("/dev/infiniband",)), "node1",
                      {"check_gpu_errors": "false", "rdma": "no", "check_shared_cache": "0", "lock_take": "False",
                       "mock_data": "false"}, 2, False)
    assert "kernel_log" not in args and args["rdma"] is False and "shared_marker" not in args
    assert args["lock"]["take"] is False and args["token_required"] is True


def test_an_empty_token_file_setting_is_the_plans_and_the_handed_token_goes_there():
    assert probe_args(plan(), "node1", {"hf_token_file": ""}, 2, False)["token_file"] == "/home/a/.hf_token"
    assert token_dest(plan(), "node2", {"hf_token_file": ""}) == "/home/a/.hf_token"
    assert token_dest(plan(), "node2", {"hf_token_file": "/run/token"}) == "/run/token"


def test_every_failed_check_is_named_and_the_advice_names_the_inventory():
    checks = [{"check": "docker", "ok": True, "detail": "ok"},
              {"check": "busy", "ok": False, "detail": "run r0 holds it: teardown with -i <inventory>"},
              {"check": "disk", "ok": False, "detail": "512 MiB free"}]
    assert verdict("node2", checks, "inv/hosts.yml") == (
        "preflight failed on node2: busy: run r0 holds it: teardown with -i inv/hosts.yml; disk: 512 MiB free")
    assert verdict("node2", checks[:1], "inv/hosts.yml") == ""
    assert "-i <inventory>" in verdict("node2", checks, "")


def test_a_takeover_tears_down_the_other_run_on_the_node_naming_this_one():
    args = takeover_args(plan(), "node2", {"docker_socket": "/run/docker.sock", "controller": "alice@login",
                                           "address": "10.0.0.2"}, {"run_id": "r0", "busy": True})
    assert args == {"docker_host": "unix:///run/docker.sock", "run_id": "r0", "node": "node2", "address": "10.0.0.2",
                    "taken_over_by": {"by": "r1", "controller": "alice@login"}}


def test_training_gpu_arch_auto_checks_the_arch_the_plan_detected():
    args = probe_args(dict(plan(), gpu_arch="mi325"), "node1", {"gpu_arch": "auto"}, 2, False)
    assert args["gpu_arch"] == "mi325"


def test_the_kernel_log_is_read_with_become_by_default_and_as_root_in_the_task_that_becomes():
    args = probe_args(plan(), "node1", {"check_sudo": False}, 2, False)
    assert args["kernel_log"] == {"command": ["dmesg"], "patterns": [], "since": "boot", "privilege": "become",
                                  "check_sudo": False}
    skipped = probe_args(plan(), "node1", {"kernel_log": "skip", "kernel_log_since": "24h"}, 2, False)
    assert skipped["kernel_log"]["privilege"] == "skip" and skipped["kernel_log"]["since"] == "24h"
    assert probe_args(plan(), "node1", {"kernel_log": "user"}, 2, False)["kernel_log"]["privilege"] == "none"
    assert kernel_log_only_args("node2", {}) == {
        "node": "node2", "docker_host": "", "python_modules": [],
        "kernel_log": {"command": ["dmesg"], "patterns": [], "since": "boot", "privilege": "none", "check_sudo": True}}


@pytest.mark.parametrize("settings, path", [({"kernel_log": "sudo"}, "preflight_kernel_log"),
                                            ({"kernel_log_since": "last week"}, "preflight_kernel_log_since")])
def test_a_kernel_log_setting_it_cannot_use_is_refused_naming_it(settings, path):
    with pytest.raises(ConfigError, match=path):
        probe_args(plan(), "node1", settings, 2, False)
