"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN (and every filter's .yml doc) is valid YAML."""
import ast
import pathlib

import pytest
import yaml

PLUGINS = pathlib.Path(__file__).resolve().parents[3] / "plugins"
DOC_NAMES = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def docstrings(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in DOC_NAMES:
                    yield target.id, node.value.value


PYTHON_PLUGINS = sorted(p for kind in ("modules", "action", "callback", "filter", "lookup", "doc_fragments")
                        for p in (PLUGINS / kind).glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", PYTHON_PLUGINS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_documentation_blocks_parse(path):
    for name, text in docstrings(path):
        parsed = yaml.safe_load(text)
        assert name == "EXAMPLES" or isinstance(parsed, dict), f"{path.name} {name} is not a mapping"


@pytest.mark.parametrize("path", sorted((PLUGINS / "filter").glob("*.yml")), ids=lambda p: p.name)
def test_filter_documentation_parses(path):
    assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict)


def test_every_module_and_callback_is_documented():
    documented = {path.name for path in PYTHON_PLUGINS if {n for n, dummy in docstrings(path)} >= {"DOCUMENTATION"}}
    expected = {p.name for kind in ("modules", "callback") for p in (PLUGINS / kind).glob("*.py")}
    assert expected <= documented
