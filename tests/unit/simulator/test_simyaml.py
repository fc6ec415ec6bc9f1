"""The stand-in's YAML reader resolves scalars the way PyYAML's safe loader does."""
import math

import pytest
import simyaml


def test_scalars_resolve_like_pyyaml():
    doc = simyaml.loads(
        "a: 1\nb: \"2\"\nc: False\nd: true\ne: 1.0e-5\nf: 1e-5\ng: 500_000\nh: ''\ni:\nj: .nan\nk: bfloat16\n"
    )
    assert doc["a"] == 1 and isinstance(doc["a"], int)
    assert doc["b"] == "2"
    assert doc["c"] is False and doc["d"] is True
    assert doc["e"] == pytest.approx(1e-5)
    assert doc["f"] == "1e-5"  # YAML 1.1: no dot, no float
    assert doc["g"] == 500000
    assert doc["h"] == ""
    assert doc["i"] is None
    assert math.isnan(doc["j"])
    assert doc["k"] == "bfloat16"


def test_lists_flow_and_block():
    doc = simyaml.loads('acts: ["silu", \'linear\']\nempty: []\nblock:\n  - 1\n  - two\n')
    assert doc == {"acts": ["silu", "linear"], "empty": [], "block": [1, "two"]}


def test_comments_are_ignored_but_not_inside_quotes():
    assert simyaml.loads('a: "x # y"  # comment\n# whole line\n') == {"a": "x # y"}


@pytest.mark.parametrize("text, message", [
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("a: [1, 2\n", "unterminated flow list"),
    ("a: \"open\n", "unterminated quoted string"),
    ("  a: 1\n", "unexpected indentation"),
    ("just words\n", "expected '<key>: <value>'"),
    ("- 1\n", "a list item outside a list"),
])
def test_malformed_yaml_names_the_line(text, message):
    with pytest.raises(simyaml.YamlError) as err:
        simyaml.loads(text)
    assert message in str(err.value)
    assert "line 1" in str(err.value) or "line 2" in str(err.value)


def test_the_stand_in_reads_the_yaml_the_plan_writes_as_pyyaml_does():
    """The collection writes MaxText's config with PyYAML: block mappings (also without any list), flow lists."""
    import yaml
    from ansible_collections.clusterval.training.plugins.module_utils import _stack_maxtext
    for params in ({"per_device_batch_size": "2", "quantization": "", "scan_layers": "True", "dtype": "bfloat16"},
                   {"mlp_activations": ["silu", "linear"], "normalization_layer_epsilon": "1.0e-5",
                    "tokenizer_path": "/a b/c: d", "weird": "1e-5"}):
        text = _stack_maxtext.build_yaml("r1", 10, False, "llama3.1-70b", _stack_maxtext.maxtext_params(params, "p"))
        assert not text.startswith("{"), "a block mapping, one key per line"
        assert simyaml.loads(text) == yaml.safe_load(text)
