"""The training_report callback through real ansible-playbook runs, and the HTML in headless Chromium
(the 2-node report of a real run, and a synthetic 64-node report with a culprit and stragglers)."""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

import pytest
from lxml import etree
from synthetic_results import synthetic_document

from ansible_collections.clusterval.training.plugins.module_utils import _report, _report_html

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(REPO, "tests", "integration", "targets", "report", "report.yml")
LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
BIN = os.path.dirname(sys.executable)
CHROMIUM = "/usr/bin/chromium"
JUNIT_SCHEMA = os.path.join(REPO, "tests", "fixtures", "junit", "junit-10.xsd")


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


def test_pass_run_writes_reports_and_prints_the_verdict(passed_run):
    done, run_dir = passed_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TRAINING VERDICT" in done.stdout and "VERDICT: PASS" in done.stdout
    assert "passed on every node:" in done.stdout
    assert re.search(r"\n  threshold tokens_per_sec_per_gpu +all 2: \d+\.\.\d+ \(expected 8000\)\n", done.stdout)
    assert re.search(r"\n  threshold tflops_per_sec_per_gpu +no threshold set, 2 nodes", done.stdout)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "PASS" and results["simulated"] is False
    assert sorted(results["series"]) == ["node1", "node2"]
    assert results["series"]["node1"]["loss"][-1][0] == 29
    assert results["summary"]["nodes"]["node2"]["last_step"] == 29
    assert results["schema_version"] == 1 and results["headline"].startswith("PASS")
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert 0 < len(suite.findall("testcase")) <= len(results["checks"]) and suite.get("failures") == "0"
    assert suite.get("errors") == "0"
    etree.XMLSchema(etree.parse(JUNIT_SCHEMA)).assertValid(etree.parse(str(run_dir / "junit.xml")))


def test_failed_run_fails_the_play_with_readable_lines(tmp_path):
    done, run_dir = run_playbook(tmp_path, {"node1": "maxtext_node1.log", "node2": "maxtext_crash_node2.log"})
    assert done.returncode == 2
    log = os.path.join(LOGS, "maxtext_crash_node2.log")
    assert "node2: crash at line 82 of %s: Fatal Python error: Segmentation fault" % log in done.stdout
    assert "VERDICT: FAIL: node2 crash at step 12: Fatal Python error: Segmentation fault\n" in done.stdout
    assert "\nculprit: node2, crash at step 12 (log line 82)\n    Fatal Python error: Segmentation fault\n" in done.stdout
    assert "\n  also failed: completion step\n" in done.stdout
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    culprit = suite.find("testcase")
    assert culprit.get("classname") == "clusterval.training.culprit" and culprit.get("name").startswith("culprit: ")
    assert "node2: stopped at step 12 of 29" in culprit.find("failure").text
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "FAIL"


def test_simulated_run_is_labelled(tmp_path):
    done, run_dir = run_playbook(tmp_path, {"node1": "maxtext_simulated_node1.log", "node2": "maxtext_node2.log"})
    assert done.returncode == 0, done.stdout
    assert re.search(r"\nVERDICT: PASS \(throughput not judged: [^\n]*\) \(SIMULATED\)\n", done.stdout)
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


def screenshot(page, shot, profile, width=1280, height=2400):
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", "--user-data-dir=%s" % profile, "--window-size=%d,%d" % (width, height),
               "--screenshot=%s" % shot, "file://%s" % page]
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    return png_pixels(str(shot))


needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")


@needs_chromium
def test_report_html_renders_the_curves_in_headless_chromium(passed_run, tmp_path):
    dummy, run_dir = passed_run
    pixels = screenshot(run_dir / "report.html", tmp_path / "report.png", tmp_path / "profile", 1000, 1600)
    assert count_colour(pixels, "#dafbe1") > 5000                       # the PASS verdict box
    assert count_colour(pixels, _report_html.PALETTE[0]) > 100          # node1's curves
    assert count_colour(pixels, _report_html.PALETTE[1]) > 100          # node2's curves
    assert count_colour(pixels, "#ff00ff") == 0


@pytest.fixture(scope="module")
def report_64(tmp_path_factory):
    """The synthetic 64-node run: node017 crashes at step 41, the rest stop; node005 and node040 are 15 %
    slow; tflops has no threshold. A log line of 400 characters without a space must wrap."""
    document = synthetic_document(64, 60, crash_at=41)
    document["checks"][0]["detail"] += " " + "x" * 400
    run_dir = tmp_path_factory.mktemp("report64")
    _report.write_reports(str(run_dir), document)
    return run_dir / "report.html"


@needs_chromium
def test_64_node_report_in_headless_chromium(report_64, tmp_path):
    pixels = screenshot(report_64, tmp_path / "report64.png", tmp_path / "profile")
    assert count_colour(pixels, "#fff3b0") > 5000                       # the SIMULATED banner
    assert count_colour(pixels, "#ffebe9") > 5000                       # the FAIL verdict and culprit rows
    assert count_colour(pixels, _report_html.BAND_COLOUR) > 2000        # the p10-p90 band
    assert count_colour(pixels, _report_html.MEDIAN_COLOUR) > 300       # the median curves
    page = report_64.read_text()
    for host in ("node005", "node040"):                                 # the stragglers' grid cells, in red
        colour = re.search(r'style="background:(#[0-9a-f]{6});[^"]*" title="%s: ' % host, page).group(1)
        assert int(colour[1:3], 16) > int(colour[5:7], 16) + 80 and count_colour(pixels, colour) > 400
    assert count_colour(pixels, "#ff00ff") == 0


@needs_chromium
def test_64_node_report_has_no_horizontal_overflow(report_64, tmp_path):
    """Rendered 800 pixels wide, nothing may reach the 24-pixel right padding of the page."""
    width, height, channels, rows = screenshot(report_64, tmp_path / "narrow.png", tmp_path / "profile", 800, 3000)
    strip = [row[x * channels:x * channels + 3] for row in rows for x in range(width - 20, width - 4)]
    assert sum(1 for pixel in strip if pixel != b"\xff\xff\xff") == 0


def test_training_assert_names_a_bad_node_entry():
    command = [os.path.join(BIN, "ansible"), "localhost", "-m", "clusterval.training.training_assert",
               "-a", json.dumps({"plan": {"final_step": 3}, "nodes": {"node1": "not a result"}})]
    done = subprocess.run(command, capture_output=True, text=True, env=environment(), cwd=REPO, check=False)
    assert done.returncode != 0
    assert "nodes.node1: expected a dict with steps, errors, exit_code, found 'not a result'" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
