import pytest

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._xla import (
    CATALOGUE, closest_flag, render_xla_flags,
)


def test_renders_in_order_with_lowercase_booleans():
    flags = {"xla_gpu_enable_cublaslt": "True", "xla_gpu_graph_level": "0",
             "xla_gpu_enable_all_gather_combine_by_dim": "FALSE",
             "xla_gpu_all_gather_combine_threshold_bytes": "137438953472",
             "xla_enable_async_all_gather": "auto", "xla_disable_hlo_passes": ["a", "b"]}
    rendered, warnings = render_xla_flags(flags)
    assert rendered == ("--xla_gpu_enable_cublaslt=true --xla_gpu_graph_level=0 "
                        "--xla_gpu_enable_all_gather_combine_by_dim=false "
                        "--xla_gpu_all_gather_combine_threshold_bytes=137438953472 "
                        "--xla_enable_async_all_gather=kAuto --xla_disable_hlo_passes=a,b")
    assert warnings == []


def test_unknown_flag_warns_with_closest_name():
    rendered, warnings = render_xla_flags({"xla_gpu_enable_cublasslt": "true"}, "p.xla_flags")
    assert rendered == "--xla_gpu_enable_cublasslt=true"
    assert len(warnings) == 1
    assert "p.xla_flags.xla_gpu_enable_cublasslt" in warnings[0]
    assert "did you mean xla_gpu_enable_cublaslt?" in warnings[0]


@pytest.mark.parametrize("name, value, expected", [
    ("xla_gpu_enable_cublaslt", "yes please", "a boolean"),
    ("xla_enable_async_all_gather", "sometimes", "true, false or kAuto"),
    ("xla_gpu_graph_level", "high", "an integer"),
    ("xla_gpu_all_reduce_combine_threshold_bytes", "-5", "a non-negative integer"),
    ("xla_dump_to", "/a path", "without spaces"),
    ("XLA Bad", "1", "an XLA flag name"),
])
def test_bad_values_name_the_flag(name, value, expected):
    with pytest.raises(ConfigError) as err:
        render_xla_flags({name: value}, "xf")
    assert err.value.path.startswith("xf")
    assert expected in str(err.value)


def test_catalogue_holds_seed_flags_with_types():
    assert CATALOGUE["xla_gpu_enable_latency_hiding_scheduler"] == "bool"
    assert CATALOGUE["xla_tpu_enable_async_collective_fusion_fuse_all_gather"] == "tristate"
    assert CATALOGUE["xla_gpu_reduce_scatter_combine_threshold_bytes"] == "bytes"
    assert closest_flag("totally_unrelated") == ""
