# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The models a run can train: dimensions of MaxText's own model files and their parameter counts.

Dimensions are those of MaxText's ``configs/models/<name>.yml`` (the names its ``validate_model_name``
accepts); Megatron-LM's model keys (``llama3_1_70b``) name the same models. Parameter counts follow
from the dimensions (Llama: untied input and output embeddings, grouped-query attention, SwiGLU MLP,
two RMSNorms per layer).
"""
from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional

DIMS = ("emb_dim", "num_layers", "num_heads", "num_kv_heads", "mlp_dim", "vocab_size")
MODELS: Dict[str, Dict[str, Any]] = {
    "llama2-7b": {"family": "llama2", "dims": (4096, 32, 32, 32, 11008, 32000)},
    "llama2-13b": {"family": "llama2", "dims": (5120, 40, 40, 40, 13824, 32000)},
    "llama2-70b": {"family": "llama2", "dims": (8192, 80, 64, 8, 28672, 32000)},
    "llama3-8b": {"family": "llama3", "dims": (4096, 32, 32, 8, 14336, 128256)},
    "llama3-70b": {"family": "llama3", "dims": (8192, 80, 64, 8, 28672, 128256)},
    "llama3.1-8b": {"family": "llama3.1", "dims": (4096, 32, 32, 8, 14336, 128256)},
    "llama3.1-70b": {"family": "llama3.1", "dims": (8192, 80, 64, 8, 28672, 128256)},
    "llama3.1-405b": {"family": "llama3.1", "dims": (16384, 126, 128, 8, 53248, 128256)},
    "llama3.3-70b": {"family": "llama3.3", "dims": (8192, 80, 64, 8, 28672, 128256)},
}
# MaxText's base_* keys for each dimension.
MAXTEXT_KEYS = {"emb_dim": "base_emb_dim", "num_layers": "base_num_decoder_layers",
                "num_heads": "base_num_query_heads", "num_kv_heads": "base_num_kv_heads",
                "mlp_dim": "base_mlp_dim", "vocab_size": "vocab_size"}


def canonical(model: str) -> str:
    """``llama3_1_70b``, ``llama_3_1_70b`` (Megatron, file names) and ``llama3.1_70B`` (the suite's versioned
    Megatron configs) -> ``llama3.1-70b``."""
    text = str(model).strip().lower()
    if text in MODELS:
        return text
    match = re.match(r"^llama_?(\d)(?:[._](\d))?_(\d+b)$", text)
    if match:
        major, minor, size = match.groups()
        name = "llama%s%s-%s" % (major, "." + minor if minor else "", size)
        return name if name in MODELS else text
    return text


def dims_of(name: str) -> Optional[Dict[str, int]]:
    known = MODELS.get(canonical(name))
    return dict(zip(DIMS, known["dims"])) if known else None


def llama_params(dims: Mapping[str, int]) -> int:
    emb, layers, heads, kv_heads, mlp, vocab = (int(dims[k]) for k in DIMS)
    head_dim = emb // heads
    attention = 2 * emb * emb + 2 * emb * kv_heads * head_dim
    per_layer = attention + 3 * emb * mlp + 2 * emb
    return layers * per_layer + 2 * vocab * emb + emb


def effective_model(name: str, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``{name, family, params, params_b, dims}`` of a known model; only the name otherwise. MaxText's
    ``default`` model is base.yml's with the config's base_* values: its size comes from ``params``."""
    key = canonical(name)
    dims = dims_of(key)
    if dims is None and key == "default" and params is not None:
        dims = given_dims(params)
        if dims is not None:
            count = llama_params(dims)
            return {"name": key, "family": "maxtext-default", "params": count,
                    "params_b": round(count / 1e9, 6), "dims": dims}
    if dims is None:
        return {"name": name, "family": None, "params": None, "params_b": None, "dims": {}}
    params = llama_params(dims)
    return {"name": key, "family": MODELS[key]["family"], "params": params,
            "params_b": round(params / 1e9, 2), "dims": dims}


def given_dims(params: Mapping[str, Any]) -> Optional[Dict[str, int]]:
    """Every dimension from the base_* values of a MaxText config, or None when one is missing or not a number."""
    try:
        return {dim: int(str(params[key]).replace("_", "")) for dim, key in MAXTEXT_KEYS.items()}
    except (KeyError, ValueError):
        return None


def model_with_maxtext_dims(params: Mapping[str, Any]) -> Optional[str]:
    """The known model whose dimensions the base_* values given match (emb and layers decide), or None."""
    given = {dim: str(params[key]).strip() for dim, key in MAXTEXT_KEYS.items()
             if key in params and dim in ("emb_dim", "num_layers")}
    if not given:
        return None
    for name in MODELS:
        dims = dims_of(name)
        if all(given[dim] == str(dims[dim]) for dim in given) and name.startswith("llama3.1"):
            return name
    return next((name for name in MODELS if all(given[d] == str(dims_of(name)[d]) for d in given)), None)


def contradicting_maxtext_keys(model: str, params: Mapping[str, Any]) -> Dict[str, Any]:
    """base_* keys whose value differs from the model file's (MaxText's model file overrides them)."""
    dims = dims_of(model) or {}
    return {key: params[key] for dim, key in MAXTEXT_KEYS.items()
            if key in params and dim in dims and str(params[key]).strip() != str(dims[dim])}
