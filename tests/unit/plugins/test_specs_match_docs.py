"""Every module's and action's argument spec matches its DOCUMENTATION (issue 29, item 5): the same options,
each with the same type, required, default, choices and elements; suboptions alike."""
import importlib
import pathlib

import pytest
import yaml

PLUGINS = pathlib.Path(__file__).resolve().parents[3] / "plugins"
PACKAGE = "ansible_collections.clusterval.training.plugins"
COMPARED = ("type", "required", "default", "choices", "elements")


class Captured(Exception):
    pass


def module_spec(name, monkeypatch):
    """The spec the module gives AnsibleModule (its main() stopped right there)."""
    module = importlib.import_module(f"{PACKAGE}.modules.{name}")
    seen = {}

    def capture(argument_spec, **kwargs):
        seen["spec"] = argument_spec
        raise Captured()
    monkeypatch.setattr(module, "AnsibleModule", capture)
    with pytest.raises(Captured):
        module.main()
    return seen["spec"]


def interface_spec(name, monkeypatch):
    """What the documentation describes: the action's spec when the module has an action of its own, with the
    options the action computes for the module on the node (the module's own, validate-modules' side)."""
    action_path = PLUGINS / "action" / f"{name}.py"
    action = importlib.import_module(f"{PACKAGE}.action.{name}") if action_path.is_file() else None
    if action is None or not hasattr(action, "ARGUMENT_SPEC"):
        return module_spec(name, monkeypatch)
    module = importlib.import_module(f"{PACKAGE}.modules.{name}")
    node_side = module_spec(name, monkeypatch) if hasattr(module, "main") else {}
    return {**{key: value for key, value in node_side.items() if key not in action.ARGUMENT_SPEC},
            **action.ARGUMENT_SPEC}


def normalised(spec):
    out = {}
    for option, settings in spec.items():
        settings = settings or {}
        entry = {key: settings.get(key) for key in COMPARED}
        entry["type"] = entry["type"] or "str"
        entry["required"] = bool(entry["required"])
        if entry["choices"] is not None:
            entry["choices"] = list(entry["choices"])
        if entry["type"] in ("float",) and entry["default"] is not None:
            entry["default"] = float(entry["default"])
        if settings.get("options") or settings.get("suboptions"):
            entry["options"] = normalised(settings.get("options") or settings.get("suboptions"))
        out[option] = entry
    return out


MODULES = sorted(path.stem for path in (PLUGINS / "modules").glob("*.py") if path.stem != "__init__")


def documented_options(module):
    """The module's options with those of its doc fragments (``clusterval.training.<fragment>[.<VARIABLE>]``)."""
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    for reference in doc.get("extends_documentation_fragment") or []:
        parts = reference.split(".")[2:]
        fragment = importlib.import_module(f"{PACKAGE}.doc_fragments.{parts[0]}").ModuleDocFragment
        text = getattr(fragment, parts[1].upper() if len(parts) > 1 else "DOCUMENTATION")
        options.update(yaml.safe_load(text).get("options") or {})
    return options


@pytest.mark.parametrize("name", MODULES)
def test_the_spec_matches_the_documentation(name, monkeypatch):
    module = importlib.import_module(f"{PACKAGE}.modules.{name}")
    documented = documented_options(module)
    assert normalised(interface_spec(name, monkeypatch)) == normalised(documented)


def test_no_action_imports_another():
    """Shared code lives in plugins/plugin_utils/_action.py (the actions' base) or module_utils."""
    for path in sorted((PLUGINS / "action").glob("*.py")):
        assert f"{PACKAGE}.action." not in path.read_text(encoding="utf-8"), path.name
