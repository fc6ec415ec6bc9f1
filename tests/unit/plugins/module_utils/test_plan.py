import copy
import datetime
import json
import os
import re

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import (
    Host,
    PlanOptions,
    plan_run,
)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import compact_plan, node_view

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
GOLDEN = os.path.join(REPO, "tests", "unit", "golden")
HOSTS = [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")]
NETWORK = {"config": {"nic_type": "thor2", "nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_socket_ifname": "ens1",
                      "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}
NETWORK_PATHS = ["config.nccl_ib_hca_list", "config.nccl_socket_ifname", "config.gloo_socket_ifname",
                 "config.nccl_ib_gid_index"]
# config file, model, gpu arch, <changeme> paths without overrides
SEEDS = [
    ("jax/mi300x_distributed_llama3_1_70b.json", None, None,
     ["config.nccl_ib_hca_list", "config.nccl_ib_hca"] + NETWORK_PATHS[1:]),
    ("jax/mi300x_distributed_llama_3_1_405b.json", None, None,
     ["config.nccl_ib_hca_list", "config.nccl_ib_hca"] + NETWORK_PATHS[1:]),
    ("jax/mi300x_singlenode_llama3_1_70b.json", None, None, []),
    ("jax/mi35x_singlenode_llama_3_1_70b.json", None, None, []),
    ("megatron/mi35x_megatron_llama_single.json", "llama3_1_70b", "mi355", ["config.training_iterations"]),
    ("megatron/mi3xx_megatron_llama_single.json", "llama3_1_8b", "mi325", ["config.training_iterations"]),
    ("megatron/mi3xx_megatron_llama_distributed.json", "llama3_1_8b", "mi300x",
     ["config.training_iterations", "config.nic_type"] + NETWORK_PATHS),
]


def config(name):
    return load_config_file(os.path.join(REPO, "configs", name))


def plan(name, overrides=None, hosts=None, **options):
    options.setdefault("run_id", "r1")
    hosts = HOSTS if hosts is None else hosts
    if name == MEGATRON_DISTRIBUTED and options.get("model") and len(hosts) != 2:
        overrides = fitting_batch(overrides, options["model"], options["gpu_arch"], len(hosts))
    return plan_run(config(name), hosts, PlanOptions(config_path="/c/" + name, overrides=overrides, **options))


MEGATRON_DISTRIBUTED = "megatron/mi3xx_megatron_llama_distributed.json"


def fitting_batch(overrides, model, arch, nodes):
    """A global batch Megatron-LM accepts on this many nodes (the seed's 128 fits 2 nodes of 8 GPUs)."""
    merged = copy.deepcopy(overrides or {})
    params = merged.setdefault("model_params", {}).setdefault("multi_node", {}).setdefault(model, {})
    params.setdefault(arch, {}).update(micro_batch_size="1", batch_size=str(8 * nodes))
    return merged


@pytest.mark.parametrize("name, model, arch, unset", SEEDS)
def test_seed_configs_refused_listing_every_changeme_path(name, model, arch, unset):
    if not unset:
        assert plan(name, model=model, gpu_arch=arch)["nodes"]
        return
    with pytest.raises(ConfigError) as err:
        plan(name, model=model, gpu_arch=arch)
    assert sorted(problem.path for problem in err.value.problems) == sorted(unset)
    assert all(problem.found == "<changeme>" for problem in err.value.problems)


@pytest.mark.parametrize("name, model, arch, unset", SEEDS)
def test_seed_configs_plan_with_overrides(name, model, arch, unset):
    result = plan(name, NETWORK, model=model, gpu_arch=arch, iterations=12)
    assert sorted(result["nodes"]) == ["n1", "n2"]
    assert result["total_steps"] == 12
    assert result["final_step"] == (11 if name.startswith("jax") else 12)
    assert not [w for w in result["warnings"] if "ignored" in w], "the planner uses every key of the seeds"
    for node in result["nodes"].values():
        assert all(isinstance(value, str) for value in node["container"]["env"].values())
        assert "<changeme>" not in json.dumps(node)
        assert "{user-id}" not in json.dumps(node)


def test_multi_node_derives_nnodes_rank_and_coordinator():
    result = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK)
    assert result["jobs"] == [{"name": "job-0", "hosts": ["n1", "n2"], "nnodes": 2,
                               "coordinator_address": "10.0.0.1", "coordinator_port": 1234}]
    env = result["nodes"]["n2"]["container"]["env"]
    assert (env["NNODES"], env["NODE_RANK"], env["JAX_PROCESS_INDEX"]) == ("2", "1", "1")
    assert env["JAX_COORDINATOR_IP"] == "10.0.0.1"
    assert env["JAX_COORDINATOR_ADDRESS"] == "10.0.0.1:1234"
    assert env["NCCL_IB_HCA"] == "bnxt_re0,bnxt_re1"
    assert "NCCL_IB_DISABLE" not in env


def test_megatron_master_and_last_node_prints_steps():
    result = plan("megatron/mi3xx_megatron_llama_distributed.json", NETWORK, model="llama3_1_70b",
                  gpu_arch="mi300x", iterations=10)
    n1, n2 = result["nodes"]["n1"], result["nodes"]["n2"]
    assert (n1["prints_steps"], n2["prints_steps"]) == (False, True)
    assert n2["container"]["env"]["MASTER_ADDR"] == "10.0.0.1"
    assert n2["container"]["env"]["MASTER_PORT"] == "6000"
    assert n2["launch"]["workdir"] == "/workspace/Megatron-LM"
    assert result["warmup_steps"] == 2


def test_single_node_config_on_several_hosts_is_one_job_per_host():
    result = plan("jax/mi300x_singlenode_llama3_1_70b.json")
    assert [job["hosts"] for job in result["jobs"]] == [["n1"], ["n2"]]
    for node in result["nodes"].values():
        env = node["container"]["env"]
        assert (node["node_rank"], node["nnodes"], node["coordinator_address"]) == (0, 1, "localhost")
        assert (env["NNODES"], env["NODE_RANK"], env["JAX_COORDINATOR_IP"]) == ("1", "0", "localhost")
        assert (env["NCCL_IB_DISABLE"], env["NCCL_SHM_DISABLE"], env["NCCL_P2P_DISABLE"]) == ("1", "0", "0")


def test_changeme_thresholds_are_not_set_and_directions_are_right():
    result = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK)
    assert [(t["metric"], t["set"], t["value"]) for t in result["thresholds"]] == [
        ("tflops_per_sec_per_gpu", False, None), ("tokens_per_sec_per_gpu", False, None)]
    single = plan("megatron/mi3xx_megatron_llama_single.json", model="llama3_1_8b", gpu_arch="mi300x",
                  iterations=10)
    by_metric = {t["metric"]: t for t in single["thresholds"]}
    assert by_metric["elapsed_time_per_iteration"]["direction"] == "lower"
    assert by_metric["elapsed_time_per_iteration"]["kind"] == "max"
    assert by_metric["tokens_per_gpu"] == {"metric": "tokens_per_gpu", "kind": "min", "value": 6500.0,
                                           "direction": "higher", "set": True,
                                           "path": "model_params.single_node.llama3_1_8b.mi300x.result_dict.tokens_per_gpu"}


def test_user_id_resolves_to_the_remote_user_and_the_run_dir_follows():
    result = plan("jax/mi300x_singlenode_llama3_1_70b.json", remote_user="alice")
    node = result["nodes"]["n1"]
    assert node["run_dir"] == "/home/alice/LOGS/clusterval/r1"
    assert "/home/alice:/home/alice" in node["container"]["volumes"]
    assert node["container"]["env"]["HF_HOME"] == "/home/alice/cache"


def test_seed_70b_config_trains_70b():
    result = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK)
    assert result["trains_model"] == "llama3.1-70b"
    assert any("this run trains llama3.1-70b" in warning for warning in result["warnings"])
    maxtext_yml = yaml.safe_load(result["nodes"]["n1"]["files"][1]["content"])
    assert maxtext_yml["model_name"] == "llama3.1-70b"
    model = result["effective_model"]
    assert (model["name"], model["params_b"], model["dims"]["num_layers"], model["dims"]["emb_dim"]) == (
        "llama3.1-70b", 70.55, 80, 8192)


