"""A relative training_config: the working directory, the playbook's directory, then the collection's configs/."""
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config_path import config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
SHIPPED = os.path.join("configs", "jax", "mi300x_distributed_llama3_1_70b.json")


def test_a_shipped_config_is_found_in_the_collection_from_any_directory(tmp_path):
    path, where = config_file(SHIPPED, str(tmp_path), None, REPO)
    assert path == os.path.join(REPO, SHIPPED) and where.startswith("found in the collection's configs/ (")
    short, where = config_file(os.path.join("jax", "mi300x_distributed_llama3_1_70b.json"), str(tmp_path), None, REPO)
    assert short == path and "configs/" in where


def test_the_working_directory_comes_first(tmp_path):
    own = tmp_path / "configs" / "jax" / "mi300x_distributed_llama3_1_70b.json"
    own.parent.mkdir(parents=True)
    own.write_text("{}")
    assert config_file(SHIPPED, str(tmp_path), None, REPO) == (str(own), "found in the working directory")


def test_then_the_playbooks_directory(tmp_path):
    (tmp_path / "pb").mkdir()
    (tmp_path / "pb" / "mine.json").write_text("{}")
    assert config_file("mine.json", str(tmp_path), str(tmp_path / "pb"), REPO) == \
        (str(tmp_path / "pb" / "mine.json"), "found in the playbook's directory")


def test_a_config_found_nowhere_names_every_place_tried(tmp_path):
    with pytest.raises(ConfigError) as caught:
        config_file("nope.json", str(tmp_path), None, REPO)
    message = caught.value.message
    assert message.startswith("training_config: expected a config file (looked for %s; %s)"
                              % (tmp_path / "nope.json", os.path.join(REPO, "configs", "nope.json")))
    assert message.endswith("found 'nope.json'")


def test_an_absolute_path_is_used_as_given(tmp_path):
    config = tmp_path / "c.json"
    config.write_text("{}")
    assert config_file(str(config), "/", None, REPO) == (str(config), "found as the absolute path given")
