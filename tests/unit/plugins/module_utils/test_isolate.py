"""The isolation's core: the bisection plan, judging subsets against each other and the expected rate, the
answer (a named node, a shared cause, a fault between nodes, none), and running a subset as a real process."""
import json
import os
import sys
import time

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _isolate

HEALTHY_RATE = 150.0
METRIC = "tokens_per_sec_per_gpu"


def results_doc(hosts, rate, verdict="PASS", expected=None, culprit=None, failed_checks=(), headline=None):
    """A results.json of a lock-step run: every node reports the job's pace."""
    checks = [{"node": h, "check": "threshold", "metric": METRIC, "expected": expected, "actual": rate,
               "status": "no_threshold" if expected is None else ("pass" if rate >= expected else "fail")}
              for h in hosts]
    checks += [dict(check) for check in failed_checks]
    if any(c["status"] == "fail" for c in checks):
        verdict = "FAIL"
    return {"verdict": verdict, "headline": headline, "culprit": {"host": culprit} if culprit else None,
            "checks": checks, "simulated": True,
            "summary": {"cluster": {} if rate is None else {
                METRIC: {"min": rate, "max": rate, "mean": rate, "median": rate, "nodes": len(hosts)},
                "step_time_seconds": {"max": 100.0 * HEALTHY_RATE / rate}}}}


def lockstep_runner(slow=(), factor=4.0, expected=None, hang=(), crash=None, unrunnable_below=0, calls=None):
    """Runs each group as a lock-step job would: the slowest member sets everyone's pace."""
    def runner(wave):
        if calls is not None:
            calls.append([list(g["hosts"]) for g in wave])
        for group in wave:
            hosts = group["hosts"]
            if len(hosts) < unrunnable_below:
                group.update(_isolate.measure(None, 2, ["fatal: [node1 -> localhost]: FAILED! => dcn product"],
                                              plan_failed=True), seconds=1.0)
                continue
            if set(hang) & set(hosts):
                doc = results_doc(hosts, None, "FAIL", headline="FAIL: hang: all %d nodes stopped after step 4; "
                                  "no node stands out" % len(hosts),
                                  failed_checks=[{"node": h, "check": "progress", "metric": "step", "status": "fail"}
                                                 for h in hosts])
            elif crash in hosts:
                doc = results_doc(hosts, None, "FAIL", culprit=crash, headline="FAIL: %s crash at step 3" % crash,
                                  failed_checks=[{"node": crash, "check": "errors", "metric": "crash",
                                                  "status": "fail"}])
            else:
                rate = HEALTHY_RATE / (factor if set(slow) & set(hosts) else 1.0)
                doc = results_doc(hosts, rate, expected=expected)
            group.update(_isolate.measure(doc, 0, []), seconds=30.0)
    return runner


def nodes(count):
    return ["node%d" % i for i in range(1, count + 1)]


def run(count, runner, needed=2, **kwargs):
    return _isolate.isolate(nodes(count), needed, 10.0, _isolate.default_max_rounds(count), "/runs/iso", "iso",
                            runner, **kwargs)


def groups_of(document):
    return [[g["hosts"] for g in entry["groups"]] for entry in document["rounds"]]


# ------------------------------------------------------------------ the lock-step case of the issue
def test_one_slow_node_in_a_lock_step_job_is_named_in_log2_rounds():
    calls = []
    document = run(4, lockstep_runner(slow=["node3"], calls=calls))
    conclusion = document["conclusion"]
    assert conclusion["kind"] == "named" and conclusion["named"] == ["node3"] and conclusion["failed"]
    # halves, then each node of the slow half with a node of the healthy half: never a multi-node job on one node
    assert groups_of(document) == [[["node1", "node2"], ["node3", "node4"]], [["node1", "node3"], ["node2", "node4"]]]
    # the disjoint groups of a round run at once
    assert calls == groups_of(document)
    judged = [[(g["judgement"], g["tested"], g["pad"]) for g in entry["groups"]] for entry in document["rounds"]]
    assert judged == [[("healthy", ["node1", "node2"], []), ("slow", ["node3", "node4"], [])],
                      [("slow", ["node3"], ["node1"]), ("healthy", ["node4"], ["node2"])]]
    text = conclusion["evidence"][0]["evidence"]
    assert text.startswith("node3 is bad in every group it joined: node[3-4] slow: 37.5 tokens_per_sec_per_gpu, "
                           "75% below node[1-2] (150)")
    assert "the others in those groups (node[1,4]) ran healthy without it" in text
    assert document["cleared"] == ["node1", "node2", "node4"]
    assert document["best"] == {"hosts": ["node1", "node2"], "rate": 150.0}
    lines = _isolate.report_lines(document)
    assert lines[0] == ("isolate round 1 node[1-2]: HEALTHY (step 100 s) - 150 tokens_per_sec_per_gpu (the best) "
                        "[30s]")
    assert lines[2].startswith("isolate round 2 node3 (with node1, healthy): SLOW (step 400 s) - 37.5 ")
    assert lines[4].startswith("ISOLATION: node3 named: node3 is bad in every group it joined")
    assert lines[-1] == "isolation: 2 round(s), 4 run(s), 0s: /runs/iso/isolation.json" or \
        lines[-1].startswith("isolation: 2 round(s), 4 run(s), ")
    json.dumps(document)  # isolation.json is plain JSON


