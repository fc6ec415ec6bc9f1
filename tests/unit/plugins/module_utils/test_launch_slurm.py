"""Slurm as the launcher, pure: the job the plan emits, the runtimes' argv, Slurm's output parsed, its evidence."""
from __future__ import annotations

import os
import shlex

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _launch_slurm
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

FIXTURES = os.path.join(os.path.dirname(__file__), *[os.pardir] * 3, "fixtures", "slurm")
HOSTS = ["node2", "node1", "node3"]
CONTAINER = {"image": "rocm/jax-training:maxtext-v25.9", "workdir": "/workspace/maxtext", "name": "rocm-jax",
             "volumes": ["/shared/cache:/shared/cache", "/opt/lib:/opt/lib:ro"],
             "mounts": [{"source": "/tmp/hf", "target": "/run/clusterval/hf_token", "read_only": True}],
             "command": ["python3", "/tmp/run/supervisor/supervise.py", "/tmp/run/supervisor/config.json"],
             "env": {"NODE_RANK": "0"}}


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def documented(name):
    return set(fixture(name).split())


def part(host):
    spec = dict(CONTAINER, env={"NODE_RANK": str(HOSTS.index(host))})
    node = _launch_slurm.node_part(spec, {"Image": spec["image"]}, [], ["/tmp/run"], "unix:///var/run/docker.sock", 10)
    return {"spec": spec, "part": node}


def job(**settings):
    base = {"deadline": 3600, "stop_grace": 10}
    base.update(settings)
    return _launch_slurm.job({"run_id": "r1"}, HOSTS, {h: part(h) for h in HOSTS}, base, {"_slurm_step": "x = 1\n"},
                             "/shared/.clusterval-status/r1")


