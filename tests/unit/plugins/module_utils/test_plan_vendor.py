"""The plan per GPU vendor: the container spec (devices and groups, or Docker's device request), the environment
(no ROCm-only variable on NVIDIA nodes) and the image, for the seed JAX and Megatron-LM configs."""
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
MEGATRON = "megatron/mi3xx_megatron_llama_distributed.json"
JAX = "jax/mi300x_distributed_llama3_1_70b.json"
NGC = "nvcr.io/nvidia/pytorch:25.01-py3"
JAX_TOOLBOX = "ghcr.io/nvidia/jax:maxtext-2025-01-10"
CX7 = {"config": {"nic_type": "cx7", "nccl_ib_hca_list": "mlx5_0,mlx5_1", "nccl_ib_hca": "mlx5_0,mlx5_1",
                  "nccl_socket_ifname": "ens1", "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3",
                  "training_iterations": "12", "nnodes": "2"}}
ROCM_ONLY = ("HSA_", "HIP_", "RCCL_", "NVTE_CK_", "GPU_MAX_HW_QUEUES", "ROCM_")


def hosts(vendor=None):
    return [Host("n1", "10.0.0.1", vendor), Host("n2", "10.0.0.2", vendor)]


def plan(name, host_list, overrides=None, **options):
    options.setdefault("run_id", "r1")
    overrides = CX7 if overrides is None else overrides
    if name == MEGATRON:
        options.setdefault("model", "llama3_1_8b")
        options.setdefault("gpu_arch", "mi300x")
    return plan_run(load_config_file(os.path.join(REPO, "configs", name)), host_list,
                    PlanOptions(config_path="/c/" + name, overrides=overrides, **options))


