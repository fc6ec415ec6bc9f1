import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

PARAMS = {"tokenizer_model": "NousResearch/Meta-Llama-3-70B", "model_size": "70", "batch_size": "24",
          "micro_batch_size": "3", "precision": "TE_FP16", "sequence_length": "8192", "fsdp": "1",
          "tensor_parallelism": "1", "pipeline_parallelism": "1", "recompute": "1"}


def test_env_of_a_70b_fsdp_recompute_config():
    settings = _stack_megatron.model_env("llama3_1_70b", PARAMS, "mp")
    assert settings.env == {"TOKENIZER_MODEL": "NousResearch/Meta-Llama-3-70B", "MODEL_SIZE": "70", "MBS": "3",
                            "BS": "24", "TP": "1", "PP": "1", "SEQ_LENGTH": "8192", "RECOMPUTE": "1",
                            "FSDP": "1", "TE_FP8": "0", "RECOMPUTE_NUM_LAYERS": "80"}
    assert settings.script == "examples/llama/train_llama3.sh"
    assert "TE_FP16 runs BF16" in settings.warnings[0]


@pytest.mark.parametrize("label, te_fp8", [("TE_FP8", "1"), ("TE_BF16", "0"), ("te_fp16", "0")])
def test_precision_mapping(label, te_fp8):
    assert _stack_megatron.precision_env(label, "p")[0] == te_fp8


def test_unknown_precision_and_model_size_are_errors():
    with pytest.raises(ConfigError, match="mp.precision: expected one of TE_FP8"):
        _stack_megatron.model_env("llama3_1_8b", dict(PARAMS, precision="FP4"), "mp")
    with pytest.raises(ConfigError, match="mp.model_size: expected 8 or 70"):
        _stack_megatron.model_env("llama3_1_8b", dict(PARAMS, model_size="405"), "mp")


def test_script_by_family():
    assert _stack_megatron.script_for_model("llama2_7b", "p") == "examples/llama/train_llama2.sh"
    assert _stack_megatron.script_for_model("llama3.1-8b", "p") == "examples/llama/train_llama3.sh"
    with pytest.raises(ConfigError, match="family"):
        _stack_megatron.script_for_model("gpt3", "p")


def test_recompute_num_layers_for_8b_and_fsdp_tp_warning():
    settings = _stack_megatron.model_env("llama3_1_8b", dict(PARAMS, model_size="8", tensor_parallelism="8"), "mp")
    assert settings.env["RECOMPUTE_NUM_LAYERS"] == "32"
    assert any("FSDP=1 forces TP=1" in warning for warning in settings.warnings)


def test_mock_data_never_sets_data_path():
    assert _stack_megatron.data_env({"mock_data": "True"}, "/c") == {"DATA_CACHE_PATH": "/c", "MOCK_DATA": "1"}
    assert _stack_megatron.data_env({"mock_data": "False", "data_path": "/d/x"}, "/c")["DATA_PATH"] == "/d/x"
    with pytest.raises(ConfigError, match="config.data_path"):
        _stack_megatron.data_env({"mock_data": "False"}, "/c")
