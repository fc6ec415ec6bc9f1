"""Node health checks of the preflight probe, on real tool output and real kernel log lines."""
import subprocess

import pytest
from real_logs import repo_excerpts

from ansible_collections.clusterval.training.plugins.module_utils import _health, _probe

REAL = repo_excerpts("node_health_real.txt")


def completed(stdout, rc=0, stderr=""):
    return lambda argv: subprocess.CompletedProcess(list(argv), rc, stdout, stderr)


def test_amd_smi_text_lists_its_gpus_and_models():
    assert _health.gpu_inventory("/opt/rocm/bin/amd-smi", REAL["GT-01"]) == (1, ["AMD Instinct MI350X"])


def test_rocm_smi_json_and_csv_count_cards():
    assert _health.gpu_inventory("/opt/rocm/bin/rocm-smi", REAL["GT-02"]) == (
        1, ["AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"])
    assert _health.gpu_inventory("/opt/rocm/bin/rocm-smi", REAL["GT-03"])[0] == 2


def test_nvidia_smi_counts_lines():
    assert _health.gpu_inventory("/usr/bin/nvidia-smi", "NVIDIA H100 80GB HBM3\nNVIDIA H100 80GB HBM3\n") == (
        2, ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"])


def test_an_unknown_format_is_a_failed_count_not_a_pass():
    result = _health.gpu_count_check("/usr/bin/amd-smi", "garbage", 8)
    assert result["ok"] is False and "not in a format known" in result["detail"]


def test_a_missing_gpu_fails_naming_the_tool_and_both_numbers():
    result = _health.gpu_count_check("/opt/rocm/bin/amd-smi", REAL["GT-01"], 8)
    assert result == {"check": "gpu_count", "ok": False,
                      "detail": "/opt/rocm/bin/amd-smi lists 1 GPU (AMD Instinct MI350X), the plan needs 8"}


def test_gpu_checks_run_the_tool_once_for_arch_and_count(tmp_path):
    tool = tmp_path / "amd-smi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    calls = []

    def run(argv):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, REAL["GT-01"] * 8, "")
    checks = _probe.gpu_checks([{"path": str(tool), "args": ["static", "--asic"]}], {"MI350X": "mi350"}, "mi350",
                               8, run)
    assert [(c["check"], c["ok"]) for c in checks] == [("gpu_arch", True), ("gpu_count", True)]
    assert calls == [[str(tool), "static", "--asic"]]


def test_an_amdgpu_hang_the_driver_recovers_from_is_reported_not_failed():
    result = _health.kernel_log_check(["dmesg"], completed(REAL["KL-01"]))
    assert result["ok"] is True
    assert result["detail"].startswith(
        "no critical GPU error in the kernel log since boot (dmesg); reported, not failed: ring timeout: a job hung "
        "the GPU: [127033.279661] amdgpu 0000:c5:00.0: amdgpu: ring gfx_0.0.0 timeout")
    assert "(and 2 more)" in result["detail"]


@pytest.mark.parametrize("line, meaning", [
    # amdgpu's own messages (drivers/gpu/drm/amd/amdgpu: amdgpu_device.c, amdgpu_ras.c)
    ("[ 812.004] amdgpu 0000:c5:00.0: amdgpu: GPU reset(2) failed", "GPU reset failed"),
    ("[ 812.005] amdgpu 0000:c5:00.0: amdgpu: GPU reset end with ret = -19", "GPU reset failed"),
    ("[ 812.006] amdgpu 0000:c5:00.0: amdgpu: device lost from bus!", "GPU has fallen off the bus"),
    ("[ 90.1] amdgpu 0000:0b:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block",
     "uncorrectable memory or hardware error (RAS)"),
])
def test_an_amdgpu_gpu_lost_or_with_bad_memory_fails_the_node(line, meaning):
    result = _health.kernel_log_check(["dmesg"], completed(REAL["KL-03"] + line + "\n"))
    assert result == {"check": "gpu_errors", "ok": False,
                      "detail": "1 critical GPU error in the kernel log since boot (dmesg): %s: %s" % (meaning, line)}


