"""training_probe run as Ansible runs a module: a JSON args file, the interpreter it is given."""
from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(REPO, "plugins", "modules", "training_probe.py")


def run_probe(args, tmp_path):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict({"node": "node1", "docker_host": ""}, **args)}))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, ".collections"))
    done = subprocess.run([sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env,
                          check=False)
    return json.loads(done.stdout)


def test_requests_is_checked_by_default_with_the_nodes_interpreter(tmp_path):
    result = run_probe({}, tmp_path)
    assert [c["check"] for c in result["checks"]] == ["python_modules"]
    assert result["failed_checks"] == []
    assert result["lines"] == ["node1 preflight OK   python_modules: %s imports requests %s"
                               % (sys.executable, __import__("requests").__version__)]


def test_a_module_the_node_lacks_fails_the_check_and_the_probe_still_reports(tmp_path):
    result = run_probe({"python_modules": ["requests", "clusterval_no_such_module"]}, tmp_path)
    assert result.get("failed") is not True
    assert result["failed_checks"] == ["python_modules"]
    assert "cannot import clusterval_no_such_module" in result["lines"][0]


def test_an_empty_list_skips_the_check(tmp_path):
    assert run_probe({"python_modules": []}, tmp_path)["checks"] == []