def test_nnodes_mismatch_warns_and_null_override_removes_a_mount():
    overrides = copy.deepcopy(NETWORK)
    overrides["config"].update(nnodes="4", container_config={"volume_dict": {"/dev/infiniband": None}})
    result = plan("jax/mi300x_distributed_llama3_1_70b.json", overrides)
    assert any("config.nnodes says 4" in warning for warning in result["warnings"])
    assert not any(v.startswith("/dev/infiniband:") for v in result["nodes"]["n1"]["container"]["volumes"])


def test_simulator_image_marks_the_plan_simulated():
    result = plan("jax/mi300x_singlenode_llama3_1_70b.json",
                  {"config": {"container_image": "clusterval/simulator:latest"}})
    assert result["simulated"] is True


def test_the_container_runs_the_launch_script_and_the_token_stays_out_of_its_spec():
    node = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK)["nodes"]["n1"]
    launch_file = next(f for f in node["files"] if f["path"].endswith("/launch.sh"))
    assert node["container"]["command"] == node["launch"]["argv"] == ["sh", launch_file["path"]]
    assert not any("TOKEN" in key for key in node["container"]["env"])
    token_path = node["launch"]["hf_token_path"]
    assert "HF_TOKEN=$(cat %s) && export HF_TOKEN" % token_path in launch_file["content"]


