"""The controller's own faults are named as the controller's, never as a node's (issue 19).

The run directory on a tiny tmpfs on the controller (`mount -t tmpfs -o size=...`): the disk fills, as a real
controller's does. Real ansible-playbook, SSH and Docker daemons on 4 simulated nodes; each test ends with a
check that nothing is left running on the nodes and that their locks are gone."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_safety import teardown
from test_train_e2e import JAX_MULTI, assert_no_training_container, run_train, training_underway

pytestmark = pytest.mark.cluster

FAULT = "controller: cannot write the run directory %s: No space left on device"


@pytest.fixture
def nodes(simcluster) -> list[str]:
    chosen = simcluster.nodes[:4]
    teardown(simcluster, chosen)
    return chosen


@pytest.fixture
def tiny_disk(tmp_path):
    """A mount of the given size for the run directory; unmounted at the end."""
    mounted = []

    def mount(size: str) -> Path:
        point = tmp_path / "disk"
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        # The run's report guard looks at the run directory once more after the playbook ends: unmounted under
        # it, it would find no reports and write its own beside the mount.
        wait_for_processes_in(point)
        subprocess.run(["umount", "--lazy", str(point)], check=False)


def wait_for_processes_in(point: Path, limit_s: float = 120.0) -> None:
    """Until no process works in a directory under ``point`` (the guard's working directory is its run's)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and any(
            str(cwd).startswith(str(point)) for cwd in map(process_cwd, Path("/proc").glob("[0-9]*"))):
        time.sleep(0.5)


def process_cwd(proc: Path) -> str:
    try:
        return os.readlink(proc / "cwd")
    except OSError:
        return ""


def page_text(page: str) -> str:
    """What a reader of the page sees: its text without the markup."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def train(simcluster, nodes, run_dir: Path, run_id: str | None = None, **more) -> subprocess.CompletedProcess:
    more = dict(more, training_run_id=run_id) if run_id else more
    proc = run_train(simcluster, JAX_MULTI, run_dir, nodes, more_vars=more or None)
    Path(str(run_dir.parent) + "-ansible.out").write_text(proc.stdout + proc.stderr)
    return proc


def verdict_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("VERDICT: ")]
    assert len(lines) == 1, output[-3000:]
    return lines[0][len("VERDICT: "):].replace(" (SIMULATED)", "")


def assert_nodes_clean(simcluster, nodes) -> None:
    assert_no_training_container(simcluster, nodes)
    for node in nodes:
        locks = simcluster.ssh(node, "find /tmp/clusterval-logs -name clusterval.lock 2>/dev/null || true").stdout
        assert locks.strip() == "", f"{node} is still locked: {locks}"


def assert_no_node_blamed(output: str, headline: str, nodes) -> None:
    assert "teardown FAILED" not in output
    assert not re.search(r"\bnode\d+ (teardown|crash|hang|unreachable)", headline), headline
    for node in nodes:
        assert not headline.startswith(f"FAIL: {node}")


def assert_no_temporary_file(run_dir: Path) -> None:
    assert not list(run_dir.rglob("*.tmp")), "a temporary file was left"
    assert not [p for p in run_dir.rglob("training.log") if p.stat().st_size == 0], "an empty log copy was left"


def test_a_run_dir_on_a_full_tiny_disk_names_the_controller_and_leaves_the_nodes_clean(simcluster, nodes,
                                                                                       tiny_disk):
    run_dir = tiny_disk("64k") / "run"
    proc = train(simcluster, nodes, run_dir)
    output = proc.stdout
    headline = verdict_line(output)
    assert proc.returncode != 0
    assert headline.startswith("FAIL: " + FAULT % run_dir), headline
    assert headline.count("controller: cannot write") == 1, "the fault is named once, not per node"
    assert_no_node_blamed(output, headline, nodes)
    assert_no_temporary_file(run_dir)
    assert_nodes_clean(simcluster, nodes)


def test_training_that_passed_keeps_its_verdict_beside_the_controllers_fault_and_results_json_first(
        simcluster, nodes, tiny_disk):
    """The watch, the verdict and the first reports fit; the nodes' logs do not (each log is made 40 KiB before
    the run starts, with lines that say so, as a long real run's would be)."""
    run_id = "20261126T000000Z-c19a00-controller-disk"
    for node in nodes:
        simcluster.ssh(node, "mkdir -p /tmp/clusterval-logs/clusterval/%s && for i in $(seq 1 500); do "
                             "echo \"clusterval test: simulated earlier output of this run, line $i, padding the "
                             "log to 40 KiB\"; done > /tmp/clusterval-logs/clusterval/%s/training.log"
                       % (run_id, run_id))
    run_dir = tiny_disk("160k") / "run"
    proc = train(simcluster, nodes, run_dir, run_id)
    output = proc.stdout
    headline = verdict_line(output)
    assert proc.returncode != 0
    assert headline.startswith("FAIL: " + FAULT % run_dir), headline
    assert "not collected" in headline and "; the training itself: PASS" in headline, headline
    assert_no_node_blamed(output, headline, nodes)
    # results.json first: written, and it says what the console says.
    document = json.loads((run_dir / "results.json").read_text())
    assert document["verdict"] == "FAIL" and document["headline"] == headline
    assert document["culprit"] is None
    assert document["controller_faults"] == [headline[len("FAIL: "):].split("; the training itself: ")[0]]
    assert all(c["status"] != "fail" for c in document["checks"]), "every check of the training passed"
    assert all(outcome["ok"] for outcome in document["teardown"].values())
    if (run_dir / "junit.xml").exists():
        properties = {p.get("name"): p.get("value") for p in ET.parse(run_dir / "junit.xml").iter("property")}
        assert properties["headline"] == headline and "culprit" not in properties
    if (run_dir / "report.html").exists():
        assert headline in page_text((run_dir / "report.html").read_text())
    assert_no_temporary_file(run_dir)
    kept = sorted(p.name for p in run_dir.glob("logs/*/*"))
    assert all(name in ("training.log", "training.log.partial") for name in kept), kept
    assert_nodes_clean(simcluster, nodes)


