"""The catalogue of the variables NCCL, RCCL and ROCR read (their sources, named in the module)."""
import pytest

from ansible_collections.clusterval.training.plugins.module_utils._env_catalogue import unread


@pytest.mark.parametrize("name", ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_DEBUG",
                                  "NCCL_PROTO", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE",
                                  "NCCL_NET_GDR_LEVEL", "RCCL_MSCCL_ENABLE", "HSA_ENABLE_SDMA", "HSA_NO_SCRATCH_RECLAIM"])
def test_the_variables_the_seeds_and_the_vendor_scripts_set_are_read(name):
    assert unread(name) is None


@pytest.mark.parametrize("name", ["GPU_MAX_HW_QUEUES", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "GLOO_SOCKET_IFNAME"])
def test_a_family_the_catalogue_does_not_hold_is_not_judged(name):
    assert unread(name) is None


def test_a_near_miss_of_nccl_is_refused_with_what_it_may_have_meant():
    assert unread("NCCL_SOCKET_IFNMAE") == ("NCCL 2.30 or RCCL 2.21", ["NCCL_SOCKET_IFNAME"], True)


def test_a_near_miss_of_rocr_is_only_a_warning_since_other_rocm_parts_read_hsa_variables():
    reader, meant, refuse = unread("HSA_ENABLE_SDAM")
    assert reader == "the ROCm runtime (ROCR)" and not refuse


def test_a_retired_variable_is_unread_but_not_refused():
    assert unread("NCCL_CHECKS_DISABLE") == ("NCCL 2.30 or RCCL 2.21", [], False)
