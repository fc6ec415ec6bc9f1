"""docs/architecture.md names every module of plugins/module_utils, grouped by wing (issue 29, item 7)."""
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
WINGS = ["Plan", "Stacks", "Launcher (Docker over SSH)", "Node checks", "Run", "Judging", "Presentation",
         "Side capabilities", "Ansible surface"]


def layout():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text[text.index("## Layout\n"):text.index("## The plan\n")]


def test_every_module_is_named_in_the_layout():
    named = set(re.findall(r"`(?:plugins/module_utils/)?(_[a-z_]+)\.py`", layout()))
    modules = {path.stem for path in (REPO / "plugins" / "module_utils").glob("_*.py")}
    assert sorted(modules - named) == []


def test_the_wings_come_in_the_order_the_data_flows():
    headings = re.findall(r"^### (.+)$", layout(), re.MULTILINE)
    assert [h for h in headings if h in WINGS] == WINGS
