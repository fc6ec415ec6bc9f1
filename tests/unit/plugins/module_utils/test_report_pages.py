"""The reports as a reader gets them, against results.json: the HTML page as headless Chromium renders it (its
visible text, its tables, its links), the console's verdict block and JUnit, for a PASS, a crash, a hang and an
interrupt, at 2 nodes (results.json of real runs on the simulated cluster, tests/fixtures/reports/) and at 64
(synthetic documents judged by the real _metrics.evaluate)."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser import CHROMIUM, Browser, table_rows
from synthetic_results import synthetic_document

from ansible_collections.clusterval.training.plugins.module_utils import _console, _report

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "reports"
SYNTHETIC = {
    "pass64": dict(stragglers=()), "crash64": dict(crash_at=41), "hang64": dict(hang_at=30, stragglers=()),
    "interrupt64": dict(interrupt_at=20, stragglers=()),
}
STOPPED = ("errors", "exit_code", "progress", "completion")
CASES = ["pass2", "crash2", "hang2", "interrupt2"] + sorted(SYNTHETIC)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium to render the page")


def document_of(case):
    if case in SYNTHETIC:
        return synthetic_document(64, 60, **SYNTHETIC[case])
    return json.loads((FIXTURES / ("%s.json" % case[:-1])).read_text())


def collected(document):
    """The nodes whose log the run's teardown collected (an interrupted run's: none)."""
    teardown = document.get("teardown") or {}
    return [host for host, outcome in teardown.items() if (outcome or {}).get("log_bytes") and
            not (outcome or {}).get("log_error")]


def failed_nodes(document):
    """check label -> the nodes that failed it, from results.json."""
    found = {}
    for check in document["checks"]:
        if check["status"] == "fail":
            label = check["check"] if check.get("metric") in (None, "", check["check"]) else "%s %s" % (
                check["check"], check["metric"])
            found.setdefault(label, set()).add(check["node"])
    return found


def nodes_of(document):
    return {check["node"] for check in document["checks"]}


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no chromium to render the page")
    opened = Browser()
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, browser):
    """case -> (document as written, run directory, page as rendered), the reports written as the results role
    writes them, each case once per module."""
    done = {}

    def render(case):
        if case not in done:
            document = document_of(case)
            run_dir = tmp_path_factory.mktemp(case)
            for host in collected(document):
                (run_dir / "logs" / host).mkdir(parents=True)
                (run_dir / "logs" / host / "training.log").write_text("the node's log\n")
            _report.write_reports(str(run_dir), document)
            done[case] = (json.loads((run_dir / "results.json").read_text()), run_dir,
                          browser.read(str(run_dir / "report.html")))
        return done[case]
    return render


@needs_chromium
@pytest.mark.parametrize("case", CASES)
def test_the_checks_table_lists_every_failed_check_once_with_every_node_that_failed_it(rendered, case):
    document, dummy, page = rendered(case)
    expected = failed_nodes(document)
    rows = [row for row in table_rows(page, "Checks") if row[1] == "fail"]
    assert sorted(row[0] for row in rows) == sorted(expected)
    for label, status, nodes in rows:
        count, of = map(int, re.search(r"\((\d+) of (\d+)\)", nodes).groups())
        assert (count, of) == (len(expected[label]), len(nodes_of(document))), (label, nodes)
    culprit = (document.get("culprit") or {}).get("host")
    if culprit:
        culprit_labels = sorted(label for label, hosts in expected.items() if culprit in hosts)
        assert sorted(row[0] for row in rows[:len(culprit_labels)]) == culprit_labels, "the culprit's checks first"
        assert all("%s culprit" % culprit in row[2] for row in rows[:len(culprit_labels)])
        if any("checks, by node" in (table["heading"] or "") for table in page["tables"]):   # open up to 40 checks
            assert table_rows(page, "checks, by node")[0][0] == culprit, "Every check: the culprit's first"
        assert table_rows(page, "Failures")[0][0].startswith("%s culprit" % culprit)
    # How a stopped node ended is the cause's doing; what it measured while it ran (its throughput) is its own.
    for row in rows:
        consequences = set(document.get("consequences") or []) & expected[row[0]]
        if row[0].split()[0] in STOPPED and (consequences or (document.get("stop") or {}).get("interrupted")):
            assert "stopped as a consequence of " in row[2], row


@needs_chromium
@pytest.mark.parametrize("case", CASES)
def test_the_failures_heading_and_the_passed_rows_count_what_results_json_has(rendered, case):
    document, dummy, page = rendered(case)
    failed = [c for c in document["checks"] if c["status"] == "fail"]
    if failed:
        heading = re.search(r"Failures (\d+) failed checks? on (\d+) nodes?", page["text"])
        assert heading and tuple(map(int, heading.groups())) == (len(failed), len({c["node"] for c in failed}))
        # Each row is one check on its nodes: the culprit's rows one node each, the others "(k of N)", "(k nodes)".
        rows = [row for row in table_rows(page, "Failures") if len(row) == 3]
        counted = [int(re.search(r"\((\d+) (?:of \d+|nodes?)\)", row[0]).group(1)) if "culprit" not in row[0] else 1
                   for row in rows]
        assert sum(counted) == len(failed), rows
    for label, status, nodes in table_rows(page, "Checks"):
        if status == "pass":
            passed = [c for c in document["checks"] if c["status"] == "pass" and label.startswith(c["check"])
                      and (c.get("metric") in (None, c["check"]) or label.endswith(str(c["metric"])))]
            assert nodes.startswith("all %d" % len(passed)), (label, nodes)


@needs_chromium
@pytest.mark.parametrize("case", [case for case in CASES if case.endswith("2")])   # real runs have a timeline
def test_the_stage_cards_say_where_the_run_failed_and_never_guess_a_time(rendered, case):
    document, dummy, page = rendered(case)
    stages = {stage["stage"]: stage["outcome"] for stage in document["stages"]}
    cards = page["text"][page["text"].index("plan\n"):]
    assert "?" not in "".join(line for line in cards.splitlines() if "→" in line or line.startswith(("from", "until")))
    if case.startswith(("crash", "hang")):
        assert stages["training"] == "failed" and "✕ training\nfailed" in page["text"]
        assert "✓ training" not in page["text"]
    if case.startswith("interrupt"):
        assert stages["training"] == "interrupted" and "■ training\ninterrupted" in page["text"]
    if case.startswith("pass"):
        assert set(stages.values()) <= {"ok", "skipped"}


@needs_chromium
@pytest.mark.parametrize("case", CASES)
def test_every_log_link_is_a_log_that_was_collected(rendered, case):
    document, run_dir, page = rendered(case)
    logs = [link for link in page["links"] if link.startswith("logs/")]
    assert all((run_dir / link).is_file() for link in logs), logs
    assert len(set(logs)) == len(collected(document))
    if not collected(document):
        assert "log not collected" in page["text"]


@needs_chromium
@pytest.mark.parametrize("case", ["interrupt2", "interrupt64"])
def test_an_interrupted_run_says_the_fabric_gate_ran_and_that_every_stop_was_the_interrupts_doing(rendered, case):
    document, dummy, page = rendered(case)
    stages = {stage["stage"]: stage["outcome"] for stage in document.get("stages") or []}
    if document.get("fabric"):
        assert stages["fabric"] == "ok" and "– fabric\nskipped" not in page["text"]
    assert "stopped as a consequence of the interrupt (SIGINT)" in page["text"]


@needs_chromium
@pytest.mark.parametrize("case", ["pass2", "pass64"])
def test_a_pass_without_thresholds_says_how_to_set_them_with_the_exact_names(rendered, case):
    document, dummy, page = rendered(case)
    assert document["headline"].startswith("PASS (throughput not judged")
    keep = "ansible-playbook clusterval.training.keep_baseline -e training_run_dir=%s -e training_baseline=" % (
        document["run_dir"])
    assert keep in page["text"]
    for item in document["unjudged"]:
        if item.get("path"):
            assert item["path"] in page["text"]


@needs_chromium
def test_a_straggler_limit_that_cannot_fail_is_said_and_never_drawn(browser, tmp_path):
    """The validation suite's own limit, 1000 % of the median: the floor is below zero, no throughput leaves it."""
    document = synthetic_document(64, 60, stragglers=(), straggler_pct=1000.0)
    _report.write_reports(str(tmp_path), document)
    page = browser.read(str(tmp_path / "report.html"))
    row = [r for r in table_rows(page, "Checks") if r[0] == "straggler tokens_per_sec_per_gpu"]
    assert row and row[0][1] == "cannot fail" and "limit 1000% below the median" in row[0][2]
    assert "expected -" not in page["text"] and "straggler limit -1000" not in page["text"]
    assert "straggler limit 1000%: a check that cannot fail" in page["text"]
    assert not re.search(r"^-\d+$", page["text"], re.M), "no axis tick below zero"
    lines = _console.verdict_lines(document)
    assert not any("expected -" in line for line in lines)
    assert any(line.startswith("straggler tokens_per_sec_per_gpu cannot fail") for line in lines)
    suite = ET.fromstring(_report.junit_xml(document)).find("testsuite")
    skipped = [case for case in suite.findall("testcase") if case.get("name") == "straggler tokens_per_sec_per_gpu"]
    assert skipped[0].find("skipped").get("message").startswith("straggler tokens_per_sec_per_gpu cannot fail")


@pytest.mark.parametrize("case", CASES)
def test_the_console_and_junit_count_as_results_json_does(case):
    document = document_of(case)
    text = "\n".join(_console.verdict_lines(document))
    consequences = set(document.get("consequences") or [])
    stopped = re.search(r"stopped as a consequence of (.+) \((\d+) of (\d+) nodes\):", text)
    if consequences:
        assert stopped and int(stopped.group(2)) == len(consequences - {(document.get("culprit") or {}).get("host")})
        assert int(stopped.group(3)) == len(nodes_of(document))
    suite = ET.fromstring(_report.junit_xml(document)).find("testsuite")
    cases = suite.findall("testcase")
    failing = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert bool(failing) == (document["verdict"] == "FAIL")
    culprit = (document.get("culprit") or {}).get("host")
    if culprit:
        assert cases[0].get("name").startswith("culprit: ") and culprit in cases[0].find("failure").text
        assert "stopped as a consequence of %s" % culprit in cases[1].find("failure").get("message")
    if document["headline"].startswith("PASS (throughput not judged"):
        skipped = [c.find("skipped").get("message") for c in cases if c.find("skipped") is not None]
        assert any("clusterval.training.keep_baseline" in message for message in skipped)
