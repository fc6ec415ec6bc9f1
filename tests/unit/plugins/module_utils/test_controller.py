"""Controller-side faults named as such: a full disk for the run dir is no node's failure (issue 19)."""
from __future__ import annotations

import errno
import json
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _controller, _report, _room

PLAN = {"run_id": "r1", "config_name": "c", "framework": "maxtext", "model": "llama3.1-70b", "gpu_arch": "mi300x",
        "mode": "multi_node", "final_step": 11, "total_steps": 12, "warmup_steps": 3, "simulated": True}
PASS = {"verdict": "PASS", "headline": "PASS (throughput not judged)", "failures": [], "checks": [], "culprit": None}
ENOSPC = "Task failed: [Errno 28] No space left on device"


def cleanly_torn_down(*hosts, **log_errors):
    return {host: {"ok": True, "unreachable": False, "removed": ["container c"], "msg": "%s teardown removed" % host,
                   "log_error": log_errors.get(host, "")} for host in hosts}


class Disk:
    """A disk of `size` bytes under `root` for _atomic's writes (the files there count, as on a real one)."""

    def __init__(self, monkeypatch, root, size):
        self.root, self.size = str(root), size
        real = _atomic.write_text

        def write_text(path, text, mode=0o644, replace=True):
            used = sum(os.path.getsize(os.path.join(d, f)) for d, unused, fs in os.walk(self.root) for f in fs)
            if used + len(text.encode()) > self.size:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            return real(path, text, mode, replace)

        monkeypatch.setattr(_atomic, "write_text", write_text)


def test_a_failed_atomic_write_names_its_target_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    real = _atomic.tempfile.mkstemp

    def full_device(prefix, suffix, dir):  # the temporary file is there, but every write to it fails
        descriptor, name = real(prefix=prefix, suffix=suffix, dir=dir)
        os.close(descriptor)
        return os.open("/dev/full", os.O_WRONLY), name

    monkeypatch.setattr(_atomic.tempfile, "mkstemp", full_device)
    target = str(tmp_path / "results.json")
    with pytest.raises(OSError) as raised:
        _atomic.write_text(target, "{}" * 10000)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == target
    assert os.listdir(str(tmp_path)) == []