def test_an_application_xid_is_reported_with_its_meaning_not_failed():
    result = _health.kernel_log_check(["dmesg"], completed(REAL["KL-02"]))
    assert result == {"check": "gpu_errors", "ok": True, "detail": (
        "no critical GPU error in the kernel log since boot (dmesg); reported, not failed: XID 43 (GPU stopped "
        "processing: an application's fault): [Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, "
        "pid=1045242, name=pt_main_thread, Ch 00000008")}


def test_a_critical_xid_fails_the_node_and_the_application_xid_beside_it_is_reported():
    critical = "[ 5012.8] NVRM: Xid (PCI:0000:18:00): 79, pid=2231, GPU has fallen off the bus."
    result = _health.kernel_log_check(["dmesg"], completed(REAL["KL-02"] + critical + "\n"))
    assert result["ok"] is False
    assert result["detail"].startswith("1 critical GPU error in the kernel log since boot (dmesg): XID 79 (GPU has "
                                       "fallen off the bus): %s; reported, not failed: XID 43" % critical)


def test_every_critical_xid_has_a_meaning_and_none_is_also_an_application_one():
    assert {48, 79} <= set(_health.CRITICAL_XIDS) and all(_health.CRITICAL_XIDS.values())
    assert not set(_health.CRITICAL_XIDS) & set(_health.REPORTED_XIDS)
    assert _health.classify("NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error)").critical is True
    assert _health.classify("NVRM: Xid (PCI:0000:3b:00): 999, pid=1").meaning == "XID 999 (not a critical XID)"


def test_healthy_amdgpu_lines_are_not_errors():
    result = _health.kernel_log_check(["dmesg"], completed(REAL["KL-03"]))
    assert result == {"check": "gpu_errors", "ok": True,
                      "detail": "no GPU error in the kernel log since boot (dmesg)"}


def test_the_users_patterns_fail_the_node():
    result = _health.kernel_log_check(["dmesg"], completed("[ 1.0] mlx5_core 0000:1a:00.0: firmware hang\n"),
                                      [r"mlx5_core.*firmware hang"])
    assert result["ok"] is False and "matches preflight_gpu_error_patterns" in result["detail"]


def test_the_window_keeps_the_lines_of_its_last_seconds_by_their_stamps():
    text = ("[ 1000.0] amdgpu 0000:c5:00.0: amdgpu: GPU reset(1) failed\n"
            "[ 99000.5] amdgpu 0000:c5:00.0: amdgpu: GPU reset(2) failed\n")
    recent = _health.kernel_log_check(["dmesg"], completed(text), since_s=3600, uptime_s=100000.0)
    assert recent["detail"] == ("1 critical GPU error in the kernel log in the last 1h (dmesg): GPU reset failed: "
                                "[ 99000.5] amdgpu 0000:c5:00.0: amdgpu: GPU reset(2) failed")
    older = _health.kernel_log_check(["dmesg"], completed(text), since_s=600, uptime_s=100000.0)
    assert older == {"check": "gpu_errors", "ok": True,
                     "detail": "no GPU error in the kernel log in the last 10m (dmesg)"}


@pytest.mark.parametrize("since, seconds", [(None, None), ("boot", None), ("24h", 86400.0), ("7d", 604800.0),
                                            ("90m", 5400.0), ("3600", 3600.0)])
def test_kernel_log_windows_read_as_durations(since, seconds):
    assert _health.window_seconds(since) == seconds


def test_a_window_that_is_no_duration_is_refused():
    with pytest.raises(ValueError, match="expected boot or a duration"):
        _health.window_seconds("yesterday")


def test_an_unreadable_kernel_log_fails_with_the_reason_and_the_way_on():
    run = completed("", 1, "dmesg: read kernel buffer failed: Operation not permitted\n")
    result = _health.kernel_log_check(["dmesg"], run)
    assert result["ok"] is False
    assert "cannot read the kernel log with dmesg: dmesg: read kernel buffer failed" in result["detail"]
    assert "preflight_kernel_log: skip goes on without it" in result["detail"]


def test_a_user_without_sudo_is_named_with_the_way_on():
    result = _probe.sudo_check("alice", completed("", 1, "sudo: a password is required\n"))
    assert result == {"check": "gpu_errors", "ok": False, "detail": (
        "reading the kernel log needs sudo, and alice has none (sudo: a password is required; set "
        "preflight_kernel_log: skip to go on without it)")}
    assert _probe.sudo_check("alice", completed("")) is None


