"""A launcher is one module and one row: the playbooks ask the row (filter clusterval.training.launcher), never
the launcher's name."""
import glob
import os
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.filter.launcher import FilterModule
from ansible_collections.clusterval.training.plugins.module_utils import _launchers

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
launcher = FilterModule().filters()["launcher"]


def test_every_launcher_module_has_a_row_and_every_row_its_module():
    modules = {os.path.basename(path)[:-3] for path in glob.glob(os.path.join(MODULE_UTILS, "_launch_*.py"))}
    assert modules == {row.module for row in _launchers.LAUNCHERS.values()}
    assert _launchers.DEFAULT in _launchers.NAMES


def test_the_row_says_where_the_commands_run():
    assert launcher("ssh") == {"name": "ssh", "module": "_launch_docker", "label": "Docker over SSH on every node",
                               "login_group": None, "over_ssh": True}
    slurm = launcher("slurm")
    assert (slurm["over_ssh"], slurm["login_group"]) == (False, "slurm_login")


def test_an_unknown_launcher_is_refused_naming_the_launchers():
    with pytest.raises(AnsibleFilterError, match=r"^training_launcher: expected one of ssh, slurm, found 'k8s'$"):
        launcher("k8s")
    with pytest.raises(AnsibleFilterError, match="found 3"):
        launcher(3)


def test_a_new_row_is_all_the_playbooks_need(monkeypatch):
    row = _launchers.Launcher("k8s", "_launch_k8s", "one Kubernetes job", "k8s_api")
    monkeypatch.setitem(_launchers.LAUNCHERS, "k8s", row)
    assert launcher("k8s")["over_ssh"] is False


def test_no_playbook_or_role_compares_the_launchers_name():
    """Which roles run comes from the row: a second launcher needs no edit of the playbooks' conditions."""
    compared = re.compile(r"training_launcher[^\n]*(==|!=|\bin\s*\[)")
    offenders = []
    for path in glob.glob(os.path.join(REPO, "playbooks", "**", "*.yml"), recursive=True) + \
            glob.glob(os.path.join(REPO, "roles", "**", "*.yml"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            offenders += ["%s:%d" % (os.path.relpath(path, REPO), number)
                          for number, line in enumerate(handle, 1) if compared.search(line)]
    assert offenders == []
