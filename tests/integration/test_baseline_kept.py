"""Issue 32 on the simulated cluster: a PASS whose throughput was not judged says how to judge it, and the one
command it prints keeps the run as the baseline that the next run is judged against; that run's page, as headless
Chromium renders it, agrees with its results.json."""
from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
from browser import CHROMIUM, Browser, table_rows

from test_train_e2e import ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, assert_no_training_container, results, run_train

pytestmark = pytest.mark.cluster


def printed(stdout: str, start: str) -> str:
    """The command of the verdict block's line ``  - <start>: <command>``."""
    found = [line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("  - %s: " % start)]
    assert found, stdout[-3000:]
    return found[-1]


def test_a_pass_kept_as_the_baseline_in_one_command_judges_the_next_run(simcluster, tmp_path):
    nodes = simcluster.nodes[:2]
    first = run_train(simcluster, JAX_MULTI, tmp_path / "first", nodes)
    assert first.returncode == 0, first.stdout[-3000:]
    assert results(tmp_path / "first")["headline"].startswith("PASS (throughput not judged")
    # The report names the config's key, and the command that keeps this run as the baseline.
    assert 'result_dict.tokens_per_sec_per_gpu' in printed(first.stdout, "the config " + str(REPO / JAX_MULTI))
    keep = shlex.split(printed(first.stdout, "this run as the baseline"))
    assert keep[:2] == ["ansible-playbook", "clusterval.training.keep_baseline"], keep
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    kept = subprocess.run([ANSIBLE_PLAYBOOK] + keep[1:], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert kept.returncode == 0, kept.stdout[-3000:]
    baseline = re.search(r"-e training_baseline=(\S+)", printed(first.stdout, "then, on the next run")).group(1)
    assert os.path.isfile(baseline) and "the next run judges against it with -e training_baseline=%s" % baseline \
        in kept.stdout

    second = run_train(simcluster, JAX_MULTI, tmp_path / "second", nodes, more_vars={"training_baseline": baseline})
    assert second.returncode == 0, second.stdout[-3000:]
    document = results(tmp_path / "second")
    assert "tokens_per_sec_per_gpu" in document["judged"] and document["baseline"]["path"] == baseline
    assert "not judged" not in document["headline"], document["headline"]
    assert_no_training_container(simcluster, nodes)
    if CHROMIUM is None:
        return
    browser = Browser()
    try:
        page = browser.read(str(tmp_path / "second" / "report.html"))
    finally:
        browser.close()
    row = [r for r in table_rows(page, "Checks") if r[0] == "threshold tokens_per_sec_per_gpu"]
    assert row and row[0][1] == "pass" and row[0][2].startswith("all 2"), row
    assert "Thresholds from the baseline run %s" % results(tmp_path / "first")["run_id"] in page["text"]
    assert "To judge" not in page["text"]


def test_keep_baseline_refuses_a_run_that_failed(tmp_path):
    """Only a known-good run becomes the baseline: a FAIL is refused, naming its headline; nothing is written."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    source = REPO / "tests" / "fixtures" / "reports" / "crash.json"
    (run_dir / "results.json").write_text(source.read_text())
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "clusterval.training.keep_baseline", "-e", "training_run_dir=%s" % run_dir,
                           "-e", "training_baseline=%s" % (tmp_path / "kept.json")], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "expected a run that passed with steady means (summary.cluster), found FAIL: node2 network" in done.stdout
    assert not (tmp_path / "kept.json").exists()
