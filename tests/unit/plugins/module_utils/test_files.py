"""The run's directories and files, made idempotently in one pass."""
import getpass
import os

from ansible_collections.clusterval.training.plugins.module_utils import _files


def test_creates_then_reports_nothing_to_do(tmp_path):
    run_dir = str(tmp_path / "LOGS" / "run")
    files = [{"path": run_dir + "/launch.sh", "content": "#!/bin/sh\necho hi\n", "mode": "0755"}]
    assert _files.ensure_all([run_dir], files, getpass.getuser(), False) == [run_dir, run_dir + "/launch.sh"]
    assert os.stat(run_dir + "/launch.sh").st_mode & 0o777 == 0o755
    assert open(run_dir + "/launch.sh").read() == "#!/bin/sh\necho hi\n"
    assert _files.ensure_all([run_dir], files, getpass.getuser(), False) == []


def test_rewrites_changed_content_and_fixes_mode(tmp_path):
    path = tmp_path / "maxtext.yml"
    path.write_text("steps: 10\n")
    path.chmod(0o600)
    changed = _files.ensure_all([], [{"path": str(path), "content": "steps: 30\n"}], None, False)
    assert changed == [str(path)] and path.read_text() == "steps: 30\n"
    assert path.stat().st_mode & 0o777 == 0o644


def test_check_mode_changes_nothing(tmp_path):
    run_dir = str(tmp_path / "new")
    changed = _files.ensure_all([run_dir], [{"path": run_dir + "/a", "content": "x"}], None, True)
    assert changed == [run_dir, run_dir + "/a"]
    assert not os.path.exists(run_dir)


def test_unknown_owner_is_a_clear_error(tmp_path):
    try:
        _files.ensure_all([str(tmp_path)], [], "no-such-user-here", False)
    except ValueError as exc:
        assert "no such user on the node: no-such-user-here" in str(exc)
    else:
        raise AssertionError("expected a ValueError")


def test_another_users_directory_is_used_as_it_is(tmp_path, monkeypatch):
    share = tmp_path / "share"
    share.mkdir(mode=0o1777)
    share.chmod(0o1777)
    monkeypatch.setattr(_files.os, "geteuid", lambda: share.stat().st_uid + 1)
    assert _files.ensure_all([str(share)], [], None, False) == []
    assert share.stat().st_mode & 0o7777 == 0o1777, "a shared directory's mode is not the run's to change"