def test_a_token_handed_over_by_the_controller_is_the_runs_own_copy_in_the_run_dir():
    options = PlanOptions(config_path="/c/x.json", run_id="r1", hf_token_handed=True)
    plan = plan_run(config("jax/mi300x_singlenode_llama3_1_70b.json"), HOSTS, options)
    node = node_view(plan, HOSTS[0].name)
    assert node["hf_token_file"] == node["run_dir"] + "/.hf_token", \
        "in the run dir's mount, where the node's supervisor removes it when the job ends"


def test_default_run_id_uses_utc_time_and_config_name():
    options = PlanOptions(config_path="/c/x.json", now=datetime.datetime(2026, 11, 21, 10, 15, 0))
    first = plan_run(config("jax/mi300x_singlenode_llama3_1_70b.json"), HOSTS, options)
    second = plan_run(config("jax/mi300x_singlenode_llama3_1_70b.json"), HOSTS, options)
    assert re.fullmatch(r"20261121T101500Z-[0-9a-f]{6}-x", first["run_id"])
    assert first["run_id"] != second["run_id"], "two runs in the same second share an id"


def test_golden_maxtext_and_megatron_renderings():
    jax = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK)["nodes"]["n2"]
    megatron = plan("megatron/mi35x_megatron_llama_single.json", model="llama3_1_70b", gpu_arch="mi355",
                    iterations=20)["nodes"]["n1"]
    rendered = {
        "maxtext_env.json": json.dumps(jax["container"]["env"], indent=1, sort_keys=True) + "\n",
        "maxtext_launch.sh": jax["files"][0]["content"],
        "maxtext.yml": jax["files"][1]["content"],
        "maxtext_command.txt": jax["launch"]["command"] + "\n",
        "megatron_env.json": json.dumps(megatron["container"]["env"], indent=1, sort_keys=True) + "\n",
        "megatron_launch.sh": megatron["files"][0]["content"],
    }
    for name, text in rendered.items():
        path = os.path.join(GOLDEN, name)
        if os.environ.get("UPDATE_GOLDEN"):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        with open(path, encoding="utf-8") as handle:
            assert text == handle.read(), name


