"""GPU vendors and archs: the configs' arch keys, and the GPU tools' real output (nvidia-smi, amd-smi, rocm-smi)."""
import stat
import subprocess

import pytest
from real_logs import repo_excerpts

from ansible_collections.clusterval.training.plugins.module_utils import _gpus, _health, _probe

REAL = repo_excerpts("node_health_real.txt")


@pytest.mark.parametrize("key, canonical", [
    ("MI325X", "mi325"), ("mi325x", "mi325"), ("mi325", "mi325"), ("MI300X", "mi300x"), ("mi300x", "mi300x"),
    ("MI355X", "mi355"), ("mi350", "mi350"), ("MI250X", "mi250x"), ("H100", "h100"), (" h200 ", "h200"),
])
def test_arch_keys_compare_in_one_form(key, canonical):
    # the versioned format says MI325X where the seed configs and the suite's map say mi325
    assert _gpus.arch_key(key) == canonical


@pytest.mark.parametrize("image, vendor", [
    ("nvcr.io/nvidia/pytorch:25.01-py3", "nvidia"), ("ghcr.io/nvidia/jax:maxtext-2025-01-10", "nvidia"),
    ("nvcr.io/nvidia/nemo:25.02", "nvidia"), ("rocm/megatron-lm:v25.5_py310", "amd"),
    ("rocm/jax-training:maxtext-v25.9", "amd"), ("clusterval/simulator:latest", None),
])
def test_the_image_names_its_vendor(image, vendor):
    assert _gpus.vendor_of_image(image) == vendor


def test_nvidia_smi_csv_with_its_header_real_l40s():
    rows = _gpus.nvidia_csv(REAL["NV-01"])
    assert [(r["index"], r["name"], r["driver_version"], r["memory.total"]) for r in rows] == [
        ("0", "NVIDIA L40S", "575.51.03", "46068 MiB"), ("1", "NVIDIA L40S", "575.51.03", "46068 MiB")]


def test_nvidia_report_from_real_query_and_version_lines():
    report = _gpus.nvidia_report(REAL["NV-02"], REAL["NV-03"])
    assert report["count"] == 1 and report["models"] == ["NVIDIA H100 80GB HBM3"]
    found = (report["arch"], report["driver"], report["cuda"], report["vendor"])
    assert found == ("h100", "580.82.07", "12.4", "nvidia")
    assert _gpus.describe(report) == "1 x NVIDIA H100 80GB HBM3 (h100), driver 580.82.07, CUDA 12.4"


def test_cuda_version_from_the_real_table_header_too():
    assert _gpus.nvidia_report(REAL["NV-01"], REAL["NV-04"])["cuda"] == "12.2"


def test_nvidia_smi_count_skips_the_csv_header():
    assert _health.gpu_inventory("/usr/bin/nvidia-smi", REAL["NV-01"]) == (2, ["NVIDIA L40S", "NVIDIA L40S"])


def test_amd_arch_from_the_real_amd_smi_model_and_gfx_target():
    count, models = _health.gpu_inventory("/opt/rocm/bin/amd-smi", REAL["GT-01"])
    report = _gpus.amd_report(models, count, REAL["GT-01"])
    assert (report["arch"], report["gfx"], report["arch_candidates"]) == ("mi350", ["gfx950"], ["mi350", "mi355"])


def test_gfx_target_alone_names_candidates_not_an_arch():
    # gfx942 is MI300X, MI300A and MI325X: the model name decides, the target alone cannot
    report = _gpus.amd_report([], 8, "        TARGET_GRAPHICS_VERSION: gfx942\n")
    assert report["arch"] is None
    assert _gpus.arch_matches("MI325X", report) is True
    assert _gpus.arch_matches("mi355", report) is False


def test_device_requests_per_vendor_and_access():
    assert _gpus.device_requests("amd") == []
    assert _gpus.device_requests("nvidia") == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert _gpus.device_requests("nvidia", gpu_ids=["0", "1"]) == [
        {"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": [["gpu"]]}]
    assert _gpus.device_requests("nvidia", "cdi") == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=all"]}]