def test_megatron_seed_on_nvidia_nodes_asks_docker_for_the_gpus():
    result = plan(MEGATRON, hosts("nvidia"), container_image=NGC)
    assert (result["gpu_vendor"], result["gpu_vendor_source"]) == ("nvidia", "the inventory's training_gpu_vendor")
    container = result["nodes"]["n1"]["container"]
    assert container["image"] == NGC
    assert container["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert container["groups"] == []
    assert not any("/dev/kfd" in d or "/dev/dri" in d for d in container["devices"])
    assert "/dev/infiniband/rdma_cm" in container["devices"]
    assert any("/dev/kfd" in w and "not given to the container on nvidia GPUs" in w for w in result["warnings"])
    env = container["env"]
    assert env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1" and "LD_LIBRARY_PATH" not in env
    assert not [name for name in env if name.startswith(ROCM_ONLY)]


def test_amd_nodes_still_get_kfd_dri_and_the_groups():
    result = plan(MEGATRON, hosts())
    container = result["nodes"]["n1"]["container"]
    assert result["gpu_vendor"] == "amd"
    assert {"/dev/kfd", "/dev/dri"} <= set(container["devices"])
    assert container["groups"] == ["video", "render"] and "device_requests" not in container
    assert container["env"]["LD_LIBRARY_PATH"].startswith("/opt/rocm/lib")


def test_jax_seed_on_nvidia_drops_the_rocm_only_environment():
    overrides = {"config": dict(CX7["config"], training_steps="12")}
    del overrides["config"]["training_iterations"]
    amd = plan(JAX, hosts(), overrides)["nodes"]["n1"]["container"]["env"]
    assert {"GPU_MAX_HW_QUEUES", "NVTE_CK_BWD_V3", "NVTE_CK_V3_BF16_CVT"} <= set(amd)
    result = plan(JAX, hosts("nvidia"), overrides, container_image=JAX_TOOLBOX)
    node = result["nodes"]["n1"]
    assert not [name for name in node["container"]["env"] if name.startswith(ROCM_ONLY)]
    assert "XLA_FLAGS" in node["container"]["env"]
    assert any("GPU_MAX_HW_QUEUES" in w and "not set on nvidia GPUs" in w for w in result["warnings"])
    # NVIDIA's JAX-Toolbox image keeps MaxText in /opt/maxtext
    assert node["launch"]["workdir"] == "/opt/maxtext"
    assert node["launch"]["script_candidates"][0].startswith("/opt/maxtext/")


def test_vendor_from_the_config_and_from_the_image():
    by_config = {"config": dict(CX7["config"], gpu_vendor="nvidia", container_image=NGC)}
    assert plan(MEGATRON, hosts(), by_config)["gpu_vendor_source"] == "config.gpu_vendor"
    by_image = plan(MEGATRON, hosts(), container_image=NGC)
    assert (by_image["gpu_vendor"], by_image["gpu_vendor_source"]) == ("nvidia", "the image")


def test_the_image_per_vendor_from_the_config():
    images = {"config": dict(CX7["config"], container_images={"nvidia": NGC, "amd": "rocm/megatron-lm:v25.5_py310"})}
    assert plan(MEGATRON, hosts("nvidia"), images)["nodes"]["n1"]["container"]["image"] == NGC
    assert plan(MEGATRON, hosts(), images)["nodes"]["n1"]["container"]["image"] == "rocm/megatron-lm:v25.5_py310"


def test_a_rocm_image_on_nvidia_nodes_is_refused_before_any_node():
    with pytest.raises(ConfigError) as error:
        plan(MEGATRON, hosts("nvidia"))
    assert error.value.path == "config.container_image"
    assert "rocm/megatron-lm:v25.5_py310" in error.value.message and "an image for nvidia GPUs" in error.value.message


def test_hosts_of_two_vendors_are_refused_naming_the_host():
    with pytest.raises(ConfigError) as error:
        plan(MEGATRON, [Host("n1", "10.0.0.1", "nvidia"), Host("n2", "10.0.0.2", "amd")], container_image=NGC)
    assert error.value.path == "hosts[1].gpu_vendor" and "n2" in error.value.message


def test_an_unknown_vendor_names_its_path():
    with pytest.raises(ConfigError) as error:
        plan(MEGATRON, hosts(), {"config": dict(CX7["config"], gpu_vendor="intel")})
    assert error.value.path == "config.gpu_vendor"


def test_cdi_and_some_gpus_only():
    cdi = {"config": dict(CX7["config"], gpu_access="cdi", gpu_ids=["0", "1"])}
    container = plan(MEGATRON, hosts("nvidia"), cdi, container_image=NGC)["nodes"]["n1"]["container"]
    assert container["device_requests"] == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]}]
    with pytest.raises(ConfigError) as error:
        plan(MEGATRON, hosts("nvidia"), {"config": dict(CX7["config"], gpu_access="gpus")}, container_image=NGC)
    assert error.value.path == "config.gpu_access"


def test_amd_params_on_nvidia_nodes_are_said_and_bnxt_hcas_warned():
    # nic_type null: the seed's <changeme> removed, so the HCA names alone say what the NICs are
    thor = {"config": dict(CX7["config"], nccl_ib_hca_list="bnxt_re0", nccl_ib_hca="bnxt_re0", nic_type=None)}
    result = plan(MEGATRON, hosts("nvidia"), thor, container_image=NGC)
    assert any("mi300x block run on nvidia GPUs" in w for w in result["warnings"])
    assert any("nvidia nodes usually have mlx5 HCAs" in w for w in result["warnings"])


def test_connectx_nodes_do_not_mount_the_broadcom_provider_library():
    volumes = plan(MEGATRON, hosts("nvidia"), container_image=NGC)["nodes"]["n1"]["container"]["volumes"]
    assert not [v for v in volumes if "libbnxt_re" in v]
    assert "/lib/libibverbs.d:/lib/libibverbs.d" in volumes
    thor = {"config": dict(CX7["config"], nic_type="thor2", nccl_ib_hca_list="bnxt_re0", nccl_ib_hca="bnxt_re0")}
    amd_volumes = plan(MEGATRON, hosts(), thor)["nodes"]["n1"]["container"]["volumes"]
    assert [v for v in amd_volumes if "libbnxt_re-rdmav34.so" in v]