JAX_SINGLE = "jax/mi300x_singlenode_llama3_1_70b.json"
MEG_SINGLE = "megatron/mi3xx_megatron_llama_single.json"
BAD_INPUT = [
    (JAX_SINGLE, {"config": {"training_steps": "0"}}, {}, "config.training_steps", ">= 1"),
    (JAX_SINGLE, {"config": {"training_steps": "many"}}, {}, "config.training_steps", "an integer"),
    (JAX_SINGLE, {}, {"iterations": -3}, "iterations", ">= 1"),
    (JAX_SINGLE, {"config": {"container_name": "bad name!"}}, {}, "config.container_name", "Docker container"),
    (JAX_SINGLE, {"config": {"container_config": {"env_dict": {"BAD-NAME": "1"}}}}, {},
     "config.container_config.env_dict.BAD-NAME", "environment variable name"),
    (JAX_SINGLE, {"config": {"nccl_debug": "INFO\nrm -rf /"}}, {}, "config.nccl_debug", "single-line"),
    (JAX_SINGLE, {"config": {"shm_size": "256G\0"}}, {}, "config.shm_size", "without NUL"),
    (JAX_SINGLE, {"model_params": {"single_node": {"llama3.1-70b": {"mi300x": {"result_dict": {
        "tokens_per_sec_per_gpu": "fast"}}}}}}, {},
     'model_params.single_node["llama3.1-70b"].mi300x.result_dict.tokens_per_sec_per_gpu', "a number"),
    (JAX_SINGLE, {"model_params": {"single_node": {"llama3.1-70b": {"mi300x": {
        "ici_fsdp_parallelism": "4"}}}}}, {}, 'model_params.single_node["llama3.1-70b"].mi300x', "GPUs per node"),
    (JAX_SINGLE, {"model_params": {"single_node": {"llama3.1-70b": {"mi300x": {"xla_flags": {
        "xla_gpu_graph_level": "high"}}}}}}, {}, "xla_flags.xla_gpu_graph_level", "an integer"),
    (JAX_SINGLE, {"config": {"container_config": {"device_list": ["dev/kfd"]}}}, {},
     "config.container_config.device_list[0]", "host[:container"),
    (JAX_SINGLE, {"config": None}, {}, "config", "an object"),
    (JAX_SINGLE, {}, {"model": "llama9"}, 'model_params.single_node.llama9', "llama3.1-70b"),
    (JAX_SINGLE, {}, {"gpu_arch": "mi999"}, "mi999", "mi300x"),
    (JAX_SINGLE, {}, {"run_id": "../etc"}, "run_id", "letters"),
    (MEG_SINGLE, {"model_params": {"single_node": {"llama3_1_8b": {"mi300x": {"model_size": "13"}}}}},
     {"model": "llama3_1_8b", "gpu_arch": "mi300x", "iterations": 5},
     "model_params.single_node.llama3_1_8b.mi300x.model_size", "8 or 70"),
]


@pytest.mark.parametrize("name, overrides, options, path, expected", BAD_INPUT)
def test_bad_input_names_path_and_expectation(name, overrides, options, path, expected):
    with pytest.raises(ConfigError) as err:
        plan(name, overrides, **options)
    assert path in err.value.path
    assert expected in str(err.value)


def test_no_hosts_is_an_error():
    with pytest.raises(ConfigError, match="hosts: expected at least one host"):
        plan(JAX_SINGLE, hosts=[])


# -- compact form ---------------------------------------------------------------------------------

