"""The training container's create request, from the spec the plan and the overrides give."""
from __future__ import annotations

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _container
from ansible_collections.clusterval.training.plugins.module_utils._launch_docker import container_spec, node_files

SPEC = {
    "name": "rocm-jax-llama3.1-70b", "image": "rocm/jax-training:maxtext-v25.9",
    "command": ["python3", "/run/sup/supervise.py", "/run/sup/config.json"],
    "env": {"NCCL_IB_HCA": "rdma0,rdma1", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.975"},
    "labels": {"clusterval.run_id": "r1"},
    "devices": ["/dev/kfd", "/sim/dri:/dev/dri"], "groups": ["video", "render"],
    "capabilities": ["IPC_LOCK", "SYS_PTRACE"], "security_opts": ["seccomp=unconfined"],
    "ulimits": ["memlock:-1:-1", "stack:67108864:67108864"], "shm_size": "64G",
    "network_mode": "host", "ipc_mode": "host", "privileged": False,
    "volumes": ["/data:/data", "/home/a/LOGS/r1:/home/a/LOGS/r1"],
    "mounts": [{"type": "bind", "source": "/home/a/.hf", "target": "/run/clusterval/hf_token", "read_only": True}],
}


def test_the_create_request_carries_every_setting_of_the_spec():
    body = _container.create_body(SPEC, stop_timeout=30)
    host = body["HostConfig"]
    assert body["Image"] == SPEC["image"] and body["Cmd"] == SPEC["command"] and body["StopTimeout"] == 30
    assert body["Env"] == ["NCCL_IB_HCA=rdma0,rdma1", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.975"]
    assert host["Devices"] == [
        {"PathOnHost": "/dev/kfd", "PathInContainer": "/dev/kfd", "CgroupPermissions": "rwm"},
        {"PathOnHost": "/sim/dri", "PathInContainer": "/dev/dri", "CgroupPermissions": "rwm"}]
    assert host["GroupAdd"] == ["video", "render"] and host["CapAdd"] == ["IPC_LOCK", "SYS_PTRACE"]
    assert host["SecurityOpt"] == ["seccomp=unconfined"] and host["Privileged"] is False
    assert host["Ulimits"] == [{"Name": "memlock", "Soft": -1, "Hard": -1},
                               {"Name": "stack", "Soft": 67108864, "Hard": 67108864}]
    assert host["ShmSize"] == 64 * 1024 ** 3 and host["NetworkMode"] == "host" and host["IpcMode"] == "host"
    assert host["Binds"] == SPEC["volumes"] and host["RestartPolicy"] == {"Name": "no"}
    assert host["Mounts"] == [{"Type": "bind", "Source": "/home/a/.hf", "Target": "/run/clusterval/hf_token",
                               "ReadOnly": True}]
    assert host["DeviceRequests"] == []


def test_nvidia_gpus_are_asked_for_through_a_device_request():
    spec = dict(SPEC, devices=[], groups=[], device_requests=[{"driver": "nvidia", "capabilities": [["gpu"]]}])
    assert _container.create_body(spec, 10)["HostConfig"]["DeviceRequests"] == [
        {"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]], "Options": {}}]
    by_id = dict(spec, device_requests=[{"driver": "nvidia", "device_ids": [0, 1], "capabilities": [["gpu"]]}])
    assert _container.create_body(by_id, 10)["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["0", "1"]


def test_the_digest_tells_the_same_container_from_another():
    same = _container.create_body(dict(SPEC), 30)["Labels"][_container.DIGEST_LABEL]
    assert _container.create_body(dict(SPEC), 30)["Labels"][_container.DIGEST_LABEL] == same
    other_run = dict(SPEC, labels={"clusterval.run_id": "r2"})
    other_env = dict(SPEC, env=dict(SPEC["env"], NCCL_DEBUG="INFO"))
    for changed in (other_run, other_env, dict(SPEC, image="rocm/jax-training:other")):
        assert _container.create_body(changed, 30)["Labels"][_container.DIGEST_LABEL] != same


@pytest.mark.parametrize("given, expected", [("64G", 64 * 1024 ** 3), ("512m", 512 * 1024 ** 2), ("1gb", 1024 ** 3),
                                             (65536, 65536), ("16k", 16384)])
def test_sizes_read_as_the_docker_cli_reads_them(given, expected):
    assert _container.size_in_bytes(given) == expected


@pytest.mark.parametrize("bad", ["lots", "64 GiB", "-1g"])
def test_a_size_docker_would_not_read_is_refused(bad):
    with pytest.raises(ValueError, match="shm_size: expected a size"):
        _container.size_in_bytes(bad)


def test_a_ulimit_without_a_value_is_refused():
    with pytest.raises(ValueError, match="ulimits: expected name:soft"):
        _container.create_body(dict(SPEC, ulimits=["memlock"]), 10)


PLAN = {"run_id": "r1", "nodes": {"node1": {
    "hf_token_file": "/home/a/.cache/hf_token", "run_dir": "/home/a/LOGS/r1",
    "directories": ["/home/a/LOGS/r1"], "files": [{"path": "/home/a/LOGS/r1/launch.sh", "content": "x"}],
    "launch": {"hf_token_path": "/run/clusterval/hf_token"},
    "container": {"name": "c", "image": "i", "command": ["sh", "/home/a/LOGS/r1/launch.sh"],
                  "env": {"NNODES": 2, "DEBUG": True}, "volumes": ["/data:/data"], "groups": ["video"]}}}}


def test_the_spec_is_the_plans_with_the_overrides_and_the_token_as_a_read_only_file():
    spec = container_spec(PLAN, "node1", {"groups": [], "env": {"NCCL_DEBUG": "INFO"}},
                          command=["python3", "/sup/supervise.py"], extra_volumes=["/shared/status:/shared/status"])
    assert spec["env"] == {"NNODES": "2", "DEBUG": "True", "NCCL_DEBUG": "INFO"}
    assert spec["groups"] == [] and spec["command"] == ["python3", "/sup/supervise.py"]
    assert spec["volumes"] == ["/data:/data", "/shared/status:/shared/status"]
    assert spec["mounts"] == [{"type": "bind", "source": "/home/a/.cache/hf_token",
                               "target": "/run/clusterval/hf_token", "read_only": True}]
    assert "HF_TOKEN" not in spec["env"]


def test_no_token_mount_without_the_file_and_the_plans_command_by_default():
    spec = container_spec(PLAN, "node1", {}, token_present=False)
    assert spec["mounts"] == [] and spec["command"] == ["sh", "/home/a/LOGS/r1/launch.sh"]
    assert container_spec(PLAN, "node1", {}, token_file="")["mounts"] == []


def test_the_plans_files_go_with_the_container():
    assert node_files(PLAN, "node1") == {"directories": ["/home/a/LOGS/r1"],
                                         "files": [{"path": "/home/a/LOGS/r1/launch.sh", "content": "x"}]}
