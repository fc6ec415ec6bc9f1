import shlex

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.filter.env_list import FilterModule as EnvList
from ansible_collections.clusterval.training.plugins.filter.shell_join import FilterModule as ShellJoin
from ansible_collections.clusterval.training.plugins.filter.xla_flags import FilterModule as XlaFlags

xla_flags = XlaFlags().filters()["xla_flags"]
env_list = EnvList().filters()["env_list"]
shell_join = ShellJoin().filters()["shell_join"]


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