THREE_HOSTS = [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2"), Host("n3", "10.0.0.3")]
SINGLE_NODE_SEEDS = [(name, model, arch) for name, model, arch, dummy in SEEDS if "single" in name]


def hosts(count):
    return [Host("node%04d" % index, "10.1.%d.%d" % (index // 256, index % 256)) for index in range(count)]


def assert_node_view_gives_every_full_node(full):
    compact = json.loads(json.dumps(compact_plan(full)))
    assert compact["form"] == "compact" and full["form"] == "full"
    assert list(compact["nodes"]) == list(full["nodes"])
    for host, node in full["nodes"].items():
        assert node_view(compact, host) == node
        assert node_view(full, host) is node
    return compact


@pytest.mark.parametrize("name, model, arch, unset", SEEDS)
def test_node_view_of_the_compact_form_is_the_full_node_for_every_seed(name, model, arch, unset):
    full = plan(name, NETWORK, hosts=THREE_HOSTS, model=model, gpu_arch=arch, iterations=12)
    compact = assert_node_view_gives_every_full_node(full)
    assert {key: value for key, value in compact.items() if key not in ("form", "jobs", "nodes", "node_shared")} \
        == {key: value for key, value in full.items() if key not in ("form", "jobs", "nodes")}
    assert [{key: value for key, value in job.items() if key != "node_shared"} for job in compact["jobs"]] \
        == full["jobs"]


@pytest.mark.parametrize("name, model, arch", SINGLE_NODE_SEEDS)
def test_node_view_of_single_node_configs_on_several_hosts(name, model, arch):
    full = plan(name, NETWORK, hosts=hosts(5), model=model, gpu_arch=arch, iterations=12)
    compact = assert_node_view_gives_every_full_node(full)
    assert len(compact["jobs"]) == 5
    assert compact["jobs"][3]["node_shared"] == {"container": {"labels": {"clusterval.job": "job-3"}}}
    assert compact["nodes"]["node0003"] == {"host": "node0003", "address": "10.1.0.3", "job": "job-3",
                                            "node_rank": 0, "prints_steps": True}


def test_compact_nodes_keep_only_what_differs_and_files_are_stored_once():
    full = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK, hosts=THREE_HOSTS)
    compact = compact_plan(full)
    assert compact["nodes"]["n2"] == {"host": "n2", "address": "10.0.0.2", "job": "job-0", "node_rank": 1,
                                      "prints_steps": True,
                                      "container": {"env": {"NODE_RANK": "1", "JAX_PROCESS_INDEX": "1"}}}
    shared = compact["node_shared"]
    assert [item["path"] for item in shared["files"]] == ["/home/root/LOGS/clusterval/r1/launch.sh",
                                                          "/home/root/LOGS/clusterval/r1/maxtext.yml"]
    assert shared["container"]["env"]["JAX_PROCESS_COUNT"] == "3"
    assert "NODE_RANK" not in shared["container"]["env"]
    assert shared["container"]["labels"] == {
        "clusterval.run_id": "r1", "clusterval.job": "job-0", "clusterval.run_dir": "/home/root/LOGS/clusterval/r1",
        "clusterval.managed_by": "clusterval.training", "clusterval.data_cache_dir": "/home/root/cache"}
    assert json.dumps(compact).count("#!/bin/sh") == 1
    assert json.dumps(full).count("#!/bin/sh") == 3


def test_megatron_compact_nodes_keep_their_rank_and_step_printing():
    full = plan("megatron/mi3xx_megatron_llama_distributed.json", NETWORK, hosts=THREE_HOSTS,
                model="llama3_1_8b", gpu_arch="mi300x", iterations=10)
    nodes = compact_plan(full)["nodes"]
    assert [(node["node_rank"], node["prints_steps"], node["container"]["env"]) for node in nodes.values()] == [
        (0, False, {"NODE_RANK": "0"}), (1, False, {"NODE_RANK": "1"}), (2, True, {"NODE_RANK": "2"})]


def test_a_value_that_differs_on_one_node_stays_with_that_node():
    full = plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK, hosts=THREE_HOSTS)
    full["nodes"]["n3"]["gpus"] = 4
    full["nodes"]["n3"]["container"]["env"]["EXTRA"] = "only-n3"
    compact = assert_node_view_gives_every_full_node(full)
    assert "gpus" not in compact["node_shared"]
    assert compact["nodes"]["n1"]["gpus"] == 8
    assert compact["nodes"]["n3"]["container"]["env"]["EXTRA"] == "only-n3"


@pytest.mark.parametrize("name, model, arch", [
    ("jax/mi300x_distributed_llama3_1_70b.json", None, None),
    ("megatron/mi3xx_megatron_llama_distributed.json", "llama3_1_8b", "mi300x"),
    ("jax/mi300x_singlenode_llama3_1_70b.json", None, None),
    ("megatron/mi35x_megatron_llama_single.json", "llama3_1_70b", "mi355"),
])
def test_compact_form_grows_by_at_most_400_bytes_per_host(name, model, arch):
    def size(count):
        full = plan(name, NETWORK, hosts=hosts(count), model=model, gpu_arch=arch, iterations=12)
        return len(json.dumps(compact_plan(full)))
    small, large = size(2), size(258)
    assert (large - small) / 256 <= 400
    assert size(2) < 2 * len(json.dumps(plan(name, NETWORK, hosts=hosts(1), model=model, gpu_arch=arch,
                                             iterations=12)))


def test_compact_plan_of_a_compact_plan_is_the_same():
    compact = compact_plan(plan(JAX_SINGLE))
    assert compact_plan(compact) == compact


def test_node_view_of_an_unknown_host_names_the_hosts_of_the_plan():
    compact = compact_plan(plan(JAX_SINGLE))
    with pytest.raises(ConfigError, match=r"plan.nodes.n9: expected a host of the plan \(n1, n2\)"):
        node_view(compact, "n9")
    with pytest.raises(ConfigError, match="expected a training plan"):
        node_view({"framework": "maxtext"}, "n1")
    broken = dict(compact, jobs=[])
    with pytest.raises(ConfigError, match="plan.nodes.n1.job: expected the name of a job"):
        node_view(broken, "n1")


def test_megatron_global_batch_that_the_data_parallel_size_does_not_divide_is_refused():
    three = [Host("n%d" % i, "10.0.0.%d" % i) for i in (1, 2, 3)]
    with pytest.raises(ConfigError, match=r"batch_size: expected a multiple of micro_batch_size x data-parallel size "
                                          r"= 2 x 24 = 48 .*found 128"):
        plan_run(config(MEGATRON_DISTRIBUTED), three,
                 PlanOptions(config_path="/c/m.json", run_id="r1", model="llama3_1_8b", gpu_arch="mi300x",
                             iterations=10, overrides=NETWORK))


def test_two_host_names_with_one_address_are_refused():
    with pytest.raises(ConfigError, match=r"hosts\[1\]\.address: expected an address no other host has "
                                          r"\(n1 already has 10\.0\.0\.1\)"):
        plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK, hosts=[Host("n1", "10.0.0.1"), Host("n2", "10.0.0.1")])


@pytest.mark.parametrize("container_config,message", [
    (["x"], r"config\.container_config: expected an object, found a list"),
    ({"env_dict": "x"}, r"config\.container_config\.env_dict: expected an object of variable names to values"),
    ({"volume_dict": ["/a"]}, r"config\.container_config\.volume_dict: expected an object of host paths"),
    ({"env_dict": {"HF_TOKEN": "hf_secret"}}, r"env_dict\.HF_TOKEN: expected no secret in env_dict: .*hf_token_file"),
    ({"volume_dict": {"data": "/data"}}, r"volume_dict\.data: expected an absolute host path as the key"),
])
def test_container_config_of_the_wrong_shape_or_with_a_secret_is_refused_by_path(container_config, message):
    raw = config("jax/mi300x_distributed_llama3_1_70b.json")
    raw["config"]["container_config"] = container_config
    with pytest.raises(ConfigError, match=message) as err:
        plan_run(raw, HOSTS, PlanOptions(config_path="/c/j.json", run_id="r1", overrides=NETWORK))
    assert "hf_secret" not in str(err.value)


def test_absurd_step_counts_are_refused():
    with pytest.raises(ConfigError, match=r"config\.training_steps: expected at most 1000000 steps"):
        plan("jax/mi300x_distributed_llama3_1_70b.json", NETWORK, iterations=10 ** 23)


def test_duplicate_json_keys_are_refused_naming_the_path():
    from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_text
    with pytest.raises(ConfigError, match=r"config\.container_config\.env_dict\.A: expected each key once"):
        load_config_text('{"config": {"container_config": {"env_dict": {"A": "1", "A": "2"}}}, "model_params": {}}')


def test_the_plan_says_which_jaxlib_it_checked_the_xla_flags_against():
    image = {"config": {"container_image": "clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1"}}
    checked = plan("jax/mi300x_singlenode_llama3_1_70b.json", image)
    assert checked["xla_flags_checked"]["jaxlib"] == "0.12.0.1"
    assert checked["xla_flags_checked"]["text"] == (
        "XLA flags checked against jaxlib 0.12.0.1 (from the image tag "
        "clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1)")
    graph = [w for w in checked["warnings"] if "does not know xla_gpu_graph_level" in w]
    assert len(graph) == 1 and graph[0].startswith('model_params.single_node["llama3.1-70b"].mi300x.xla_flags.xla_gpu_graph_level: '), graph
    # the config key wins over the tag
    older = plan("jax/mi300x_singlenode_llama3_1_70b.json", {"config": {**image["config"], "jaxlib_version": "0.4.35"}})
    assert older["xla_flags_checked"]["source"] == "config.jaxlib_version"
    assert not [w for w in older["warnings"] if "does not know xla_gpu_graph_level" in w]
    assert [w for w in older["warnings"] if "does not know xla_gpu_first_collective_call_terminate" in w]
    # the seed's ROCm image names no jaxlib: the plan says the catalogue alone was used
    seed = plan("jax/mi300x_singlenode_llama3_1_70b.json")
    assert seed["xla_flags_checked"]["jaxlib"] is None
    assert "neither config.jaxlib_version nor the image tag" in seed["xla_flags_checked"]["text"]


def test_a_run_of_the_real_framework_image_says_what_is_real_and_what_is_simulated():
    image = "clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1"
    real = plan("jax/mi300x_singlenode_llama3_1_70b.json", {"config": {"container_image": image}})
    assert real["simulated"] is False
    assert real["realism"]["real"][0] == "MaxText's own train.py (maxtext 0.2.5 from PyPI)"
    assert "jaxlib 0.12.0.1" in real["realism"]["real"][1]
    assert [part.split(":")[0] for part in real["realism"]["simulated"]] == ["the GPUs", "RDMA"]
    assert "realism" not in plan("jax/mi300x_singlenode_llama3_1_70b.json")
    assert "realism" not in plan("jax/mi300x_singlenode_llama3_1_70b.json",
                                 {"config": {"container_image": "clusterval/simulator:latest"}})
