import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _stack_maxtext
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

SEED_405B_DIMS = {"base_emb_dim": "16384", "base_num_decoder_layers": "126"}


def test_typed_values():
    assert _stack_maxtext.typed("true", "p") is True
    assert _stack_maxtext.typed("False", "p") is False
    assert _stack_maxtext.typed("8192", "p") == 8192
    assert _stack_maxtext.typed("-1", "p") == -1
    assert _stack_maxtext.typed("500_000", "p") == 500000
    assert _stack_maxtext.typed("1.0e-5", "p") == 1e-5
    assert _stack_maxtext.typed("", "p") == ""
    assert _stack_maxtext.typed("bfloat16", "p") == "bfloat16"
    assert _stack_maxtext.typed(["silu", "linear"], "p") == ["silu", "linear"]


def test_non_maxtext_keys_never_reach_maxtext():
    params = {key: "1" for key in _stack_maxtext.NON_MAXTEXT_KEYS}
    params.update({"hf_path": "parquet", "dtype": "bfloat16"})
    assert _stack_maxtext.maxtext_params(params, "p") == {"hf_path": "parquet", "dtype": "bfloat16"}
    assert len(_stack_maxtext.NON_MAXTEXT_KEYS) == 12


def test_yaml_is_typed_and_parses():
    text = _stack_maxtext.build_yaml("run-1", 30, False, None, _stack_maxtext.maxtext_params({
        "quantization": "", "mlp_activations": ["silu", "linear"], "normalization_layer_epsilon": "1.0e-5",
        "scan_layers": "true", "per_device_batch_size": "2", "tokenizer_path": 'a "quoted": path'}, "p"))
    parsed = yaml.safe_load(text)
    assert parsed == {"base_config": "base.yml", "run_name": "run-1", "steps": 30, "enable_checkpointing": False,
                      "quantization": "", "mlp_activations": ["silu", "linear"],
                      "normalization_layer_epsilon": 1e-5, "scan_layers": True, "per_device_batch_size": 2,
                      "tokenizer_path": 'a "quoted": path', "hardware": "gpu"}
    assert text.splitlines()[:2] == ["base_config: base.yml", "run_name: run-1"], "keys in MaxText's order"
    assert "mlp_activations: [silu, linear]" in text.splitlines()


def test_model_key_becomes_model_name_and_contradicting_dimensions_are_reported():
    # The seed 70B config carries 405B dimensions: MaxText's llama3.1-70b model file overrides them.
    check = _stack_maxtext.check_model("llama3.1-70b", SEED_405B_DIMS, "mp")
    assert (check.model_name, check.trains) == ("llama3.1-70b", "llama3.1-70b")
    assert "MaxText's model file wins: this run trains llama3.1-70b" in check.warnings[0]
    assert "base_emb_dim=16384" in check.warnings[0] and "llama3.1-405b's" in check.warnings[0]


def test_model_name_for_every_model_maxtext_knows():
    assert _stack_maxtext.check_model("llama3.1-405b", SEED_405B_DIMS, "mp") == ("llama3.1-405b", "llama3.1-405b", [])
    assert _stack_maxtext.check_model("llama3.1-70b", {}, "mp").model_name == "llama3.1-70b"
    custom = _stack_maxtext.check_model("custom", SEED_405B_DIMS, "mp")
    assert custom.model_name is None and custom.trains == "llama3.1-405b"


def test_user_chosen_model_name_wins_with_a_warning():
    check = _stack_maxtext.check_model("llama3.1-70b", dict(SEED_405B_DIMS, model_name="llama3.1-70b"), "mp")
    assert check.model_name == "llama3.1-70b" and check.trains == "llama3.1-70b"
    assert "contradict" in check.warnings[0]


def test_parallelism_products():
    ok = {"ici_fsdp_parallelism": "8", "ici_data_parallelism": "1", "dcn_fsdp_parallelism": "-1",
          "dcn_data_parallelism": "1"}
    _stack_maxtext.check_parallelism(ok, 8, 4, "p")
    with pytest.raises(ConfigError, match="equal to the 4 GPUs per node"):
        _stack_maxtext.check_parallelism(ok, 4, 4, "p")
    with pytest.raises(ConfigError, match="nodes in the job"):
        _stack_maxtext.check_parallelism(dict(ok, dcn_fsdp_parallelism="2"), 8, 4, "p")
    with pytest.raises(ConfigError, match="at most one -1"):
        _stack_maxtext.check_parallelism(dict(ok, dcn_data_parallelism="-1"), 8, 4, "p")
    with pytest.raises(ConfigError, match="a positive integer or -1"):
        _stack_maxtext.check_parallelism(dict(ok, ici_data_parallelism="0"), 8, 4, "p")


def test_floats_and_strings_that_look_like_other_types_survive_the_round_trip():
    values = {"a": 1e-05, "b": 2.5e20, "c": 0.975, "d": 3.0, "e": "1e-5", "f": "true", "g": "", "h": "x: y",
              "i": "null", "j": "0755"}
    assert yaml.safe_load(_stack_maxtext.render_yaml(values)) == values


def test_a_nested_object_or_a_bad_key_is_refused():
    with pytest.raises(ConfigError, match="a scalar or a list for MaxText"):
        _stack_maxtext.render_yaml({"a": {"b": 1}})
    with pytest.raises(ConfigError, match="a MaxText key"):
        _stack_maxtext.render_yaml({"a b": 1})


def test_values_that_came_through_ansible_templating_are_written_as_plain_yaml():
    class TaggedStr(str):
        pass

    class TaggedInt(int):
        pass
    text = _stack_maxtext.render_yaml({"run_name": TaggedStr("molecule-preflight"), "steps": TaggedInt(5),
                                       "mlp_activations": [TaggedStr("silu"), "linear"]})
    assert text == "run_name: molecule-preflight\nsteps: 5\nmlp_activations: [silu, linear]\n"
