"""What the per-node actions make of their role's variables: the container's job in place of its options, and the
teardown's settings computed from the run when the role leaves them unset."""
from __future__ import annotations

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar, trust_as_template

from ansible_collections.clusterval.training.plugins.action.training_cleanup import ActionModule as Cleanup
from ansible_collections.clusterval.training.plugins.action.training_container import ActionModule as Container

PLAN = {"run_id": "r1", "nodes": {"node1": {}}, "remote_user": "trainer"}


def action(kind, role, task_vars):
    task = Task()
    task.args = {"settings_from": role}
    return kind(task, None, None, DataLoader(), Templar(loader=DataLoader(), variables=task_vars), None)


def container_arguments(task_vars):
    return action(Container, "container", task_vars)._arguments(task_vars)


def test_the_containers_job_stands_for_the_options_of_its_keys():
    job = {"command": ["python3", "/sup/supervise.py"], "extra_volumes": ["/s:/s"], "stop_timeout": 12,
           "files": [{"path": "/r/a", "content": "x"}], "directories": ["/r"]}
    args = container_arguments({"container_job": job, "container_command": ["ignored"]})
    assert {key: args[key] for key in job} == job


def test_a_job_key_the_container_does_not_know_is_refused_naming_what_it_expected():
    args = container_arguments({"container_job": {"command": ["x"], "volume": "/s:/s"}})
    assert args["msg"].startswith("job: expected a dict of command, extra_volumes, directories, files, "
                                  "stop_timeout, found command, volume")
    assert "container_<option>" in args["msg"]


def test_the_docker_host_is_the_containers_own_then_the_collections_then_the_local_socket():
    assert container_arguments({})["docker_host"] == "unix:///var/run/docker.sock"
    assert container_arguments({"training_docker_host": "unix:///x.sock"})["docker_host"] == "unix:///x.sock"
    both = {"training_docker_host": "unix:///x.sock", "container_docker_host": "unix:///y.sock"}
    assert container_arguments(both)["docker_host"] == "unix:///y.sock"


def teardown_arguments(task_vars, plan=None):
    return action(Cleanup, "teardown", task_vars)._role_arguments(task_vars, "teardown", "node1", plan)


def test_the_teardown_of_a_planned_run_collects_its_log_into_the_run_directory():
    task_vars = {"training_run_dir": trust_as_template("{{ base }}/r1"), "base": "/runs", "ansible_host": "10.0.0.1"}
    args = teardown_arguments(task_vars, PLAN)
    assert args["run_id"] == "r1" and args["collect_log"] is True
    assert args["log_copy"] == "/runs/r1/logs/node1/training.log"
    assert args["node"] == "node1" and args["address"] == "10.0.0.1" and args["timeout"] == 30


def test_without_a_plan_the_teardown_removes_the_named_run_and_collects_nothing():
    args = teardown_arguments({"training_run_id": "r9", "teardown_run_dir": ""}, {})
    assert args["run_id"] == "r9" and args["collect_log"] is False and "log_copy" not in args


def test_the_teardown_roles_own_settings_win():
    task_vars = {"training_run_dir": "/runs/r1", "teardown_collect_logs": False, "teardown_run_id": "",
                 "teardown_docker_timeout": 5}
    args = teardown_arguments(task_vars, PLAN)
    assert args["collect_log"] is False and args["run_id"] == "" and args["timeout"] == 5
