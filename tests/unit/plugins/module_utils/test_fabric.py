"""The fabric gate's core: rccl-tests/nccl-tests output (real lines), rounds, and the verdict that names a node."""
import os
import subprocess
import sys
import time

import pytest
from real_logs import REPO, repo_excerpts

from ansible_collections.clusterval.training.plugins.module_utils import _fabric, _fabric_html
from ansible_collections.clusterval.training.plugins.module_utils._report_html import html_report

REAL = repo_excerpts("rccl_tests_real.txt")
STANDIN = os.path.join(REPO, "simulator", "standin", "collective_perf.py")


def test_rccl_tests_row_with_root_and_devices():
    parsed = _fabric.parse_output(REAL["RT-01"])
    assert parsed["ranks"] == 8
    assert parsed["rows"] == [{"size": 8388608, "count": 2097152, "type": "float", "redop": "sum", "root": -1,
                               "time_us": 91.10, "algbw": 92.08, "busbw": 161.14, "wrong": "0",
                               "in_time_us": 94.94, "in_algbw": 88.36, "in_busbw": 154.63, "in_wrong": "0"}]
    assert _fabric.peak_busbw(parsed, "all_reduce_perf") == 161.14


def test_summary_lines_and_the_largest_size():
    parsed = _fabric.parse_output(REAL["RT-02"])
    assert parsed["avg_busbw"] == 142.652
    assert parsed["out_of_bounds"] == {"count": 0, "ok": True}
    assert [r["size"] for r in parsed["rows"]] == [2147483648, 4294967296, 8589934592, 17179869184]
    assert _fabric.peak_busbw(parsed, "all_reduce_perf") == 360.98


def test_header_without_rows_has_no_figure():
    parsed = _fabric.parse_output(REAL["RT-03"])
    assert parsed["ranks"] == 8 and parsed["rows"] == []
    assert _fabric.peak_busbw(parsed, "all_reduce_perf") is None


def test_mpirun_tagged_output_is_read_and_tiny_figures_recomputed():
    parsed = _fabric.parse_output(REAL["RT-04"])
    assert [r["size"] for r in parsed["rows"]] == [8, 16, 32]
    # 32 B in 22.25 us: 0.00 printed, 1.44e-3 GB/s algbw (ranks unknown: factor 1)
    assert _fabric.peak_busbw(parsed, "all_reduce_perf") == pytest.approx(32 / 22.25 / 1e3)


