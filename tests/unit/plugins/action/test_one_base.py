"""One style on the Ansible surface: every action on the one base, one validation API, no action on another."""
import glob
import importlib
import os

import pytest

from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction

ACTIONS = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3, os.pardir, "plugins", "action"))
NAMES = sorted(os.path.basename(path)[:-3] for path in glob.glob(os.path.join(ACTIONS, "*.py")))


@pytest.mark.parametrize("name", NAMES)
def test_every_action_stands_on_the_one_base_alone(name):
    module = importlib.import_module("ansible_collections.clusterval.training.plugins.action.%s" % name)
    assert issubclass(module.ActionModule, CollectionAction)
    with open(os.path.join(ACTIONS, name + ".py"), encoding="utf-8") as handle:
        source = handle.read()
    assert "plugins.action" not in source, "an action imports another action"
    assert "validate_argument_spec" not in source and "ArgumentSpecValidator" not in source, \
        "the arguments are validated by the base (_validated / validated)"


def test_the_actions_were_found():
    assert {"training_plan", "training_watch", "training_container", "training_slurm"} <= set(NAMES)