@pytest.mark.parametrize("count,bad,rounds", [(8, "node6", 3), (16, "node11", 4), (5, "node5", 2)])
def test_rounds_grow_as_log2_of_the_nodes(count, bad, rounds):
    document = run(count, lockstep_runner(slow=[bad]))
    assert document["conclusion"]["named"] == [bad]
    assert len(document["rounds"]) == rounds


def test_a_single_node_config_tests_nodes_alone():
    document = run(4, lockstep_runner(slow=["node4"]), needed=1)
    assert document["conclusion"]["named"] == ["node4"]
    assert groups_of(document) == [[["node1", "node2"], ["node3", "node4"]], [["node3"], ["node4"]]]


def test_a_hang_in_lock_step_names_the_node_in_every_hanging_subset():
    document = run(4, lockstep_runner(hang=["node2"]))
    assert document["conclusion"]["named"] == ["node2"]
    assert "failed: FAIL: hang: all 2 nodes stopped after step 4" in document["conclusion"]["text"]


def test_a_culprit_the_sub_run_names_is_taken_as_it_is():
    document = run(4, lockstep_runner(crash="node1"))
    assert document["conclusion"]["named"] == ["node1"]
    assert len(document["rounds"]) == 1
    assert "the verdict of node[1-2] names it" in document["conclusion"]["text"]


def test_two_bad_nodes_in_different_quarters_are_both_named():
    document = run(8, lockstep_runner(slow=["node2", "node7"]))
    # both halves are slow alike at first: they are split further, and the healthy quarters clear the rest
    assert sorted(document["conclusion"]["named"]) == ["node2", "node7"]


# ------------------------------------------------------------------ when no node is named
def test_both_halves_slow_alike_against_the_expected_rate_is_a_shared_cause():
    document = run(4, lockstep_runner(factor=1.0, expected=HEALTHY_RATE * 2))
    conclusion = document["conclusion"]
    assert conclusion["kind"] == "shared" and conclusion["named"] == [] and conclusion["failed"]
    assert "no node stands out; the cause is shared" in conclusion["text"]
    assert "below the expected 300" in conclusion["text"]
    # halves of 2 cannot be split without a node known healthy to complete a multi-node job: one round only
    assert len(document["rounds"]) == 1
    advice = _isolate.advice(conclusion, ["inv.yml"], "configs/x.json", nodes(4))
    assert advice.endswith("ansible-playbook -i inv.yml clusterval.training.fabric -e training_config=configs/x.json "
                           "-e training_hosts=node1:node2:node3:node4 -e fabric_pairs=always")


def test_every_subset_healthy_names_nobody_and_passes():
    document = run(4, lockstep_runner())
    conclusion = document["conclusion"]
    assert conclusion["kind"] == "healthy" and not conclusion["failed"]
    assert "no subset of the nodes reproduces the fault; it needs all 4 nodes together" in conclusion["text"]
    assert _isolate.headline(conclusion).startswith("ISOLATION: no node named (healthy): every subset ran healthy")


def test_a_slow_group_of_healthy_nodes_points_between_them():
    groups = [{"name": "a", "hosts": ["node1", "node2"], "judgement": "healthy", "why": "150"},
              {"name": "b", "hosts": ["node3", "node4"], "judgement": "healthy", "why": "150"},
              {"name": "c", "hosts": ["node2", "node3"], "judgement": "slow", "why": "40, 73% below"}]
    decision = _isolate.decide(nodes(4), groups)
    assert decision["named"] == [] and decision["between"] == [groups[2]]
    conclusion = _isolate.conclude(nodes(4), decision, [], groups, True)
    assert conclusion["kind"] == "between"
    assert conclusion["text"].startswith("node[2-3] is slow (40, 73% below) while each of its nodes ran healthy")


