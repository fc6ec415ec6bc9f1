"""The per-node actions read their role's variables themselves: set ones rendered, unset ones falling back to
the collection's setting they stand for, omitted ones left out."""
from __future__ import annotations

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.clusterval.training.plugins.plugin_utils._node_task import role_vars, without_invocation


def rendered(task_vars, names, fallbacks=None):
    return role_vars(Templar(loader=DataLoader(), variables=task_vars), task_vars, "container", names, fallbacks)


def test_a_set_role_variable_is_rendered_and_an_unset_one_is_absent():
    # As a role's defaults or the inventory give them: templates that Ansible trusts.
    task_vars = {"container_stop_timeout": trust_as_template("{{ grace * 2 }}"), "grace": 5}
    assert rendered(task_vars, ["stop_timeout", "owner"]) == {"stop_timeout": 10}


def test_an_unset_role_variable_takes_the_collection_setting_it_stands_for():
    task_vars = {"training_docker_host": "unix:///run/other.sock"}
    fallbacks = {"docker_host": "training_docker_host"}
    assert rendered(task_vars, ["docker_host"], fallbacks) == {"docker_host": "unix:///run/other.sock"}
    # The role's own variable wins, even when it is empty.
    assert rendered(dict(task_vars, container_docker_host=""), ["docker_host"], fallbacks) == {"docker_host": ""}
    assert rendered({}, ["docker_host"], fallbacks) == {}


def test_a_variable_that_renders_to_omit_is_left_out():
    task_vars = {"container_owner": trust_as_template("{{ nobody | default(omit) }}")}
    assert rendered(task_vars, ["owner"]) == {}


def test_the_modules_echo_of_its_arguments_is_dropped():
    answer = {"changed": True, "invocation": {"module_args": {"files": [{"content": "x" * 1000}]}}}
    assert without_invocation(answer) == {"changed": True}
