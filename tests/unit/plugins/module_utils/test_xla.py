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
                        "--xla_enable_async_all_gather=auto --xla_disable_hlo_passes=a,b")
    assert warnings == []


def test_unknown_flag_warns_with_closest_name():
    rendered, warnings = render_xla_flags({"xla_gpu_enable_cublasslt": "true"}, "p.xla_flags")
    assert rendered == "--xla_gpu_enable_cublasslt=true"
    assert len(warnings) == 1
    assert "p.xla_flags.xla_gpu_enable_cublasslt" in warnings[0]
    assert "did you mean xla_gpu_enable_cublaslt?" in warnings[0]


@pytest.mark.parametrize("name, value, expected", [
    ("xla_gpu_enable_cublaslt", "yes please", "a boolean"),
    ("xla_enable_async_all_gather", "sometimes", "auto, true or false"),
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


# -- which jaxlib knows which flag (measured with simulator/real/xla_probe.py) ----------------------

from ansible_collections.clusterval.training.plugins.module_utils._xla import (  # noqa: E402
    KNOWN_IN, MEASURED_JAXLIB, checked_version, knows, render_flag_sources, version_from_image,
)


@pytest.mark.parametrize("image, version", [
    ("clusterval/jax-maxtext:maxtext-0.2.5-jaxlib-0.12.0.1", "0.12.0.1"),
    ("rocm/jax:rocm6.0.0-jax0.4.23-py3.9.0", "0.4.23"),
    ("registry:5000/rocm/jax-training:maxtext-v25.9", None),
    ("rocm/jax-training", None),
    ("clusterval/simulator:latest", None),
])
def test_the_image_tag_names_the_jaxlib_version_or_nothing(image, version):
    assert version_from_image(image) == version


def test_the_measured_versions_decide_known_flags():
    assert knows("xla_gpu_graph_level", "0.12.0.1") is False
    assert knows("xla_gpu_graph_level", "0.4.35") is True
    assert knows("xla_gpu_first_collective_call_terminate_timeout_seconds", "0.4.35") is False
    assert knows("xla_gpu_first_collective_call_terminate_timeout_seconds", "0.12.0.1") is True
    assert knows("xla_gpu_enable_cublaslt", "0.12.0.1") is True
    # between two measured versions that agree, they decide; beyond the newest, the newest does
    assert knows("xla_gpu_enable_cublaslt", "0.8.0") is True
    assert knows("xla_enable_async_all_gather", "0.13.1") is False
    # TPU flags belong to libtpu, unknown names to nobody: no version decides them
    assert knows("xla_tpu_megacore_fusion_allow_ags", "0.12.0.1") is None
    assert knows("xla_gpu_no_such_flag", "0.12.0.1") is None


def test_a_version_between_measured_ones_that_disagree_is_undecided():
    first = MEASURED_JAXLIB.index(KNOWN_IN["xla_gpu_first_collective_call_terminate_timeout_seconds"][0])
    before, after = MEASURED_JAXLIB[first - 1], MEASURED_JAXLIB[first]
    between = before + ".99"
    assert before < between and knows("xla_gpu_first_collective_call_terminate_timeout_seconds", between) is None, after


def test_every_listed_version_is_measured_and_every_listed_flag_is_in_the_catalogue():
    for name, versions in KNOWN_IN.items():
        assert name in CATALOGUE
        assert set(versions) <= set(MEASURED_JAXLIB), name


def test_rendering_against_a_version_warns_about_the_flags_it_does_not_know():
    flags = {"xla_gpu_graph_level": "0", "xla_gpu_enable_cublaslt": "true"}
    rendered, warnings = render_flag_sources([(flags, "m.xla_flags")], "gpu",
                                             ("0.12.0.1", "from the image tag x:jaxlib-0.12.0.1"))
    assert rendered == "--xla_gpu_graph_level=0 --xla_gpu_enable_cublaslt=true"
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("m.xla_flags.xla_gpu_graph_level: jaxlib 0.12.0.1 (from the image tag")
    assert "does not know xla_gpu_graph_level" in warnings[0] and "0.6.2 know it" in warnings[0]
    assert render_flag_sources([(flags, "m")], "gpu", ("0.4.35", "config.jaxlib_version"))[1] == []


@pytest.mark.parametrize("value", ["", "latest", "0.12.x", True, None, "1..2"])
def test_a_bad_jaxlib_version_names_the_key(value):
    with pytest.raises(ConfigError) as err:
        checked_version(value, "config.jaxlib_version")
    assert "config.jaxlib_version" in str(err.value)


def test_the_catalogue_agrees_with_every_recorded_jaxlib_answer():
    import json
    import os
    fixtures = os.path.join(os.path.dirname(__file__), *[os.pardir] * 3, "fixtures", "xla")
    for version in MEASURED_JAXLIB:
        with open(os.path.join(fixtures, "jaxlib-%s.json" % version), encoding="utf-8") as handle:
            answer = json.load(handle)
        assert answer["jaxlib"] == version
        for name, result in answer["flags"].items():
            assert knows(name, version) is result["known"], (version, name, result["line"])
            if not result["known"]:
                assert "Unknown flag" in result["line"] and "--%s=" % name in result["line"]
