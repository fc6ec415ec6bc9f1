"""The validation suite's own configs (tests/fixtures/cvs, copied from ROCm/cvs, MIT; see SOURCE.md there):
its current legacy JAX layout plans with every setting it carries (the versioned format: test_versioned.py; every
file and combination: test_suite_all_configs.py)."""
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run
from ansible_collections.clusterval.training.plugins.module_utils._xla import render_xla_flags

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
SUITE = os.path.join(REPO, "tests", "fixtures", "cvs")
JAX_CURRENT = "jax/mi300x_jax_llama3_1_70b_distributed.json"
HOSTS = [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")]
SITE = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_ib_hca": "bnxt_re0,bnxt_re1"}}


def suite_config(name):
    return load_config_file(os.path.join(SUITE, name))


def plan(name, overrides=None):
    overrides = SITE if overrides is None else overrides
    return plan_run(suite_config(name), HOSTS, PlanOptions(config_path=name, overrides=overrides, run_id="r1"))


def test_every_env_var_and_xla_flag_of_the_current_jax_layout_reaches_the_container():
    raw = suite_config(JAX_CURRENT)["config"]
    result = plan(JAX_CURRENT)
    env = result["nodes"]["n1"]["container"]["env"]
    for name, value in raw["env_vars"].items():
        assert env[name] == value, name
    flags = env["XLA_FLAGS"].split(" ")
    assert len(flags) == len(raw["xla_flags"])
    assert "--xla_gpu_enable_command_buffer=" in flags, "the suite's '' is XLA's empty list"
    assert "--xla_gpu_memory_limit_slop_factor=95" in flags
    assert not [w for w in result["warnings"] if "xla" in w.lower() or "ignored" in w]


def test_the_rdma_provider_library_is_mounted_once_and_copied_into_place_before_the_framework():
    node = plan(JAX_CURRENT)["nodes"]["n1"]
    mounted = [v for v in node["container"]["volumes"] if "libbnxt_re-rdmav34.so" in v]
    assert mounted == ["/usr/local/lib/libbnxt_re-rdmav34.so:"
                       "/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host"]
    script = node["files"][0]["content"]
    copy = ("cp -f /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host "
            "/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so || {")
    assert copy in script and script.index(copy) < script.index("cd /workspace/maxtext")


def test_a_bad_rdma_lib_names_its_path():
    with pytest.raises(ConfigError, match=r"config\.rdma_lib\.container_dest_file.*absolute path"):
        plan(JAX_CURRENT, {**SITE, "config": {**SITE["config"], "rdma_lib": {"container_dest_file": "lib.so"}}})


def test_keys_we_do_not_use_are_named_in_warnings():
    extra = {"training_scripts": "/x", "hca_id_pattern": "bnxt_re*", "nccl_net_gdr_level": "PHB"}
    warnings = plan(JAX_CURRENT, {"config": {**SITE["config"], **extra}})["warnings"]
    assert "config.training_scripts: ignored (the run uses the framework's own training script)" in warnings
    assert any(w.startswith("config.hca_id_pattern: ignored") for w in warnings)
    assert not any("nccl_net_gdr_level" in w for w in warnings), "an env-like key is an environment variable"


def test_a_misspelt_nccl_key_is_refused_naming_what_it_may_have_meant():
    with pytest.raises(ConfigError) as refused:
        plan(JAX_CURRENT, {"config": {**SITE["config"], "nccl_socket_ifnmae": "ens1"}})
    assert refused.value.message == (
        "config.nccl_socket_ifnmae: expected a variable NCCL 2.30 or RCCL 2.21 reads (did you mean "
        "nccl_socket_ifname?), found 'nccl_socket_ifnmae', which neither reads")


def test_a_misspelt_variable_in_env_dict_is_refused_in_its_own_spelling():
    env_dict = {**SITE["config"].get("container_config", {}).get("env_dict", {}), "NCCL_IB_GID_INDX": "3"}
    config = {**SITE["config"], "container_config": {**SITE["config"].get("container_config", {}),
                                                     "env_dict": env_dict}}
    with pytest.raises(ConfigError, match=r"config\.container_config\.env_dict\.NCCL_IB_GID_INDX: expected .*"
                                          r"did you mean NCCL_IB_GID_INDEX\?"):
        plan(JAX_CURRENT, {"config": config})


def test_a_variable_nothing_reads_and_close_to_none_is_a_warning_and_still_exported():
    planned = plan(JAX_CURRENT, {"config": {**SITE["config"], "nccl_checks_disable": "1"}})
    assert "config.nccl_checks_disable: NCCL_CHECKS_DISABLE is not a variable NCCL 2.30 or RCCL 2.21 reads; " \
           "exported as is" in planned["warnings"]
    assert planned["nodes"]["n2"]["container"]["env"]["NCCL_CHECKS_DISABLE"] == "1"


def test_lowercase_env_like_keys_reach_the_container_upper_cased():
    extra = {"torch_nccl_async_error_handling": "1", "omp_num_threads": "8", "fi_provider": "verbs",
             "ucx_tls": "rc"}
    env = plan(JAX_CURRENT, {"config": {**SITE["config"], **extra}})["nodes"]["n2"]["container"]["env"]
    assert {k: env[k] for k in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", "FI_PROVIDER", "UCX_TLS")} == \
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "8", "FI_PROVIDER": "verbs", "UCX_TLS": "rc"}


def test_a_token_in_env_vars_is_refused_like_one_in_env_dict():
    with pytest.raises(ConfigError, match=r"config\.env_vars\.HF_TOKEN.*hf_token_file"):
        plan(JAX_CURRENT, {"config": {**SITE["config"], "env_vars": {"HF_TOKEN": "hf_x"}}})


@pytest.mark.parametrize("value", ["", "''", '""', []])
def test_an_empty_list_is_xlas_way_to_turn_a_list_flag_off(value):
    assert render_xla_flags({"xla_gpu_enable_command_buffer": value}) == ("--xla_gpu_enable_command_buffer=", [])


def test_a_tpu_flag_on_gpu_nodes_is_refused_naming_where_it_belongs():
    with pytest.raises(ConfigError) as error:
        render_xla_flags({"xla_tpu_megacore_fusion_allow_ags": "false"}, "p", platform="gpu")
    assert error.value.path == "p.xla_tpu_megacore_fusion_allow_ags"
    assert "accepted in LIBTPU_INIT_ARGS on TPU nodes" in str(error.value)
    assert "refused in XLA_FLAGS on GPU nodes" in str(error.value)


MEGATRON_SEED = os.path.join(REPO, "configs", "megatron", "mi3xx_megatron_llama_single.json")


def megatron_plan(extra):
    overrides = {"config": {"training_iterations": "10", **extra}}
    return plan_run(load_config_file(MEGATRON_SEED), HOSTS[:1], PlanOptions(
        config_path=MEGATRON_SEED, overrides=overrides, run_id="r1", model="llama3_1_8b", gpu_arch="mi325"))


def test_megatron_root_is_where_the_training_script_runs():
    node = megatron_plan({"megatron_root": "/opt/Megatron-LM/"})["nodes"]["n1"]
    assert node["launch"]["workdir"] == "/opt/Megatron-LM"
    assert "cd /opt/Megatron-LM || finish 126" in node["files"][0]["content"]
    assert megatron_plan({})["nodes"]["n1"]["launch"]["workdir"] == "/workspace/Megatron-LM"
    with pytest.raises(ConfigError, match=r"config\.megatron_root: expected an absolute path"):
        megatron_plan({"megatron_root": "Megatron-LM"})


def test_the_single_node_configs_own_nccl_settings_win_over_the_single_node_defaults():
    name = "jax/mi300x_jax_llama3_1_70b_single.json"
    raw = suite_config(name)["config"]["env_vars"]
    assert raw["NCCL_P2P_DISABLE"] == "1"
    result = plan_run(suite_config(name), HOSTS[:1], PlanOptions(config_path=name, overrides=SITE, run_id="r1"))
    env = result["nodes"]["n1"]["container"]["env"]
    assert result["mode"] == "single_node"
    assert (env["NCCL_P2P_DISABLE"], env["NCCL_IB_DISABLE"], env["NCCL_SHM_DISABLE"]) == ("1", "1", "0")
    for variable, value in raw.items():
        assert env[variable] == value, variable


def test_without_a_setting_of_its_own_a_single_node_run_has_the_suites_defaults():
    name = "jax/mi35x_jax_llama3_1_70b_single.json"
    result = plan_run(suite_config(name), HOSTS[:1], PlanOptions(config_path=name, overrides=SITE, run_id="r1"))
    env = result["nodes"]["n1"]["container"]["env"]
    assert (env["NCCL_P2P_DISABLE"], env["NCCL_IB_DISABLE"], env["NCCL_SHM_DISABLE"]) == ("0", "1", "0")


def test_a_non_boolean_for_a_boolean_key_is_refused_wherever_it_appears():
    config = suite_config(JAX_CURRENT)
    config["config"]["distributed_training"] = "maybe"
    with pytest.raises(ConfigError, match=r"^config\.distributed_training: expected a boolean \(true/false\), "
                                          r"found 'maybe'"):
        plan_run(config, HOSTS, PlanOptions(config_path=JAX_CURRENT, overrides=SITE, run_id="r1"))
    with pytest.raises(ConfigError, match=r"^config\.mock_data: expected a boolean"):
        plan(JAX_CURRENT, overrides={"config": dict(SITE["config"], mock_data="perhaps")})
    versioned = suite_config("jaxmaxtext/mi300x_jaxmaxtext_llama-3.3-70b_distributed.json")
    versioned["training"]["maxtext_config"]["scan_layers"] = "maybe"
    with pytest.raises(ConfigError, match=r"^training\.maxtext_config\.scan_layers: expected a boolean"):
        plan_run(versioned, HOSTS, PlanOptions(config_path="x.json", overrides=SITE, run_id="r1"))