def test_a_config_that_cannot_run_on_a_subset_says_so():
    document = run(4, lockstep_runner(unrunnable_below=3))
    conclusion = document["conclusion"]
    assert conclusion["kind"] == "undetermined"
    assert conclusion["text"] == ("no subset could run this config (node[1-2]): cannot run on this subset: "
                                  "fatal: [node1 -> localhost]: FAILED! => dcn product")


def test_the_rounds_stop_at_the_limit():
    document = _isolate.isolate(nodes(16), 2, 10.0, 2, "/r", "iso", lockstep_runner(slow=["node11"]))
    assert len(document["rounds"]) == 2
    assert document["conclusion"]["kind"] == "undetermined"
    assert "not narrowed below node[9-12]: no more rounds" in document["conclusion"]["text"]


@pytest.mark.parametrize("count,needed,mode", [(2, 2, "multi_node"), (1, 1, "single_node")])
def test_too_few_hosts_are_refused_before_any_run(count, needed, mode):
    assert _isolate.min_nodes(mode) == needed
    with pytest.raises(_isolate.IsolateError, match=r"training_hosts: .* at least %d hosts, found %d"
                       % (max(2, needed + 1), count)):
        _isolate.isolate(nodes(count), needed, 10.0, 3, "/r", "iso", lockstep_runner())


def test_duplicate_hosts_and_a_bad_minimum_are_refused():
    with pytest.raises(_isolate.IsolateError, match="distinct hosts"):
        _isolate.check_nodes(["node1", "node1", "node2"], 1)
    with pytest.raises(_isolate.IsolateError, match="isolate_min_nodes"):
        _isolate.min_nodes("multi_node", -1)
    assert _isolate.min_nodes("multi_node", 3) == 3


# ------------------------------------------------------------------ one sub-run's figures
def test_a_failure_of_its_own_is_a_failed_subset_and_a_threshold_miss_is_below_expected():
    crash = results_doc(["a", "b"], 150.0, failed_checks=[{"node": "b", "check": "errors", "metric": "crash",
                                                          "status": "fail"}], headline="FAIL: b crash at step 3")
    assert _isolate.measure(crash, 2, [])["outcome"] == "failed"
    noisy = results_doc(["a", "b"], 150.0, failed_checks=[{"node": "b", "check": "convergence", "metric": "loss",
                                                          "status": "fail"}])
    assert _isolate.measure(noisy, 2, [])["outcome"] == "measured", "a few steps' loss trend is noise"
    slow = _isolate.measure(results_doc(["a", "b"], 100.0, expected=120.0), 2, [])
    assert (slow["outcome"], slow["below_expected"], slow["expected"], slow["rate"]) == ("measured", True, 120.0, 100.0)
    gone = _isolate.measure(None, 4, ["TASK [x]", "fatal: [a]: UNREACHABLE!"], timed_out=False)
    assert gone == {"outcome": "failed", "verdict": None,
                    "detail": "stopped before its verdict (exit 4): TASK [x] fatal: [a]: UNREACHABLE!"}


def test_a_later_faster_group_turns_an_earlier_one_slow():
    groups = [dict(_isolate.measure(results_doc(["a", "b"], 100.0), 0, []), name="g1", hosts=["a", "b"])]
    _isolate.judge(groups, 10.0)
    assert groups[0]["judgement"] == "healthy"
    groups.append(dict(_isolate.measure(results_doc(["c", "d"], 150.0), 0, []), name="g2", hosts=["c", "d"]))
    _isolate.judge(groups, 10.0)
    assert [g["judgement"] for g in groups] == ["slow", "healthy"]


def test_the_log_says_when_the_plan_refused_the_subset():
    text = ("PLAY [Train and judge] ***\n\nTASK [Plan the run] ***\n"
            "fatal: [node1 -> localhost]: FAILED! => {\"msg\": \"config.dcn: expected 4 nodes, found 2\"}\n")
    tail, plan_failed = _isolate.log_facts(text)
    assert plan_failed and tail == ['fatal: [node1 -> localhost]: FAILED! => {"msg": "config.dcn: expected 4 nodes, '
                                    'found 2"}']
    assert _isolate.log_facts("TASK [Preflight | probe] ***\nfatal: [node1]: FAILED! => {}\n")[1] is False