def tool(tmp_path, name):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return [{"path": str(path), "args": list(_gpus.NVIDIA_QUERY) if name == "nvidia-smi" else ["static"]}]


def prints(output):
    def run(argv):
        return subprocess.CompletedProcess(list(argv), 0, output, "")
    return run


def nvidia_smi(query, version):
    def run(argv):
        return subprocess.CompletedProcess(list(argv), 0, version if "--version" in argv else query, "")
    return run


def test_probe_reports_count_model_driver_and_cuda_of_real_nvidia_output(tmp_path):
    checks, report = _probe.gpu_probe(tool(tmp_path, "nvidia-smi"), {}, "h100", 1,
                                      nvidia_smi(REAL["NV-02"], REAL["NV-03"]), "nvidia")
    assert [(c["check"], c["ok"]) for c in checks] == [("gpu_vendor", True), ("gpu_arch", True), ("gpu_count", True)]
    assert "driver 580.82.07, CUDA 12.4" in checks[1]["detail"]
    assert (report["count"], report["driver"], report["cuda"]) == (1, "580.82.07", "12.4")


def test_probe_fails_an_nvidia_node_planned_for_amd(tmp_path):
    checks, dummy = _probe.gpu_probe(tool(tmp_path, "nvidia-smi"), {}, "mi300x", None,
                                     nvidia_smi(REAL["NV-02"], REAL["NV-03"]), "amd")
    vendor = checks[0]
    assert vendor["check"] == "gpu_vendor" and vendor["ok"] is False
    assert "lists nvidia GPUs" in vendor["detail"] and "planned for amd GPUs" in vendor["detail"]
    assert "set training_gpu_vendor: nvidia for this node's group" in vendor["detail"]


def test_an_amd_block_on_nvidia_nodes_is_reported_not_failed(tmp_path):
    checks, dummy = _probe.gpu_probe(tool(tmp_path, "nvidia-smi"), {}, "mi300x", None,
                                     nvidia_smi(REAL["NV-02"], REAL["NV-03"]), "nvidia")
    arch = checks[1]
    assert arch["ok"] is True and "parameters are those of its mi300x block" in arch["detail"]


def test_the_versioned_arch_key_matches_the_arch_map_value(tmp_path):
    # preflight once compared "MI325X" (a versioned config's key) with "mi325" (the map's value) and failed
    output = "GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Instinct MI325X\n"
    checks, report = _probe.gpu_probe(tool(tmp_path, "amd-smi"), {"MI325X": "mi325"}, "MI325X", 1, prints(output),
                                      "amd")
    assert all(c["ok"] for c in checks), checks
    assert report["arch"] == "mi325"


def test_a_given_arch_that_differs_from_the_detected_one_names_both(tmp_path):
    checks, dummy = _probe.gpu_probe(tool(tmp_path, "amd-smi"), {"MI350X": "mi350"}, "mi300x", None,
                                     prints(REAL["GT-01"]), "amd")
    arch = [c for c in checks if c["check"] == "gpu_arch"][0]
    assert arch["ok"] is False
    assert "found mi350 but the run is planned for mi300x" in arch["detail"] and "gfx950" in arch["detail"]


def test_rocminfo_counts_the_gpu_agents_and_names_their_model_and_gfx_target():
    # a real rocminfo: a CPU agent (not counted) and a GPU agent whose ISA name also says gfx942
    assert _health.gpu_inventory("/opt/rocm/bin/rocminfo", REAL["GT-04"]) == (1, ["AMD Instinct MI300X"])
    report = _probe.gpu_report({"path": "/opt/rocm/bin/rocminfo", "args": []}, {}, prints(REAL["GT-04"]))
    assert (report["vendor"], report["count"], report["arch"], report["gfx"]) == ("amd", 1, "mi300x", ["gfx942"])
    cpu_only = REAL["GT-04"].split("*******\nAgent 3")[0]
    assert _health.gpu_inventory("/opt/rocm/bin/rocminfo", cpu_only) == (0, [])
    assert _health.gpu_inventory("/opt/rocm/bin/rocminfo", "ROCk module is NOT loaded, possibly no GPU devices\n") \
        == (None, [])
