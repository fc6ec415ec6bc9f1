"""Effective models and their parameter counts (issue 9, item 5)."""
from __future__ import annotations

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _models


@pytest.mark.parametrize("name,params_b", [("llama3.1-8b", 8.03), ("llama3.1-70b", 70.55), ("llama3.1-405b", 405.85),
                                           ("llama2-7b", 6.74)])
def test_parameter_counts_match_the_published_sizes(name, params_b):
    assert _models.effective_model(name)["params_b"] == params_b


@pytest.mark.parametrize("key", ["llama3_1_70b", "llama_3_1_70b", "llama3.1-70b", "llama3.1_70B"])
def test_megatron_and_file_name_keys_name_the_same_model(key):
    assert _models.effective_model(key)["name"] == "llama3.1-70b"


def test_unknown_model_keeps_its_name_only():
    assert _models.effective_model("custom") == {"name": "custom", "family": None, "params": None,
                                                 "params_b": None, "dims": {}}


def test_maxtext_default_model_takes_its_size_from_the_config():
    from ansible_collections.clusterval.training.plugins.module_utils._models import effective_model
    shrunk = {"base_emb_dim": "64", "base_num_decoder_layers": "2", "base_num_query_heads": "2",
              "base_num_kv_heads": "2", "base_mlp_dim": "128", "vocab_size": "256"}
    model = effective_model("default", shrunk)
    assert model["family"] == "maxtext-default"
    assert model["dims"] == {"emb_dim": 64, "num_layers": 2, "num_heads": 2, "num_kv_heads": 2, "mlp_dim": 128,
                             "vocab_size": 256}
    # 2 layers of (2*64*64 + 2*64*2*32 + 3*64*128 + 2*64) + 2*256*64 + 64
    assert model["params"] == 2 * (8192 + 8192 + 24576 + 128) + 32768 + 64
    assert effective_model("default", {**shrunk, "vocab_size": "<changeme>"})["dims"] == {}
    assert effective_model("default")["params"] is None
