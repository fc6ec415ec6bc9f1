"""The training_report callback through real ansible-playbook runs, and the HTML in headless Chromium."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from types import SimpleNamespace

import pytest

from ansible_collections.clusterval.training.plugins.callback import training_report
from ansible_collections.clusterval.training.plugins.module_utils import _report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(REPO, "tests", "integration", "targets", "report", "report.yml")
LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
BIN = os.path.dirname(sys.executable)
CHROMIUM = "/usr/bin/chromium"


def environment():
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                PATH=os.pathsep.join([BIN, os.environ.get("PATH", "")]))


def run_playbook(tmp_path, node_logs, simulated=False):
    run_dir = tmp_path / "run"
    command = [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", PLAYBOOK,
               "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "fixture_dir=%s" % LOGS,
               "-e", "run_dir=%s" % run_dir, "-e", json.dumps({"node_logs": node_logs, "simulated": simulated})]
    done = subprocess.run(command, capture_output=True, text=True, env=environment(), cwd=REPO, check=False)
    return done, run_dir


@pytest.fixture(scope="module")
def passed_run(tmp_path_factory):
    return run_playbook(tmp_path_factory.mktemp("pass"), {"node1": "maxtext_node1.log", "node2": "maxtext_node2.log"})


def test_pass_run_writes_reports_and_prints_the_verdict_table(passed_run):
    done, run_dir = passed_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TRAINING VERDICT" in done.stdout and "VERDICT: PASS" in done.stdout
    assert "node2  threshold    tokens_per_sec_per_gpu  8000" in done.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "PASS" and results["simulated"] is False
    assert sorted(results["series"]) == ["node1", "node2"]
    assert results["series"]["node1"]["loss"][-1][0] == 29
    assert results["summary"]["nodes"]["node2"]["last_step"] == 29
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert len(suite.findall("testcase")) == len(results["checks"]) and suite.get("failures") == "0"


def test_failed_run_fails_the_play_with_readable_lines(tmp_path):
    done, run_dir = run_playbook(tmp_path, {"node1": "maxtext_node1.log", "node2": "maxtext_crash_node2.log"})
    assert done.returncode == 2
    log = os.path.join(LOGS, "maxtext_crash_node2.log")
    assert "node2: crash at line 82 of %s: Fatal Python error: Segmentation fault" % log in done.stdout
    assert "VERDICT: FAIL" in done.stdout
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    messages = [f.get("message") for f in suite.iter("failure")]
    assert "stopped at step 12 of 29" in messages
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "FAIL"


def test_simulated_run_is_labelled(tmp_path):
    done, run_dir = run_playbook(tmp_path, {"node1": "maxtext_simulated_node1.log", "node2": "maxtext_node2.log"})
    assert done.returncode == 0, done.stdout
    assert "VERDICT: PASS (SIMULATED)" in done.stdout
    assert json.loads((run_dir / "results.json").read_text())["simulated"] is True
    assert "SIMULATED RUN" in (run_dir / "report.html").read_text()


def test_training_log_from_the_command_line():
    command = [os.path.join(BIN, "ansible"), "localhost", "-m", "clusterval.training.training_log",
               "-a", "path=%s framework=auto" % os.path.join(LOGS, "maxtext_node1.log"),
               "-e", "ansible_python_interpreter=%s" % sys.executable]
    done = subprocess.run(command, capture_output=True, text=True, env=environment(), cwd=REPO, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"framework": "maxtext"' in done.stdout and '"last_step": 29' in done.stdout


def png_pixels(path):
    """RGB(A) 8-bit non-interlaced PNG -> (width, height, channels, rows of bytes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, dummy, dummy, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(b"".join(chunks)), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def count_colour(pixels, hex_colour):
    width, dummy, channels, rows = pixels
    target = bytes.fromhex(hex_colour.lstrip("#"))
    return sum(1 for row in rows for x in range(width) if row[x * channels:x * channels + 3] == target)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")
def test_report_html_renders_the_curves_in_headless_chromium(passed_run, tmp_path):
    dummy, run_dir = passed_run
    shot = tmp_path / "report.png"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=1000,900", "--screenshot=%s" % shot,
               "file://%s" % (run_dir / "report.html")]
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    pixels = png_pixels(str(shot))
    assert count_colour(pixels, _report.LOSS_COLOURS[0]) > 200
    assert count_colour(pixels, _report.THROUGHPUT_COLOURS[0]) > 200
    assert count_colour(pixels, "#ff00ff") == 0


class FakeDisplay:
    def __init__(self):
        self.lines = []

    def display(self, text, **_):
        self.lines.append(text)

    def banner(self, text, **_):
        self.lines.append(text)

    def warning(self, text, **_):
        self.lines.append("WARNING " + text)


def fake_result(action, data, host="node1"):
    return SimpleNamespace(result=data, task=SimpleNamespace(action=action),
                           host=SimpleNamespace(get_name=lambda: host))


def test_progress_line_per_watch_retry():
    callback = training_report.CallbackModule()
    callback._display = FakeDisplay()
    progress = {"step": 12, "final_step": 29, "tokens_per_sec": 8672.4, "loss": 10.374, "eta_s": 72}
    callback.v2_runner_retry(fake_result("clusterval.training.training_watch", {"progress": progress, "done": False}))
    callback.v2_runner_retry(fake_result("ansible.builtin.command", {"progress": progress}))
    assert callback._display.lines == ["[node1] step 12/29  8672 tok/s/gpu  loss 10.374  ETA 0:01:12"]


def test_progress_line_before_the_first_step_and_when_done():
    line = training_report.progress_line("node2", {"progress": {"final_step": 29}, "done": True, "reason": "hang"})
    assert line == "[node2] step -/29  - tok/s/gpu  loss -  ETA -:--:--  done (hang)"


def test_unwritable_run_dir_is_a_warning_not_a_crash(tmp_path):
    callback = training_report.CallbackModule()
    callback._display = FakeDisplay()
    blocker = tmp_path / "file"
    blocker.write_text("")
    data = {"checks": [], "verdict": "FAIL", "run_dir": str(blocker / "run"), "series": {}}
    callback.v2_runner_on_failed(fake_result("clusterval.training.training_assert", data))
    assert callback._display.lines[0].startswith("WARNING training_report: cannot write the report files")


def test_training_assert_names_a_bad_node_entry():
    command = [os.path.join(BIN, "ansible"), "localhost", "-m", "clusterval.training.training_assert",
               "-a", json.dumps({"plan": {"final_step": 3}, "nodes": {"node1": "not a result"}})]
    done = subprocess.run(command, capture_output=True, text=True, env=environment(), cwd=REPO, check=False)
    assert done.returncode != 0
    assert "nodes.node1: expected a dict with steps, errors, exit_code, found 'not a result'" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