def test_the_stand_in_prints_what_the_parser_reads():
    out = subprocess.run([sys.executable, STANDIN, "-b", "64K", "-e", "128K", "-g", "2", "-n", "1", "-w", "0"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    parsed = _fabric.parse_output(out)
    assert parsed["simulated"] is True and parsed["ranks"] == 2
    assert [r["size"] for r in parsed["rows"]] == [65536, 131072]
    assert _fabric.peak_busbw(parsed, "all_reduce_perf") > 0


def test_pair_rounds_put_each_node_in_two_pairs_with_different_partners():
    assert _fabric.pair_rounds(["a", "b", "c", "d"]) == [[("a", "b"), ("c", "d")], [("b", "c"), ("d", "a")]]
    odd = _fabric.pair_rounds(["a", "b", "c", "d", "e"])
    assert odd == [[("a", "b"), ("c", "d")], [("b", "c"), ("d", "e")], [("e", "a")]]
    for hosts in (["n%d" % i for i in range(count)] for count in range(3, 17)):
        rounds = _fabric.pair_rounds(hosts)
        for pairs in rounds:
            members = [h for p in pairs for h in p]
            assert len(members) == len(set(members))
        for host in hosts:
            assert sum(host in p for r in rounds for p in r) == 2
    assert _fabric.pair_rounds(["a", "b"]) == [[("a", "b")]]


def test_plan_rounds_and_the_command_of_a_group():
    rounds = _fabric.plan_rounds(["n1", "n2"], {"n1": "10.0.0.1", "n2": "10.0.0.2"}, pairs=False)
    assert [r["name"] for r in rounds] == ["alone", "all"]
    group = _fabric.group_of(rounds[1], "n2")
    assert group == {"name": "all", "hosts": ["n1", "n2"], "addresses": ["10.0.0.1", "10.0.0.2"]}
    argv = _fabric.substitute(["mpirun", "-np", "{np}", "-H", "{hosts_slots}", "all_reduce_perf", "-g", "1"], group, 8)
    assert argv == ["mpirun", "-np", "16", "-H", "10.0.0.1:8,10.0.0.2:8", "all_reduce_perf", "-g", "1"]
    assert _fabric.rank_env(group, "n2", 29650, 60)["CLUSTERVAL_FABRIC_RANK"] == "1"


def result(round_name, hosts, busbw, rank=0, timed_out=False):
    bench = {"rc": 0, "timed_out": timed_out, "seconds": 1.0, "busbw": None if timed_out else busbw}
    return {"round": round_name, "group": {"name": "+".join(hosts) if round_name.startswith("pairs") else
                                           (hosts[0] if round_name == "alone" else "all"), "hosts": hosts},
            "rank": rank, "seconds": 1.0, "benchmarks": {"all_reduce_perf": bench}}


HOSTS = ["node1", "node2", "node3", "node4"]
BENCH = ["all_reduce_perf"]


def slow_node3(measure_pairs=True):
    measured = [result("alone", [h], 0.3) for h in HOSTS] + [result("all", HOSTS, 0.004)]
    if measure_pairs:
        speeds = {("node1", "node2"): 0.5, ("node3", "node4"): 0.004, ("node2", "node3"): 0.003,
                  ("node4", "node1"): 0.45}
        for index, pairs in enumerate(_fabric.pair_rounds(HOSTS)):
            measured += [result("pairs-%d" % (index + 1), list(p), speeds[p]) for p in pairs]
    return measured


def test_a_slow_node_is_named_with_its_pairs_as_evidence():
    verdict = _fabric.judge(HOSTS, slow_node3(), BENCH, {"ratio": 0.5, "across_min_busbw": {"all_reduce_perf": 0.1}})
    assert verdict["failed"] is True
    assert [(n["kind"], n["name"]) for n in verdict["named"]] == [("node", "node3")]
    assert verdict["msg"] == ("fabric gate FAIL: node3 is slow in every pair while its partners are fast with other "
                              "nodes (with node4: all_reduce_perf 0.004 GB/s, below expected >= 0.1 GB/s; with node2: "
                              "all_reduce_perf 0.003 GB/s, below expected >= 0.1 GB/s)")
    assert verdict["matrix"]["busbw"]["node3"] == {"node4": 0.004, "node2": 0.003}
    assert verdict["matrix"]["busbw"]["node1"] == {"node2": 0.5, "node4": 0.45}


def test_without_an_expectation_the_pairs_are_judged_against_their_median():
    expect = {"ratio": 0.5}
    assert _fabric.judge(HOSTS, slow_node3(False), BENCH, expect)["pairs_needed"] is True
    verdict = _fabric.judge(HOSTS, slow_node3(), BENCH, expect)
    assert [n["name"] for n in verdict["named"]] == ["node3"]
    assert "below 50% of the median" in verdict["msg"]


def test_a_fast_ring_against_its_expectation_needs_no_pairs_and_passes():
    measured = [result("alone", [h], 0.3) for h in HOSTS] + [result("all", HOSTS, 0.4)]
    expect = {"ratio": 0.5, "across_min_busbw": {"all_reduce_perf": 0.1}}
    verdict = _fabric.judge(HOSTS, measured, BENCH, expect)
    assert verdict["pairs_needed"] is False
    assert verdict["failed"] is False and verdict["msg"] == "fabric gate PASS on 4 nodes: all nodes all_reduce_perf 0.4 GB/s"


def test_one_slow_link_between_two_fast_nodes_is_named_as_a_link():
    measured = [result("alone", [h], 0.3) for h in HOSTS] + [result("all", HOSTS, 0.004)]
    speeds = {("node1", "node2"): 0.5, ("node3", "node4"): 0.004, ("node2", "node3"): 0.5, ("node4", "node1"): 0.45}
    for index, pairs in enumerate(_fabric.pair_rounds(HOSTS)):
        measured += [result("pairs-%d" % (index + 1), list(p), speeds[p]) for p in pairs]
    verdict = _fabric.judge(HOSTS, measured, BENCH, {"ratio": 0.5})
    assert [(n["kind"], n["name"]) for n in verdict["named"]] == [("link", "node3-node4")]


def test_two_nodes_cannot_tell_the_node_from_the_link():
    measured = [result("alone", [h], 0.3) for h in HOSTS[:2]] + [result("all", HOSTS[:2], 0.004)]
    verdict = _fabric.judge(HOSTS[:2], measured, BENCH, {"across_min_busbw": {"all_reduce_perf": 0.1}})
    assert verdict["failed"] is True and verdict["named"] == []
    assert verdict["msg"].startswith("fabric gate FAIL, culprit undetermined: all 2 nodes: all_reduce_perf busbw "
                                     "0.004 GB/s, expected >= 0.1 GB/s")


def test_a_node_slow_alone_is_named_and_a_timeout_is_a_failure():
    measured = [result("alone", ["node1"], 0.3), result("alone", ["node2"], 0.31), result("alone", ["node3"], 0.02),
                result("alone", ["node4"], None, timed_out=True)]
    verdict = _fabric.judge(HOSTS, measured, BENCH, {"ratio": 0.5})
    assert [n["name"] for n in verdict["named"]] == ["node3", "node4"]
    assert "node4 alone: timed out after 1.0s" in verdict["msg"]


def test_the_baseline_sets_the_ring_expectation():
    measured = [result("alone", [h], 0.3) for h in HOSTS] + [result("all", HOSTS, 0.2)]
    verdict = _fabric.judge(HOSTS, measured, BENCH, {"ratio": 0.5, "baseline": {"all_reduce_perf": 0.5}})
    assert verdict["all_slow"] == ["all 4 nodes: all_reduce_perf busbw 0.2 GB/s, 50% of the baseline run's 0.5 GB/s"]


def test_the_report_shows_the_matrix_with_slow_pairs_shaded():
    verdict = _fabric.judge(HOSTS, slow_node3(), BENCH, {"ratio": 0.5, "across_min_busbw": {"all_reduce_perf": 0.1}})
    page = html_report({"run_id": "r", "verdict": "FAIL", "checks": [], "fabric": verdict})
    assert '<section id="fabric"><h2>Fabric gate: FAIL</h2><p>fabric gate FAIL: node3 is slow' in page
    assert '<tr><th>node3</th><td></td><td style="background:%s">0.003</td><td></td>' % _fabric_html.SLOW in page
    assert '<td style="background:%s">0.5</td>' % _fabric_html.FAST in page
    assert "Rounds: alone (4 groups, 1.0 s), all (1 groups, 1.0 s), pairs-1" in page


def test_a_report_without_a_gate_has_no_fabric_section():
    assert _fabric_html.fabric_view({}) is None
    assert 'id="fabric"' not in html_report({"run_id": "r", "verdict": "PASS", "checks": []})


def test_the_isolation_advice_is_one_exact_quoted_command():
    advice = _fabric.isolation_advice("the ranks hang in lock-step: no node singled out.", "inv/my cluster.yml",
                                      "configs/jax/a.json", "training_nodes", {"training_gpu_arch": "mi300x"})
    assert advice == ("the ranks hang in lock-step: no node singled out. To find the node or link, check each node "
                      "and measure the fabric in pairs of nodes (rccl-tests, minutes, no training): ansible-playbook "
                      "-i 'inv/my cluster.yml' clusterval.training.fabric -e training_config=configs/jax/a.json "
                      "-e training_hosts=training_nodes -e fabric_pairs=always -e training_gpu_arch=mi300x")


def test_a_benchmark_is_run_and_its_real_output_parsed(tmp_path):
    output = tmp_path / "out.txt"
    output.write_text(REAL["RT-02"])
    result = _fabric.run_benchmark(["cat", str(output)], {}, 10, "all_reduce_perf")
    assert (result["rc"], result["timed_out"], result["busbw"], result["avg_busbw"]) == (0, False, 360.98, 142.652)
    assert result["tail"][-1] == "# Collective test concluded: all_reduce_perf"


def test_a_benchmark_past_its_timeout_is_killed_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = "sleep 30 & echo $! > %s; wait" % pid_file
    result = _fabric.run_benchmark(["sh", "-c", script], {}, 0.5, "all_reduce_perf")
    assert result["timed_out"] is True and result["busbw"] is None
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        for dummy in range(50):  # the killed child is reaped by init within moments
            os.kill(child, 0)
            time.sleep(0.1)


def test_a_missing_benchmark_is_a_result_not_a_crash():
    result = _fabric.run_benchmark(["/nonexistent/all_reduce_perf"], {}, 5, "all_reduce_perf")
    assert result["rc"] is None and result["busbw"] is None and "/nonexistent/all_reduce_perf" in result["tail"][0]


def test_a_benchmark_skipped_after_a_timeout_is_a_failure_with_the_reason():
    skipped = {"round": "all", "group": {"name": "all", "hosts": HOSTS}, "rank": 0, "seconds": 40.0,
               "benchmarks": {"alltoall_perf": {"skipped": "all_reduce_perf timed out first"}}}
    assert _fabric.figure(skipped, "alltoall_perf") == (None, "not run: all_reduce_perf timed out first")
