from __future__ import annotations

from synthetic_results import synthetic_document

from ansible_collections.clusterval.training.plugins.module_utils import _console


def cluster_result(**progress):
    base = {"nodes": 512, "running": 512, "done": 0, "failed": 0, "step": {"min": 11, "median": 12, "max": 12},
            "final_step": 29, "rate": {"median": 8672.4, "p10": 8500.0, "min": 7012.0},
            "rate_metric": "tokens_per_sec_per_gpu", "loss_median": 9.1, "eta_s": 72.0, "elapsed_s": 40.0,
            "slowest": [{"host": "node017", "step": 11, "rate": 7012.0}, {"host": "node003", "step": 11, "rate": 7100.0}]}
    base.update(progress)
    return {"done": False, "failed": False, "reason": "running", "msg": "", "simulated": True, "progress": base,
            "failures": []}


def test_cluster_line_has_bar_steps_eta_rate_counts_and_the_slowest():
    line = _console.cluster_line(cluster_result())
    assert line == "[####------] 12/29 (11-12) ETA 1m12s 8672 tok/s/GPU 0/512 done slow node017@11"
    assert len(line) <= 80


def test_cluster_line_fits_80_columns_with_long_host_names_and_failures():
    slow = [{"host": "gpu-node-%04d.rack17.cluster.example.com" % i, "step": 3, "rate": 10.0} for i in range(5)]
    line = _console.cluster_line(cluster_result(failed=3, done=3, slowest=slow, eta_s=7322.0))
    assert len(line) <= 80 and "3/512 done 3 FAILED" in line and "ETA 2h02m" in line
    assert "slow" not in line                     # no room for even one of these names
    short = [dict(s, host="n%d" % i) for i, s in enumerate(slow)]
    assert _console.cluster_line(cluster_result(slowest=short)).endswith("0/512 done slow n0@3 n1@3")


def test_cluster_line_before_the_first_step_and_when_done():
    early = cluster_result(step={"min": None, "median": None, "max": None}, rate={}, eta_s=None, slowest=[])
    assert _console.cluster_line(early) == "[----------] -/29 ETA ? - tok/s/GPU 0/512 done"
    gang = cluster_result(step={"min": None, "median": None, "max": None}, rate={}, eta_s=None, slowest=[],
                          phase="waiting for the gang")
    assert _console.cluster_line(gang) == "[----------] -/29 waiting for the gang - tok/s/GPU 0/512 done"
    finished = dict(cluster_result(done=512, step={"min": 29, "median": 29, "max": 29}), done=True)
    assert _console.cluster_line(finished).startswith("[##########] 29/29 ETA - 8672 tok/s/GPU 512/512 done")


def test_cluster_line_names_the_rate_unit_of_the_metric():
    line = _console.cluster_line(cluster_result(rate_metric="throughput_per_gpu", rate={"median": 412.3}))
    assert "412 TFLOP/s/GPU" in line


def test_a_slow_node_at_the_median_step_is_named_without_a_step():
    result = cluster_result(step={"min": 12, "median": 12, "max": 12}, slowest=[{"host": "node9", "step": 12}])
    assert _console.cluster_line(result).endswith(" slow node9")
    wide = _console.cluster_line(cluster_result(), width=120)
    assert wide.endswith(" slow node017@11 node003@11")


def test_is_cluster_progress():
    assert _console.is_cluster_progress(cluster_result())
    assert not _console.is_cluster_progress({"progress": {"step": 3, "final_step": 29}})
    assert not _console.is_cluster_progress({})


def test_node_line_of_the_older_per_node_shape():
    data = {"progress": {"step": 12, "final_step": 29, "tokens_per_sec": 8672.4, "loss": 10.374, "eta_s": 72}}
    assert _console.node_line("node1", data) == "[node1] step 12/29  8672 tok/s/gpu  loss 10.374  ETA 0:01:12"
    line = _console.node_line("node2", {"progress": {"final_step": 29}, "done": True, "reason": "hang"})
    assert line == "[node2] step -/29  - tok/s/gpu  loss -  ETA -:--:--  done (hang)"


def test_nodes_summary_of_per_node_results_is_the_cluster_line():
    latest = {"node%d" % i: {"host": "node%d" % i, "progress": {"step": 10 + i, "final_step": 29,
                                                                "tokens_per_sec": 8000.0 + i, "eta_s": 60 - i}}
              for i in range(1, 12)}
    latest["node3"] = dict(latest["node3"], done=True, failed=True)
    line = _console.nodes_summary(latest)
    assert line == "[######----] 16/29 (11-21) ETA 0m59s 8006 tok/s/GPU 1/11 done 1 FAILED"
    assert _console.nodes_summary(latest, width=100).endswith("1 FAILED slow node1@11 node2@12")


