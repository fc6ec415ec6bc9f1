"""TPU nodes: the flags split between LIBTPU_INIT_ARGS and XLA_FLAGS as the real libraries answered, the
environment of JAX's TPU discovery, the mesh checked the TPU way, the container's facts."""
import json
import os
import subprocess
from unittest import mock

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _probe
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run
from ansible_collections.clusterval.training.plugins.module_utils._stack_maxtext import check_parallelism
from ansible_collections.clusterval.training.plugins.module_utils._tpu import accelerator_type, worker_env
from ansible_collections.clusterval.training.plugins.module_utils._xla import (
    CATALOGUE, LIBTPU_INIT_ARGS, LIBTPU_KNOWN_IN, MEASURED_LIBTPU, XLA_FLAGS, knows, render_flag_variables)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "xla")
CONFIG = os.path.join(REPO, "configs", "tpu", "v5p_llama3_1_8b.json")
HOSTS = [Host("t1", "10.0.0.1"), Host("t2", "10.0.0.2")]
IMAGE = "clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1"
# Seed 002's table (MaxText's "XLA flags used by MaxText"), in its order.
with open(os.path.join(FIXTURES, "seed-002-flags.json"), encoding="utf-8") as _handle:
    SEED_002 = json.load(_handle)["flags"]