def test_results_json_is_written_first_and_the_runs_older_reports_make_room_for_it(tmp_path, monkeypatch):
    old = _controller.with_faults(_report.results_document(dict(PASS, run_dir=str(tmp_path)), "t0"), [], [], False)
    _report.write_reports(str(tmp_path), old)
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    Disk(monkeypatch, tmp_path, sum(sizes.values()) + 200)  # full: room for nothing more
    new = _controller.with_faults(old, [_controller.run_dir_fault(str(tmp_path), "No space left on device")], [],
                                  False)
    with pytest.raises(_report.ReportsNotWritten) as raised:
        _report.write_reports(str(tmp_path), new)
    assert raised.value.errno == errno.ENOSPC and list(raised.value.written) == ["results.json", "junit.xml"]
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["verdict"] == "FAIL" and written["headline"] == new["headline"]
    assert not (tmp_path / "report.html").exists(), "the older report.html, which said PASS, made room"
    assert new["headline"] in (tmp_path / "junit.xml").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_report_that_cannot_be_written_again_leaves_no_older_version_behind(tmp_path, monkeypatch):
    old = _controller.with_faults(_report.results_document(dict(PASS, run_dir=str(tmp_path)), "t0"), [], [], False)
    _report.write_reports(str(tmp_path), old)
    new = _controller.with_faults(old, [_controller.run_dir_fault(str(tmp_path), "No space left on device")], [],
                                  False)
    real_write = _atomic.write_text

    def html_fails(path, content, *args, **kwargs):
        if path.endswith("report.html"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real_write(path, content, *args, **kwargs)
    monkeypatch.setattr(_atomic, "write_text", html_fails)
    with pytest.raises(_report.ReportsNotWritten) as raised:
        _report.write_reports(str(tmp_path), new)
    assert list(raised.value.written) == ["results.json", "junit.xml"]
    assert not (tmp_path / "report.html").exists(), "the older report.html said PASS"


def test_a_full_disk_while_collecting_the_logs_is_the_controllers_fault_once_not_a_teardown_failure(tmp_path):
    for host, content in (("node1", ""), ("node2", "completed step: 1\n")):
        (tmp_path / "logs" / host).mkdir(parents=True)
        (tmp_path / "logs" / host / "training.log").write_text(content)
    teardown = cleanly_torn_down("node1", "node2", "node3", node1=ENOSPC, node2=ENOSPC)
    written = _controller.reported_run(PLAN, str(tmp_path), PASS, None, teardown)
    document = written["document"]
    fault = ("controller: cannot write the run directory %s: No space left on device (training log of node[1-2] "
             "not collected)" % tmp_path)
    assert written["error"] is None
    assert document["controller_faults"] == [fault]
    assert document["verdict"] == "FAIL" and document["culprit"] is None
    assert document["headline"] == "FAIL: %s; the training itself: PASS (throughput not judged)" % fault
    assert "teardown failed" not in document["headline"]
    assert not (tmp_path / "logs" / "node1" / "training.log").exists(), "an empty copy is no log"
    assert (tmp_path / "logs" / "node2" / "training.log.partial").read_text() == "completed step: 1\n"
    assert document["teardown"]["node2"]["log_copy"] == str(tmp_path / "logs" / "node2" / "training.log.partial")
    assert json.loads((tmp_path / "results.json").read_text())["controller_faults"] == [fault]


def test_a_stop_on_a_write_into_the_run_dir_is_the_controllers_fault_and_a_nodes_path_is_not(tmp_path):
    inside = "%s: '%s/watch/r1/outcome.json'" % (ENOSPC, tmp_path)
    document = _controller.reported_run(PLAN, str(tmp_path), None, inside, cleanly_torn_down("node1"))["document"]
    assert document["headline"] == ("FAIL: controller: cannot write the run directory %s: No space left on device "
                                    "(stopped before the verdict)" % tmp_path)
    on_a_node = "node2: %s: '/home/alice/LOGS/clusterval/r1/launch.sh'" % ENOSPC
    document = _controller.reported_run(PLAN, str(tmp_path), None, on_a_node, None)["document"]
    assert document["controller_faults"] == []
    assert document["headline"] == "FAIL: stopped before the verdict: %s" % on_a_node


def test_a_log_the_node_could_not_give_names_the_node_not_the_controller(tmp_path):
    teardown = cleanly_torn_down("node1", "node3", node3="the stat task timed out after 120 s")
    document = _controller.reported_run(PLAN, str(tmp_path), PASS, None, teardown)["document"]
    assert document["controller_faults"] == []
    assert document["headline"] == ("FAIL: node3: training log not collected: the stat task timed out after 120 s"
                                    "; the training itself: PASS (throughput not judged)")


def test_a_failed_run_keeps_its_culprit_first():
    failed = {"verdict": "FAIL", "headline": "FAIL: node3 crash at step 3: boom", "culprit": {"host": "node3"}}
    fault = _controller.run_dir_fault("/r", "Disk quota exceeded")
    result = _controller.with_faults(failed, [fault], [], False)
    assert result["headline"] == "FAIL: node3 crash at step 3: boom; " + fault
    assert result["culprit"] == {"host": "node3"} and result["failures"] == [fault]


def test_reports_that_cannot_be_written_say_so_and_keep_what_was_written(tmp_path, monkeypatch):
    def refuse(run_dir, document, seconds=None):
        raise _report.ReportsNotWritten(OSError(errno.EROFS, os.strerror(errno.EROFS), run_dir), {})

    monkeypatch.setattr(_controller, "write_reports", refuse)
    written = _controller.reported_run(PLAN, str(tmp_path), PASS, None, cleanly_torn_down("node1"))
    fault = "controller: cannot write the run directory %s: Read-only file system" % tmp_path
    assert written["error"] == fault and written["paths"] == {}
    assert written["document"]["controller_faults"] == [fault]
    assert written["document"]["headline"].startswith("FAIL: " + fault + "; the training itself: PASS")


def test_the_same_fault_from_several_places_is_one_line():
    lines = _controller.merged([_controller.run_dir_fault("/r", "No space left on device"),
                                _controller.run_dir_fault("/r", "No space left on device (training log of node1 "
                                                                "not collected)"),
                                _controller.run_dir_fault("/r", "No space left on device")])
    assert lines == ["controller: cannot write the run directory /r: No space left on device (training log of "
                     "node1 not collected)"]


def test_a_disk_that_filled_during_the_run_still_keeps_results_json_in_the_room_kept_for_it(tmp_path, monkeypatch):
    """No older report to make room: the room kept since the containers started is released for results.json."""
    assert _room.reserve(str(tmp_path)) == ["watch", "verdict", "results"]
    used = sum(p.stat().st_size for p in tmp_path.iterdir())
    Disk(monkeypatch, tmp_path, used + 200)  # full: room for nothing more
    document = _controller.with_faults(_report.results_document(dict(PASS, run_dir=str(tmp_path)), "t0"), [], [],
                                       False)
    written = _report.write_reports(str(tmp_path), document)
    assert json.loads((tmp_path / "results.json").read_text())["headline"] == PASS["headline"]
    assert "results.json" in written and not os.path.exists(_room.room_path(str(tmp_path), "results"))
    assert os.path.exists(_room.room_path(str(tmp_path), "watch")), "the watch's room is the watch's"
    _room.release_all(str(tmp_path))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".clusterval-room")]