def test_failure_line_names_the_host_once():
    assert _console.failure_line({"host": "node3", "msg": "node3: crash at step 3"}) == "FAILED node3: crash at step 3"
    assert _console.failure_line({"host": "node3", "reason": "hang"}) == "FAILED node3: hang"
    assert len(_console.failure_line({"host": "n", "msg": "x" * 300})) == 80


def test_verdict_at_512_nodes_is_a_screenful_led_by_the_culprit():
    lines = _console.verdict_lines(synthetic_document(512, 60, crash_at=41, stragglers=(5, 40, 300)))
    assert len(lines) <= 40 and max(len(line) for line in lines) <= 80
    assert lines[0].startswith("FAIL: node017 crash at step 41: jaxlib.xla_extension.XlaRuntimeError")
    assert lines[3] == "culprit: node017, crash at step 41 (log line 4117)"
    assert lines[4].startswith("    jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RCCL")
    text = "\n".join(lines)
    assert "  511 other nodes stopped as a consequence: node[001-016,018-512]" in text
    assert "  threshold tokens_per_sec_per_gpu  node[005,040,300] (3 of 512)" in text
    assert "    (+1 more in results.json)" in text
    # Under the consequences, each check counts its nodes; the heading says how many of the run's.
    assert "stopped as a consequence of node017 (511 of 512 nodes):" in text
    assert "  errors coordination               node[001-016,018-512] (511 nodes)" in text
    assert "passed on every node:\n  convergence loss                  all 512" in text
    assert text.endswith("  threshold tflops_per_sec_per_gpu  no threshold set, 512 nodes: 364.7..456.8")
    order = [text.index(word) for word in ("culprit:", "failed on their own:", "stopped as a consequence of node017",
                                           "passed on every node:", "not judged:")]
    assert order == sorted(order)


def test_verdict_of_a_pass_with_throughput_not_judged():
    lines = _console.verdict_lines(synthetic_document(2, 30, stragglers=()))
    assert lines[0] == "PASS (throughput not judged: no thresholds for tflops_per_sec_per_gpu)"
    assert lines[1] == "  (SIMULATED)"
    assert "  threshold tokens_per_sec_per_gpu  all 2: " in "\n".join(lines)


def test_verdict_of_an_older_document():
    lines = _console.verdict_lines(synthetic_document(64, 30, legacy=True, simulated=False))
    assert lines[0].startswith("FAIL: node005: tokens_per_sec_per_gpu")
    assert "failed:" in lines and "culprit:" not in "\n".join(lines)


def test_verdict_lists_unjudged_metrics_without_checks():
    doc = synthetic_document(2, 30, stragglers=())
    doc["unjudged"].append({"metric": "step_time_p95_ms", "reason": "no threshold for this stack"})
    assert "  step_time_p95_ms: no threshold for this stack" in _console.verdict_lines(doc)


def test_wrapped_breaks_long_words_and_cuts():
    lines = _console.wrapped("x" * 500, 40, "  ", 3)
    assert len(lines) == 3 and all(len(line) <= 40 for line in lines) and lines[-1].endswith("...")
    assert _console.wrapped("", 40, "", 3) == []


def test_the_verdict_names_where_the_threshold_cell_differs_from_the_run():
    doc = synthetic_document(2, 20, stragglers=())
    doc["threshold_file"] = {"cell": "NNODES=2,GBS=128", "differences_text": ["GBS: the cell says 128, this run has 32"]}
    lines = _console.verdict_lines(doc)
    assert lines[-2:] == ["threshold cell NNODES=2,GBS=128 is for another run:",
                          "  GBS: the cell says 128, this run has 32"]
    del doc["threshold_file"]
    assert not any(line.startswith("threshold cell") for line in _console.verdict_lines(doc))


def test_the_next_step_is_printed_with_its_whole_command():
    from ansible_collections.clusterval.training.plugins.module_utils import _fabric
    advice = _fabric.isolation_advice("hang: all 4 nodes stopped after step 11; no node stands out",
                                      "inventories/x.yml", "/c/a b.json", "node1:node2")
    doc = {"verdict": "FAIL", "headline": "FAIL: hang: all 4 nodes stopped after step 11; no node stands out",
           "advice": advice, "checks": [], "failures": [], "summary": {"nodes": {}, "cluster": {}}}
    lines = _console.verdict_lines(doc)
    assert "next step: To find the node or link, check each node" in lines[1], lines
    command = [line for line in lines if line.startswith("  ansible-playbook ")]
    assert command == ["  ansible-playbook -i inventories/x.yml clusterval.training.fabric -e "
                       "'training_config=/c/a b.json' -e training_hosts=node1:node2 -e fabric_pairs=always"]
