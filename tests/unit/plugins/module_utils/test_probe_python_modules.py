"""The probe's check that the node's Python imports what community.docker needs there."""
import sys

from ansible_collections.clusterval.training.plugins.module_utils import _probe


def test_importable_modules_pass_with_their_version():
    result = _probe.python_modules_check(["json", "requests"])
    assert result["ok"] is True and result["check"] == "python_modules"
    assert result["detail"].startswith(sys.executable + " imports json")
    assert "requests %s" % __import__("requests").__version__ in result["detail"]


def test_a_missing_module_fails_naming_the_interpreter_and_the_fix():
    result = _probe.python_modules_check(["json", "clusterval_no_such_module"])
    assert result["ok"] is False
    assert sys.executable in result["detail"]
    assert "clusterval_no_such_module (ModuleNotFoundError" in result["detail"]
    assert "python3-requests" in result["detail"]
    assert "json" not in result["detail"].split("cannot import", 1)[1].split("(community.docker")[0]


def test_a_module_that_breaks_on_import_fails_the_check_not_the_probe(tmp_path, monkeypatch):
    (tmp_path / "clusterval_broken_pkg.py").write_text("raise RuntimeError('urllib3 is too old')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = _probe.python_modules_check(["clusterval_broken_pkg"])
    assert result["ok"] is False
    assert "clusterval_broken_pkg (RuntimeError: urllib3 is too old)" in result["detail"]
