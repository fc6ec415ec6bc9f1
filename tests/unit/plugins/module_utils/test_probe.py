"""Node checks of the preflight probe."""
import json
import os
import stat
import subprocess

import pytest
from fake_docker import serve_once

from ansible_collections.clusterval.training.plugins.module_utils import _probe


def completed(stdout):
    return lambda argv: subprocess.CompletedProcess(list(argv), 0, stdout, "")


def test_paths_check_names_every_missing_host_path(tmp_path):
    present = tmp_path / "kfd"
    present.write_text("")
    result = _probe.paths_check("devices", ["%s:/dev/kfd" % present, "/nonexistent/dri:/dev/dri", "/nope/x"], "devices")
    assert result == {"check": "devices", "ok": False, "detail": "missing devices: /nonexistent/dri, /nope/x"}


def test_paths_check_passes_when_all_exist(tmp_path):
    assert _probe.paths_check("host_mounts", [str(tmp_path)], "on the host")["ok"] is True


@pytest.mark.parametrize("output, expected", [
    ('[{"asic": {"market_name": "AMD Instinct MI300X"}}]', "mi300x"),
    ("NVIDIA H200\n", "h200"),
    ("GPU[0] : Card Series: AMD Instinct MI355X OAM", "mi355"),
    ("Radeon Pro", None),
])
def test_detect_arch_takes_the_longest_known_model(output, expected):
    arch_map = {"MI300X": "mi300x", "MI355X": "mi355", "MI35": "wrong", "H200": "h200"}
    assert _probe.detect_arch(output, arch_map) == expected


def gpu_tool(tmp_path):
    tool = tmp_path / "amd-smi"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return [{"path": str(tool), "args": ["static"]}]


def test_gpu_check_mismatch_names_both_archs(tmp_path):
    result = _probe.gpu_check(gpu_tool(tmp_path), {"MI355X": "mi355"}, "mi300x", completed("MI355X"))
    assert result["ok"] is False
    assert "found mi355 but the run is planned for mi300x" in result["detail"]


def test_gpu_check_match(tmp_path):
    assert _probe.gpu_check(gpu_tool(tmp_path), {"MI300X": "mi300x"}, "mi300x", completed("MI300X"))["ok"] is True


def test_gpu_check_unknown_model_fails(tmp_path):
    result = _probe.gpu_check(gpu_tool(tmp_path), {"MI300X": "mi300x"}, "mi300x", completed("Radeon"))
    assert result["ok"] is False and "no known GPU model" in result["detail"]


def test_gpu_check_without_a_tool_takes_the_config_arch():
    result = _probe.gpu_check([{"path": "/nonexistent/amd-smi"}], {}, "mi300x")
    assert result["ok"] is True and "mi300x taken from the config" in result["detail"]


def test_token_check_never_returns_the_token(tmp_path):
    token = tmp_path / "hf_token"
    token.write_text("hf_secret_value")
    result = _probe.token_check(str(token))
    assert result["ok"] is True and "hf_secret_value" not in json.dumps(result)
    assert _probe.token_check(str(tmp_path / "missing"))["ok"] is False
    (tmp_path / "empty").write_text("")
    assert _probe.token_check(str(tmp_path / "empty"))["detail"].endswith("is empty")


def test_disk_check_measures_the_deepest_existing_ancestor(tmp_path):
    result = _probe.disk_check(str(tmp_path / "not" / "yet"), 0)
    assert result["ok"] is True and str(tmp_path) in result["detail"]
    assert _probe.disk_check(str(tmp_path), 1 << 40)["ok"] is False


def test_shared_marker_round_trip(tmp_path):
    marker = str(tmp_path / "cache" / ".marker")
    assert _probe.shared_check(marker, "run:node1", "node1")["ok"] is False
    _probe.write_marker(marker, "run:node1")
    assert _probe.shared_check(marker, "run:node1", "node1")["ok"] is True
    assert _probe.shared_check(marker, "other:node1", "node1")["ok"] is False
    _probe.remove_marker(marker)
    _probe.remove_marker(marker)
    assert not os.path.exists(marker)


def test_hca_check_lists_hcas(monkeypatch):
    monkeypatch.setattr(_probe.os.path, "exists", lambda path: True)
    result = _probe.hca_check(completed("2 HCAs found:\n\tbnxt_re0\n\tbnxt_re1\n"))
    assert result == {"check": "rdma", "ok": True, "detail": "HCAs: bnxt_re0, bnxt_re1"}
    assert _probe.hca_check(completed("0 HCAs found:\n"))["ok"] is False


def test_docker_check_reads_the_version_over_the_socket(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"Version": "26.1.5"}')
    assert _probe.docker_check(path) == {"check": "docker", "ok": True,
                                         "detail": "Docker 26.1.5 reachable at %s" % path}


def test_docker_check_fails_without_a_daemon(tmp_path):
    result = _probe.docker_check(str(tmp_path / "none.sock"))
    assert result["ok"] is False and "not reachable" in result["detail"]


def test_report_lines_one_per_check():
    lines = _probe.report_lines("node2", [_probe.check("disk", False, "1 MiB free")])
    assert lines == ["node2 preflight FAIL disk: 1 MiB free"]


def test_image_present_asks_the_daemon(tmp_path):
    path = str(tmp_path / "docker.sock")
    serve_once(path, b"HTTP/1.0 404 Not Found\r\n\r\n{}")
    assert _probe.image_present(path, "rocm/jax-training:maxtext-v25.9") is False
    assert _probe.image_present(str(tmp_path / "none.sock"), "x") is None


def test_shared_marker_read_waits_for_the_writer_then_gives_up(tmp_path):
    marker = str(tmp_path / ".marker")
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 0.5:
            _probe.write_marker(marker, "run:node1")

    found = _probe.shared_check(marker, "run:node1", "node1", 5, clock=lambda: now[0], sleep=sleep)
    assert found["ok"] is True and 0.5 <= now[0] < 0.7
    now[0] = 0.0
    missing = _probe.shared_check(marker, "other:node1", "node1", 2, clock=lambda: now[0], sleep=sleep)
    assert missing["ok"] is False and "waited 2s" in missing["detail"] and 2 <= now[0] < 2.2


def meminfo(tmp_path, kib):
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:       %d kB\nMemFree:        1000 kB\n" % kib)
    return str(path)


@pytest.mark.parametrize("size, expected", [
    ("64G", 64 << 30), ("64g", 64 << 30), ("512mb", 512 << 20), ("1.5GiB", 3 << 29), ("2t", 2 << 40),
    ("4096", 4096), ("lots", None), ("64X", None),
])
def test_size_bytes_reads_dockers_binary_units(size, expected):
    assert _probe.size_bytes(size) == expected


def test_shm_beyond_the_nodes_memory_fails_naming_both(tmp_path):
    result = _probe.shm_check("2048G", meminfo(tmp_path, 512 * 1024 * 1024))
    assert result == {"check": "shm_size", "ok": False,
                      "detail": "config.shm_size 2048G (2048.0 GiB) exceeds the node's 512.0 GiB of memory"}


def test_shm_within_the_nodes_memory_passes(tmp_path):
    result = _probe.shm_check("256G", meminfo(tmp_path, 512 * 1024 * 1024))
    assert result["ok"] is True and "256G (256.0 GiB) in 512.0 GiB of memory" in result["detail"]


def test_shm_check_fails_when_memory_cannot_be_read(tmp_path):
    result = _probe.shm_check("64G", str(tmp_path / "missing"))
    assert result["ok"] is False and "cannot read MemTotal" in result["detail"]
