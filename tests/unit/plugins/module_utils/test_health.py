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


def test_real_amdgpu_errors_are_found_and_quoted():
    result = _health.kernel_log_check(["dmesg"], _health.GPU_ERROR_PATTERNS, completed(REAL["KL-01"]))
    assert result["ok"] is False
    assert result["detail"].startswith("5 GPU error lines in the kernel log since boot (dmesg): "
                                       "[127033.279661] amdgpu 0000:c5:00.0: amdgpu: ring gfx_0.0.0 timeout")


def test_real_xid_line_is_found():
    found = _health.gpu_error_lines(REAL["KL-02"], _health.GPU_ERROR_PATTERNS)
    assert found == ["[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, "
                     "Ch 00000008"]


def test_healthy_amdgpu_lines_are_not_errors():
    result = _health.kernel_log_check(["dmesg"], _health.GPU_ERROR_PATTERNS, completed(REAL["KL-03"]))
    assert result == {"check": "gpu_errors", "ok": True,
                      "detail": "no GPU error in the kernel log since boot (dmesg)"}


def test_an_unreadable_kernel_log_fails_with_the_reason():
    run = completed("", 1, "dmesg: read kernel buffer failed: Operation not permitted\n")
    result = _health.kernel_log_check(["dmesg"], _health.GPU_ERROR_PATTERNS, run)
    assert result["ok"] is False
    assert "cannot read the kernel log with dmesg: dmesg: read kernel buffer failed" in result["detail"]


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
