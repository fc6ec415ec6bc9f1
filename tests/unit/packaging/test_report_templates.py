"""report.html's Jinja2 templates ship in the collection tarball and render from the installed collection."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile

from conftest import REPO

RENDER = """
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
from synthetic_results import synthetic_document
from ansible_collections.clusterval.training.plugins.module_utils import _report_html
assert _report_html.__file__.startswith(sys.argv[1]), _report_html.__file__
print(_report_html.template_dir())
page = _report_html.html_report(synthetic_document(8, 30, crash_at=20))
assert page.startswith("<!DOCTYPE html>") and "<h2>Curves</h2>" in page and "step time per step" in page
print(len(page))
"""


def test_the_templates_are_in_the_tarball_and_render_from_the_installed_collection(tarball, tmp_path):
    templates = sorted(name for name in os.listdir(REPO / "plugins" / "plugin_utils" / "templates")
                       if name.endswith(".j2"))
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        assert {"plugins/plugin_utils/templates/%s" % name for name in templates} <= names
        target = tmp_path / "ansible_collections" / "clusterval" / "training"
        target.mkdir(parents=True)
        archive.extractall(target)  # noqa: S202 - our own tarball
    done = subprocess.run([sys.executable, "-c", RENDER, str(tmp_path), str(REPO / "tests")], capture_output=True,
                          text=True, check=False, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == str(target / "plugins" / "plugin_utils" / "templates")
