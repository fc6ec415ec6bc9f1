import os
import shlex

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.filter.env_list import FilterModule as EnvList
from ansible_collections.clusterval.training.plugins.filter.node_view import FilterModule as NodeView
from ansible_collections.clusterval.training.plugins.filter.shell_join import FilterModule as ShellJoin
from ansible_collections.clusterval.training.plugins.filter.xla_flags import FilterModule as XlaFlags
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._plan import (
    Host,
    PlanOptions,
    plan_run,
)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import compact_plan

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
xla_flags = XlaFlags().filters()["xla_flags"]
env_list = EnvList().filters()["env_list"]
shell_join = ShellJoin().filters()["shell_join"]
node_view = NodeView().filters()["node_view"]


def test_xla_flags_filter():
    assert xla_flags({"xla_gpu_enable_cublaslt": "True", "xla_gpu_graph_level": 0}) == \
        "--xla_gpu_enable_cublaslt=true --xla_gpu_graph_level=0"
    with pytest.raises(AnsibleFilterError, match="expected a boolean"):
        xla_flags({"xla_gpu_enable_cublaslt": "maybe"})
    with pytest.raises(AnsibleFilterError, match="did you mean xla_gpu_graph_level"):
        xla_flags({"xla_gpu_graf_level": "0"}, strict=True)


def test_env_list_filter():
    assert env_list({"B": 2, "A": True}) == ["B=2", "A=1"]
    assert env_list({"B": 2, "A": "x"}, sort=True) == ["A=x", "B=2"]
    with pytest.raises(AnsibleFilterError, match="environment variable name"):
        env_list({"1BAD": "x"})
    with pytest.raises(AnsibleFilterError, match="single-line"):
        env_list({"A": "x\ny"})


def test_shell_join_round_trips():
    argv = ["python3", "a b", "$HOME", "it's", "x=1;rm -rf /"]
    assert shlex.split(shell_join(argv)) == argv
    with pytest.raises(AnsibleFilterError, match="expected a list"):
        shell_join("echo hi")


def test_node_view_filter_gives_the_node_from_both_forms():
    config = os.path.join(REPO, "configs", "jax", "mi300x_singlenode_llama3_1_70b.json")
    full = plan_run(load_config_file(config), [Host("a", "10.0.0.1"), Host("b", "10.0.0.2")],
                    PlanOptions(config_path=config, run_id="r1"))
    compact = compact_plan(full)
    assert node_view(compact, "b") == node_view(full, "b") == full["nodes"]["b"]
    assert node_view(compact, "b")["container"]["labels"]["clusterval.job"] == "job-1"
    with pytest.raises(AnsibleFilterError, match=r"node_view: plan.nodes.c: expected a host of the plan \(a, b\)"):
        node_view(compact, "c")
    with pytest.raises(AnsibleFilterError, match="node_view: plan.nodes: expected a training plan"):
        node_view("not a plan", "a")