def directives(script):
    return [line[len("#SBATCH "):] for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_the_script_runs_one_task_per_planned_node_never_requeued_every_nodes_end_kept():
    emitted = job(partition="gpu", account="ops", qos="high", reservation="maint", sbatch_args=["--gres=gpu:8"])
    options = directives(emitted["script"])
    assert options[:10] == ["--job-name=clusterval-r1", "--nodes=3", "--ntasks-per-node=1",
                            "--nodelist=node2,node1,node3", "--exclusive", "--no-requeue", "--wait-all-nodes=1",
                            "--time=62", "--comment=clusterval.training:run:r1",
                            "--output=/shared/.clusterval-status/r1/slurm/job-%j.out"]
    assert options[-5:] == ["--partition=gpu", "--account=ops", "--qos=high", "--reservation=maint", "--gres=gpu:8"]
    step = shlex.split(emitted["script"].splitlines()[-1])
    assert step[:3] == ["exec", "srun", "--kill-on-bad-exit=0"] and "--ntasks-per-node=1" in step
    assert step[-3:] == ["/shared/.clusterval-status/r1/slurm/step/step.py", "run",
                         "/shared/.clusterval-status/r1/slurm/nodes"]
    assert emitted["submit"] == ["sbatch", "--parsable", "/shared/.clusterval-status/r1/slurm/job.sbatch"]
    # the teardown's cleanup step: the same nodes where the job got them, never waiting for them
    clean = emitted["clean"]
    assert clean[0] == "srun" and "--nodelist=node2,node1,node3" in clean and "--immediate=60" in clean
    assert {"--partition=gpu", "--account=ops", "--qos=high", "--reservation=maint"} <= set(clean)
    assert clean[-3:] == ["clean", "r1", "unix:///var/run/docker.sock"]


def test_each_node_finds_its_part_by_its_slurm_name_whatever_order_slurm_lists_them():
    emitted = job()
    paths = {f["path"] for f in emitted["files"]}
    assert {"/shared/.clusterval-status/r1/slurm/nodes/%s.json" % h for h in HOSTS} <= paths
    assert "/shared/.clusterval-status/r1/slurm/step/step.py" in paths
    ranks = {f["path"].rsplit("/", 1)[1]: f["content"] for f in emitted["files"] if "/nodes/" in f["path"]}
    assert '"NODE_RANK": "1"' in ranks["node1.json"] and '"NODE_RANK": "0"' in ranks["node2.json"]
    assert all(f["mode"] == "0600" for f in emitted["files"] if "/nodes/" in f["path"])


def test_the_time_limit_is_above_the_runs_deadline_and_a_lower_one_is_refused():
    # 3600 s deadline + 60 s early signal + 10 s stop: 61 minutes and a bit
    assert _launch_slurm.time_limit_minutes(3600, 10) == 62
    assert _launch_slurm.time_limit_minutes(3600, 10, 120) == 120
    with pytest.raises(ConfigError) as refused:
        _launch_slurm.time_limit_minutes(3600, 10, 60)
    assert refused.value.path == "training_slurm.time_limit" and "at least 62 minutes" in refused.value.message


@pytest.mark.parametrize("settings, path", [
    ({"partition": "gpu nodes"}, "training_slurm.partition"),
    ({"sbatch_args": ["--gres=gpu:8", "gres=1"]}, "training_slurm.sbatch_args[1]"),
    ({"sbatch_args": ["--comment='x'"]}, "training_slurm.sbatch_args[0]"),
    ({"runtime": "podman"}, "training_slurm.runtime"),
])
def test_bad_settings_are_refused_naming_the_setting(settings, path):
    with pytest.raises(ConfigError) as refused:
        job(**settings)
    assert refused.value.path == path


def test_pyxis_argv_uses_only_its_documented_options():
    step = job(runtime="pyxis")["step"]
    flags = {arg.split("=", 1)[0] for arg in step if arg.startswith("--container") or arg.startswith("--no-container")}
    assert flags and flags <= documented("pyxis_flags.txt"), flags - documented("pyxis_flags.txt")
    assert "--container-image=rocm/jax-training:maxtext-v25.9" in step
    assert ("--container-mounts=/shared/cache:/shared/cache,/opt/lib:/opt/lib:ro,"
            "/tmp/hf:/run/clusterval/hf_token:ro") in step
    assert step[-4:] == ["python3", "/shared/.clusterval-status/r1/slurm/step/step.py", "exec",
                         "/shared/.clusterval-status/r1/slurm/nodes"]


def test_apptainer_argv_uses_only_its_documented_options():
    step = job(runtime="apptainer", gpu_vendor="amd")["step"]
    start = step.index("apptainer")
    assert step[start + 1] == "exec"
    flags = {arg for arg in step[start + 2:] if arg.startswith("-")}
    assert flags <= documented("apptainer_exec_flags.txt"), flags - documented("apptainer_exec_flags.txt")
    assert "--rocm" in flags and "--nv" not in flags
    assert step[step.index("--pwd") + 1] == "/workspace/maxtext"
    assert "docker://rocm/jax-training:maxtext-v25.9" in step
    assert [step[i + 1] for i, a in enumerate(step) if a == "--bind"] == [
        "/shared/cache:/shared/cache", "/opt/lib:/opt/lib:ro", "/tmp/hf:/run/clusterval/hf_token:ro"]


def test_scontrol_records_keep_values_with_spaces():
    record = _launch_slurm.parse_scontrol(fixture("scontrol_job_timeout.txt"))
    view = _launch_slurm.job_view(record)
    assert view["state"] == "TIMEOUT" and view["reason"] == "TimeLimit" and view["nodes"] == ["node1", "node2"]
    assert view["ended_at"] is not None and _launch_slurm.is_over(view)
    node = _launch_slurm.parse_scontrol("NodeName=node4 Arch=x86_64 State=DOWN+NOT_RESPONDING "
                                        "Reason=Not responding [slurm@2026-11-29T01:46:02] Comment=(null)")
    assert node["Reason"] == "Not responding [slurm@2026-11-29T01:46:02]" and node["Comment"] == "(null)"


def test_hostlists_expand_as_slurm_writes_them():
    assert _launch_slurm.expand_nodelist("node[1-3,10],gpu07,a[08-09]") == [
        "node1", "node2", "node3", "node10", "gpu07", "a08", "a09"]
    assert _launch_slurm.expand_nodelist("") == []


def test_srun_lines_name_the_node_and_its_exit_code():
    text = ("clusterval step: node3: error: the container could not run: no such image\n"
            "srun: error: node3: task 2: Exited with exit code 125\n"
            "srun: error: node1: task 0: Killed\n")
    record = _launch_slurm.scheduler_record("7", fixture("sacct_timeout.txt"), text)
    assert record["srun_errors"]["node3"] == {"exit_code": 125, "line": "srun: error: node3: task 2: Exited with "
                                              "exit code 125", "step": "the container could not run: no such image"}
    assert record["srun_errors"]["node1"]["exit_code"] is None
    assert record["sacct"]["State"] == "TIMEOUT" and record["sacct"]["NodeList"] == "node[1-2]"


@pytest.mark.parametrize("state, cause", [("TIMEOUT", "time limit"), ("PREEMPTED", "preempted"),
                                          ("CANCELLED", "cancelled"), ("DEADLINE", "deadline"),
                                          ("COMPLETED", None), ("FAILED", None), ("NODE_FAIL", None)])
def test_time_limit_preemption_and_a_cancel_are_the_runs_never_a_nodes(state, cause):
    ending = _launch_slurm.run_ending({"state": state, "reason": "None"})
    assert (ending or {}).get("class") == cause
    assert not _launch_slurm.node_failures({"state": state, "nodes": ["node1"]}, [], 0.0) or state == "NODE_FAIL"


def test_sacct_final_state_gives_the_runs_end_and_when():
    record = _launch_slurm.scheduler_record("13", "13|clusterval-r1|CANCELLED by 0|0:0|node[1-2]|"
                                                  "2026-11-29T01:39:19|2026-11-29T01:40:26|00:01:07|None|c\n", "")
    ending = _launch_slurm.final_ending(record)
    assert ending["class"] == "cancelled" and ending["since"] == _launch_slurm.epoch_of("2026-11-29T01:40:26")
    assert "sacct: CANCELLED by 0" in ending["text"]
    assert _launch_slurm.final_ending({"sacct": None}) is None


def test_node_fail_names_the_jobs_node_that_slurm_marked_down_with_its_reason():
    reasons = _launch_slurm.parse_table(fixture("sinfo_reasons.txt"), _launch_slurm.SINFO_REASON_FIELDS)
    view = _launch_slurm.job_view(_launch_slurm.parse_scontrol(fixture("scontrol_job_node_fail.txt")))
    assert view["state"] == "NODE_FAIL"
    found = _launch_slurm.node_failures(view, reasons, 5.0)
    assert list(found) == ["node4"], found
    assert found["node4"]["evidence"] == "slurm" and "Not responding" in found["node4"]["text"]
    assert found["node4"]["text"].startswith("Slurm: NODE_FAIL: node4 is down")


def test_pending_is_no_run_yet_and_its_limit_names_the_schedulers_reason():
    view = {"state": "PENDING", "reason": "ReqNodeNotAvail, Reserved for maintenance"}
    assert _launch_slurm.is_pending(view) and not _launch_slurm.is_over(view)
    cause = _launch_slurm.pending_cause(view, 601, 600)
    assert cause["class"] == "pending" and "Slurm's reason: ReqNodeNotAvail, Reserved for maintenance" in cause["text"]


def test_drain_is_one_argv_with_the_run_and_the_headline_as_reason():
    argv = _launch_slurm.drain_argv("node3", "r1", "FAIL: node3 crash at step 2:\n  XlaRuntimeError")
    assert argv == ["scontrol", "update", "NodeName=node3", "State=DRAIN",
                    "Reason=clusterval run r1: FAIL: node3 crash at step 2: XlaRuntimeError"]