def test_no_gpu_tool_fails_the_count_naming_the_paths_tried(tmp_path):
    tools = [{"path": str(tmp_path / "amd-smi")}, {"path": str(tmp_path / "nvidia-smi")}]
    checks = _probe.gpu_checks(tools, {}, "mi300x", 8)
    assert checks == [{"check": "gpu_count", "ok": False, "detail": (
        "no GPU tool found, so the plan's 8 GPUs cannot be counted: tried %s/amd-smi, %s/nvidia-smi "
        "(preflight_gpu_tools names the node's tools; preflight_gpu_count: 0 skips the count)"
        % (tmp_path, tmp_path))}]
    assert _probe.gpu_checks(tools, {}, "mi300x", None)[0]["ok"] is True, "no count asked: the config's arch"


def test_a_user_outside_the_sockets_group_is_named_with_the_group(tmp_path, monkeypatch):
    socket_file = tmp_path / "docker.sock"
    socket_file.write_text("")
    monkeypatch.setattr(_probe.os, "access", lambda path, mode: False)
    monkeypatch.setattr(_probe.os, "getgroups", lambda: [])
    monkeypatch.setattr(_probe, "account_name", lambda uid: "alice")
    monkeypatch.setattr(_probe, "group_name", lambda gid: "docker")
    monkeypatch.setattr(_probe, "group_members", lambda gid: [])
    assert _probe.docker_check(str(socket_file)) == {"check": "docker", "ok": False, "detail": (
        "user alice cannot reach the Docker socket %s (not in group docker)" % socket_file)}
    monkeypatch.setattr(_probe, "group_members", lambda gid: ["alice"])
    assert "(added to group docker after this login: log in again)" in _probe.docker_check(str(socket_file))["detail"]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_ras_counters_with_an_uncorrectable_error_fail(tmp_path):
    write(tmp_path / "card0" / "device" / "ras" / "umc_err_count", "ue: 0\nce: 3\n")
    assert _health.ras_check(str(tmp_path))["ok"] is True
    write(tmp_path / "card1" / "device" / "ras" / "gfx_err_count", "ue: 2\nce: 0\n")
    result = _health.ras_check(str(tmp_path))
    assert result["ok"] is False
    assert result["detail"].endswith("card1/device/ras/gfx_err_count: ue: 2 ce: 0")


def port(root, device, state, rate):
    write(root / device / "ports" / "1" / "state", state + "\n")
    write(root / device / "ports" / "1" / "rate", rate + "\n")


def test_rdma_ports_active_at_rate_pass(tmp_path):
    port(tmp_path, "mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)")
    assert _health.rdma_ports_check(str(tmp_path), 400) == {
        "check": "rdma_ports", "ok": True, "detail": "ACTIVE: mlx5_0 port 1 400 Gb/sec (4X NDR)"}


def test_a_port_down_and_a_slow_port_are_named_with_their_files(tmp_path):
    port(tmp_path, "bnxt_re0", "1: DOWN", "400 Gb/sec (4X NDR)")
    port(tmp_path, "bnxt_re1", "4: ACTIVE", "200 Gb/sec (4X HDR)")
    detail = _health.rdma_ports_check(str(tmp_path), 400)["detail"]
    assert "bnxt_re0 port 1 state '1: DOWN' (%s/bnxt_re0/ports/1/state), expected ACTIVE" % tmp_path in detail
    assert "bnxt_re1 port 1 rate '200 Gb/sec (4X HDR)'" in detail and "expected at least 400 Gb/sec" in detail


def test_no_port_at_all_fails(tmp_path):
    assert _health.rdma_ports_check(str(tmp_path / "none"))["ok"] is False


@pytest.mark.parametrize("expected_log, ok", [(0, True), (1 << 40, False)])
def test_disk_needs_room_for_the_expected_log(tmp_path, expected_log, ok):
    result = _probe.disk_check(str(tmp_path), 0, expected_log)
    assert result["ok"] is ok
    assert ("ENOSPC" in result["detail"]) is (not ok)
