from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._logs import run_training_log

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(REPO, "plugins", "modules", "training_log.py")
LOGS = os.path.join(REPO, "tests", "fixtures", "logs")


def params(path, **extra):
    base = {"path": path, "framework": "auto", "offset": 0, "lineno": 0, "final_step": None, "warmup_steps": None,
            "patterns": [], "exit_code_path": None, "max_steps": 1000, "seq_length": None, "world_size": None}
    base.update(extra)
    return base


def run_module(args, tmp_path):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, ".collections"))
    done = subprocess.run([sys.executable, MODULE, str(args_file)], capture_output=True, text=True, env=env, check=False)
    return json.loads(done.stdout)


def test_result_of_a_complete_maxtext_log(tmp_path):
    exit_file = tmp_path / "training.exit"
    exit_file.write_text("0\n")
    result = run_training_log(params(os.path.join(LOGS, "maxtext_node1.log"), final_step=29,
                                     exit_code_path=str(exit_file)))
    assert result["framework"] == "maxtext" and result["completed"] is True and result["last_step"] == 29
    assert len(result["steps"]) == 30 and result["errors"] == [] and result["exit_code"] == 0
    assert set(result["summary"]) == {"tflops_per_sec_per_gpu", "tokens_per_sec_per_gpu", "seconds"}
    assert 8500 < result["summary"]["tokens_per_sec_per_gpu"] < 8800
    assert result["offset"] == result["size"] == os.path.getsize(os.path.join(LOGS, "maxtext_node1.log"))
    assert result["simulated"] is False


def test_megatron_completion_from_total_iterations_and_script_summary():
    result = run_training_log(params(os.path.join(LOGS, "megatron_last_node.log"), framework="megatron"))
    assert result["completed"] is True and result["last_step"] == 30
    assert result["summary"]["tokens_per_gpu"] == pytest.approx(12786.891099)
    assert result["summary"]["mem_usage"] == pytest.approx(0.7494)


def test_max_steps_keeps_the_latest_and_summary_covers_all():
    result = run_training_log(params(os.path.join(LOGS, "maxtext_node1.log"), max_steps=5))
    assert [s["step"] for s in result["steps"]] == [25, 26, 27, 28, 29]
    assert result["completed"] is False  # MaxText prints no total: final_step is needed


def test_negative_offset_is_refused_by_name():
    with pytest.raises(ValueError, match="offset: expected a number >= 0, found -1"):
        run_training_log(params(os.path.join(LOGS, "maxtext_node1.log"), offset=-1))


def test_module_runs_as_ansible_runs_it(tmp_path):
    result = run_module({"path": os.path.join(LOGS, "maxtext_crash_node2.log"), "final_step": 29,
                         "_ansible_check_mode": True}, tmp_path)
    assert result["changed"] is False and result["completed"] is False and result["last_step"] == 12
    assert result["errors"][0]["class"] == "crash" and result["errors"][0]["text"] == "Fatal Python error: Segmentation fault"


def test_module_reports_a_missing_log_without_traceback(tmp_path):
    result = run_module({"path": str(tmp_path / "missing.log")}, tmp_path)
    assert result["failed"] is True and "No such file or directory" in result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_module_reports_bad_patterns(tmp_path):
    result = run_module({"path": os.path.join(LOGS, "maxtext_node1.log"), "patterns": [{"regex": "("}]}, tmp_path)
    assert result["failed"] is True and result["msg"].startswith("patterns[0].regex: expected a valid regular expression")