def fill_once_training_is_underway(disk: Path, run_dir: Path, done: threading.Event) -> None:
    """Another process fills the controller's disk while the nodes train."""
    while not done.is_set() and not training_underway(run_dir):
        time.sleep(0.5)
    if done.is_set():
        return
    with open(disk / "filler", "wb") as filler:
        try:
            while True:
                filler.write(bytes(1 << 16))
                filler.flush()
        except OSError:
            pass


def test_a_disk_that_fills_during_the_run_keeps_results_json_and_the_verdict_the_nodes_earned(
        simcluster, nodes, tiny_disk):
    """The room kept for the watch and for results.json: the training completed on every node is judged PASS
    beside the controller's fault, never reported as stopped before the verdict with nothing kept."""
    run_id = "20261129T000000Z-c32a00-disk-fills"
    for node in nodes:  # 3 MiB of earlier output in each log: more than any room, so their copies cannot fit
        simcluster.ssh(node, "mkdir -p /tmp/clusterval-logs/clusterval/%s && yes 'clusterval test: simulated "
                             "earlier output of this run, padding the log to 3 MiB' | head -c 3145728 "
                             "> /tmp/clusterval-logs/clusterval/%s/training.log" % (run_id, run_id))
    disk = tiny_disk("48m")
    run_dir = disk / "run"
    done = threading.Event()
    filler = threading.Thread(target=fill_once_training_is_underway, args=(disk, run_dir, done), daemon=True)
    filler.start()
    try:
        proc = train(simcluster, nodes, run_dir, run_id, training_iterations=40)
    finally:
        done.set()
        filler.join()
    assert (disk / "filler").exists(), "the disk was filled while the nodes trained"
    headline = verdict_line(proc.stdout)
    assert proc.returncode != 0
    assert headline.startswith("FAIL: " + FAULT % run_dir), headline
    assert "stopped before the verdict" not in headline and "; the training itself: PASS" in headline, headline
    assert "not collected" in headline, headline
    assert_no_node_blamed(proc.stdout, headline, nodes)
    document = json.loads((run_dir / "results.json").read_text())
    assert document["verdict"] == "FAIL" and document["headline"] == headline
    assert all(c["status"] != "fail" for c in document["checks"]), "every check of the training passed"
    assert not list(run_dir.glob(".clusterval-room-*")), "the rooms are released once the reports are written"
    assert_no_temporary_file(run_dir)
    assert_nodes_clean(simcluster, nodes)