def test_groups_sharing_a_node_wait_for_the_next_wave():
    groups = [{"hosts": ["a", "c"]}, {"hosts": ["b", "d"]}, {"hosts": ["a", "e"]}]
    assert _isolate.waves(groups) == [[groups[0], groups[1]], [groups[2]]]


# ------------------------------------------------------------------ the commands
def test_the_sub_run_keeps_the_command_s_options_and_forces_its_subset():
    cli = {"inventory": ("inv/a.yml", "inv/b.yml"), "forks": 8, "private_key_file": "/k", "remote_user": "me",
           "extra_vars": ("training_config=c.json", '{"training_hosts": "all", "fabric_enabled": true}'),
           "vault_password_files": ("/v",), "become": False}
    argv = _isolate.subrun_argv("/bin/ansible-playbook", "/coll/playbooks/train.yml", cli,
                                {"fabric_enabled": False}, {"training_hosts": "node1:node3", "training_run_dir": "/r"})
    assert argv == ["/bin/ansible-playbook", "-i", "inv/a.yml", "-i", "inv/b.yml", "--forks", "8",
                    "--private-key", "/k", "--user", "me", "--vault-password-file", "/v",
                    "/coll/playbooks/train.yml", "-e", '{"fabric_enabled": false}',
                    "-e", "training_config=c.json", "-e", '{"training_hosts": "all", "fabric_enabled": true}',
                    "-e", '{"training_hosts": "node1:node3", "training_run_dir": "/r"}']


def test_the_verdict_s_advice_is_one_exact_quoted_isolate_command():
    advice = _isolate.isolation_advice("hang: all 4 nodes stopped after step 11; no node stands out",
                                       ["inv/my cluster.yml", "extra.yml"], "configs/jax/x.json",
                                       "node1:node2:node3:node4", {"training_model": "llama3.1-70b"})
    assert advice == ("hang: all 4 nodes stopped after step 11; no node stands out. To find the node, re-run the "
                      "same config for a few steps on halves of the nodes, then halves of the bad half (about "
                      "log2(N) rounds): ansible-playbook -i 'inv/my cluster.yml' -i extra.yml "
                      "clusterval.training.isolate -e training_config=configs/jax/x.json "
                      "-e training_hosts=node1:node2:node3:node4 -e training_model=llama3.1-70b")


# ------------------------------------------------------------------ a subset run as a real process
def fake_subrun(tmp_path, body):
    script = tmp_path / "fake_playbook.py"
    script.write_text("import json, os, sys, time\nrun_dir = json.loads(sys.argv[-1])['training_run_dir']\n"
                      + body)
    return lambda group: [sys.executable, str(script), json.dumps({"training_run_dir": group["run_dir"]})]


def test_a_wave_runs_its_groups_at_once_and_reads_their_results(tmp_path):
    argv_for = fake_subrun(tmp_path, "time.sleep(1)\nprint('TASK [Training]')\n"
                           "open(os.path.join(run_dir, 'results.json'), 'w').write(%r)\n"
                           % json.dumps(results_doc(["a", "b"], 120.0)))
    wave = [{"hosts": ["a", "b"], "run_dir": str(tmp_path / "g1")},
            {"hosts": ["c", "d"], "run_dir": str(tmp_path / "g2")}]
    started = time.monotonic()
    _isolate.run_wave(wave, argv_for, timeout=60)
    assert time.monotonic() - started < 1.9, "the groups of a wave run at the same time"
    assert [(g["rc"], g["outcome"], g["rate"]) for g in wave] == [(0, "measured", 120.0)] * 2
    assert "TASK [Training]" in (tmp_path / "g1" / "ansible-playbook.log").read_text()


def test_a_sub_run_past_its_timeout_is_stopped_and_counted_failed(tmp_path):
    pid_file = tmp_path / "pid"
    argv_for = fake_subrun(tmp_path, "open(%r, 'w').write(str(os.getpid()))\ntime.sleep(60)\n" % str(pid_file))
    wave = [{"hosts": ["a", "b"], "run_dir": str(tmp_path / "g1")}]
    _isolate.run_wave(wave, argv_for, timeout=1.5)
    assert wave[0]["outcome"] == "failed" and wave[0]["detail"].startswith("timed out")
    pid = int(pid_file.read_text())
    assert not os.path.exists("/proc/%d" % pid) or "zombie" in open("/proc/%d/status" % pid).read().lower()