def recorded(version):
    with open(os.path.join(FIXTURES, "libtpu-%s.json" % version), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize("version", MEASURED_LIBTPU)
def test_every_seed_002_flag_lands_where_the_recorded_libtpu_and_jaxlib_accepted_it(version):
    answers = recorded(version)["flags"]
    flags = {name: answers[name][LIBTPU_INIT_ARGS]["value"] for name in SEED_002}
    variables = render_flag_variables([(flags, "m.xla_flags")], "tpu")[0]
    for name in SEED_002:
        placed = [variable for variable, text in variables.items()
                  if any(token.startswith("--%s=" % name) for token in text.split(" "))]
        assert len(placed) == 1, name
        assert answers[name][placed[0]]["accepted"], "%s: libtpu %s refused it in %s" % (name, version, placed[0])


@pytest.mark.parametrize("version", MEASURED_LIBTPU)
def test_the_catalogue_says_what_the_recorded_libtpu_answered(version):
    answers = recorded(version)["flags"]
    assert set(answers) == set(CATALOGUE)
    accepted = {name for name, answer in answers.items() if answer[LIBTPU_INIT_ARGS]["accepted"]}
    assert accepted == {name for name, versions in LIBTPU_KNOWN_IN.items() if version in versions}
    for name, answer in answers.items():
        if not answer[LIBTPU_INIT_ARGS]["accepted"]:
            assert answer[LIBTPU_INIT_ARGS]["line"].startswith("ERROR: Unknown command line flag '%s'" % name)


@pytest.mark.parametrize("version", MEASURED_LIBTPU)
def test_on_a_tpu_host_jaxlib_answers_for_xla_flags_as_on_cpu(version):
    jaxlib = recorded(version)["jaxlib"]
    for name, answer in recorded(version)["flags"].items():
        assert answer[XLA_FLAGS]["accepted"] == bool(knows(name, jaxlib)), name


def test_tristates_are_auto_and_every_token_has_its_dashes():
    flags = {"xla_enable_async_all_gather": "kAuto", "--xla_tpu_enable_async_collective_fusion": True,
             "xla_dump_to": "/tmp/dump"}
    variables, warnings = render_flag_variables([(flags, "m.xla_flags")], "tpu")
    assert variables == {LIBTPU_INIT_ARGS: "--xla_enable_async_all_gather=auto "
                                           "--xla_tpu_enable_async_collective_fusion=true",
                         XLA_FLAGS: "--xla_dump_to=/tmp/dump"}
    assert warnings == []


def test_a_flag_no_tpu_library_accepts_is_refused_naming_the_path_and_where_it_is_accepted():
    with pytest.raises(ConfigError) as error:
        render_flag_variables([({"xla_enable_async_collective_permute": "true"}, "m.xla_flags")], "gpu")
    message = str(error.value)
    assert error.value.path == "m.xla_flags.xla_enable_async_collective_permute"
    assert "accepted in LIBTPU_INIT_ARGS on TPU nodes (measured: libtpu %s)" % ", ".join(MEASURED_LIBTPU) in message


def test_a_gpu_flag_on_tpu_hosts_goes_to_jaxlib_with_a_warning():
    variables, warnings = render_flag_variables([({"xla_gpu_enable_triton_gemm": "false"}, "p")], "tpu")
    assert variables == {XLA_FLAGS: "--xla_gpu_enable_triton_gemm=false"}
    assert warnings == ["p.xla_gpu_enable_triton_gemm: xla_gpu_enable_triton_gemm is a GPU flag: jaxlib accepts "
                        "it in XLA_FLAGS on TPU hosts, where it does nothing"]


# -- the environment of JAX's TPU discovery and the mesh ------------------------------------------

def test_one_slice_workers_know_each_other_and_their_ids():
    assert worker_env("v5p", ["a", "b"], 1, 1) == {
        "TPU_WORKER_HOSTNAMES": "a,b", "TPU_WORKER_ID": "1", "TPU_ACCELERATOR_TYPE": "v5p-16",
        "TPU_SKIP_MDS_QUERY": "1", "MEGASCALE_COORDINATOR_ADDRESS": "a", "MEGASCALE_NUM_SLICES": "1",
        "MEGASCALE_SLICE_ID": "0"}
    assert "MEGASCALE_NUM_SLICES" not in worker_env("v4", ["a"], 0, 1)


def test_several_slices_get_megascale_settings():
    env = worker_env("v6e", ["a", "b", "c", "d"], 3, 2)
    assert env["TPU_WORKER_HOSTNAMES"] == "c,d" and env["TPU_WORKER_ID"] == "1"
    assert env["TPU_ACCELERATOR_TYPE"] == "v6e-8"
    assert (env["MEGASCALE_COORDINATOR_ADDRESS"], env["MEGASCALE_NUM_SLICES"], env["MEGASCALE_SLICE_ID"]) == \
        ("a", "2", "1")


@pytest.mark.parametrize("arch, hosts, expected", [("v4", 1, "v4-8"), ("v5e", 4, "v5litepod-16"),
                                                   ("v5p", 2, "v5p-16"), ("v6e", 2, "v6e-8")])
def test_accelerator_types_count_cores_or_chips_as_google_names_them(arch, hosts, expected):
    assert accelerator_type(arch, hosts) == expected


def check_mesh(params, chips_per_host, nnodes, path):
    check_parallelism(params, chips_per_host, nnodes, path, "tpu")


def test_ici_axes_multiply_to_the_chips_of_a_slice_and_dcn_to_the_slices():
    check_mesh({"ici_fsdp_parallelism": "4", "ici_tensor_parallelism": "2", "dcn_data_parallelism": "2",
                "num_slices": "2"}, 4, 4, "m")
    with pytest.raises(ConfigError) as error:
        check_mesh({"ici_fsdp_parallelism": "8"}, 4, 4, "m")
    assert "equal to the 16 chips in a slice (4 hosts x 4 chips)" in str(error.value)
    with pytest.raises(ConfigError) as error:
        check_mesh({"ici_fsdp_parallelism": "8", "dcn_data_parallelism": "1", "num_slices": "2"}, 4, 4, "m")
    assert "equal to the 2 TPU slices (num_slices)" in str(error.value)
    with pytest.raises(ConfigError) as error:
        check_mesh({"num_slices": "3"}, 4, 4, "m")
    assert error.value.path == "m.num_slices"


# -- a plan for TPU hosts -----------------------------------------------------------------------

def tpu_plan(overrides=None, arch="v5p"):
    overrides = dict(overrides or {})
    overrides["config"] = {"container_image": IMAGE, **overrides.get("config", {})}
    return plan_run(load_config_file(CONFIG), HOSTS, PlanOptions(
        config_path=CONFIG, overrides=overrides, run_id="r1", gpu_arch=arch, gpus_per_node=4))


def test_a_tpu_plan_splits_the_flags_and_joins_the_hosts_the_tpu_way():
    result = tpu_plan()
    container = result["nodes"]["t2"]["container"]
    env = container["env"]
    assert env[LIBTPU_INIT_ARGS].split(" ")[0] == "--xla_tpu_enable_data_parallel_all_reduce_opt=true"
    assert "--xla_enable_async_all_gather=true" in env[LIBTPU_INIT_ARGS].split(" ")
    assert env[XLA_FLAGS] == ""
    assert (env["TPU_WORKER_HOSTNAMES"], env["TPU_WORKER_ID"], env["TPU_ACCELERATOR_TYPE"]) == \
        ("10.0.0.1,10.0.0.2", "1", "v5p-16")
    assert not [name for name in env if name.startswith(("JAX_COORDINATOR", "JAX_PROCESS", "NCCL_"))]
    assert container["privileged"] and container["network_mode"] == "host"
    assert (result["nodes"]["t2"]["coordinator_address"], result["nodes"]["t2"]["coordinator_port"]) == \
        ("10.0.0.1", 8482)
    assert result["gpu_vendor"] == "tpu"
    yaml_text = next(f["content"] for f in result["nodes"]["t1"]["files"] if f["path"].endswith("maxtext.yml"))
    assert "hardware: tpu" in yaml_text.splitlines()


def test_a_block_for_gpus_is_refused_on_tpu_hosts():
    with pytest.raises(ConfigError) as error:
        tpu_plan({"model_params": {"multi_node": {"llama3.1-8b": {"v5p": {"hardware": "gpu"}}}}})
    assert error.value.path.endswith("v5p.hardware") and "tpu on TPU nodes" in str(error.value)


def test_a_mesh_bigger_than_the_slice_is_refused_before_any_node_is_touched():
    with pytest.raises(ConfigError) as error:
        tpu_plan({"model_params": {"multi_node": {"llama3.1-8b": {"v5p": {"ici_fsdp_parallelism": "16"}}}}})
    assert "the 8 chips in a slice (2 hosts x 4 chips)" in str(error.value)


def test_a_tpu_flag_planned_for_gpu_nodes_is_refused_naming_the_config_path():
    with pytest.raises(ConfigError) as error:
        tpu_plan({"config": {"gpu_vendor": "amd"}, "model_params": {"multi_node": {"llama3.1-8b": {"v5p": {
            "hardware": "gpu", "dcn_data_parallelism": "2"}}}}})
    assert error.value.path == 'model_params.multi_node["llama3.1-8b"].v5p.xla_flags.' \
        "xla_tpu_enable_data_parallel_all_reduce_opt"
    assert "accepted in LIBTPU_INIT_ARGS on TPU nodes" in str(error.value)


TPU_INFO = """TPU Chips
┏━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━┓
┃ Chip        ┃ Type         ┃ Devices ┃ PID  ┃
┡━━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━┩
│ /dev/vfio/0 │ TPU v6e chip │ 1       │ 1052 │
│ /dev/vfio/1 │ TPU v6e chip │ 1       │ 1052 │
│ /dev/vfio/2 │ TPU v6e chip │ 1       │ 1052 │
│ /dev/vfio/3 │ TPU v6e chip │ 1       │ 1052 │
└─────────────┴──────────────┴─────────┴──────┘
"""


def test_preflight_counts_a_hosts_chips_with_tpu_info_and_checks_their_arch():
    """tpu-info's chip table (the layout of Google's tool, its chip names as tpu_info/device.py prints them)."""
    tools = [{"path": "/usr/bin/tpu-info", "args": []}]

    def run(argv):
        return subprocess.CompletedProcess(argv, 0, TPU_INFO, "")
    with mock.patch("os.access", return_value=True):
        checks, report = _probe.gpu_probe(tools, {}, "v6e", 4, run, vendor="tpu")
    assert report["vendor"] == "tpu" and report["arch"] == "v6e" and report["count"] == 4
    assert [c["check"] for c in checks if c["ok"]] == ["gpu_vendor", "gpu_arch", "gpu_count"], checks
    with mock.patch("os.access", return_value=True):
        wrong = _probe.gpu_probe(tools, {}, "v5p", 8, run, vendor="tpu")[0]
    assert [c["check"] for c in wrong if not c["ok"]] == ["gpu_arch", "gpu_count"], wrong
