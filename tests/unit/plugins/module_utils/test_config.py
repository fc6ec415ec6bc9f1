import pytest

from ansible_collections.clusterval.training.plugins.module_utils._config import (
    deep_merge, find_changeme, load_config_file, load_config_text, resolve_user, select_model_params,
    to_bool, to_float, to_int, without_documentation,
)
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

MINIMAL = '{"config": {}, "model_params": {"single_node": {"m": {"a": {}}}}}'


def test_invalid_json_reports_line_and_column():
    with pytest.raises(ConfigError) as err:
        load_config_text('{"config": {},\n  "model_params": {,}}', source="x.json")
    assert err.value.path == "x.json"
    assert "line 2 column 20" in str(err.value)


@pytest.mark.parametrize("text, path, found", [
    ('[]', "(top level)", "a list"),
    ('{"model_params": {}}', "config", "missing"),
    ('{"config": [], "model_params": {}}', "config", "a list"),
])
def test_missing_or_wrong_sections(text, path, found):
    with pytest.raises(ConfigError) as err:
        load_config_text(text)
    assert err.value.problems[0].path == path
    assert err.value.problems[0].found == found


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="a readable training config file"):
        load_config_file(str(tmp_path / "absent.json"))


def test_user_id_resolved_in_keys_and_values():
    data = {"volume_dict": {"/home/{user-id}": "/home/{user-id}"}, "list": ["/x/{user-id}/y"], "n": 3}
    assert resolve_user(data, "alice") == {"volume_dict": {"/home/alice": "/home/alice"},
                                           "list": ["/x/alice/y"], "n": 3}


def test_documentation_keys_are_dropped_everywhere():
    data = {"_comments": "x", "a": {"_example_b": "1", "b": "2"}, "l": [{"_c": 1, "d": 2}]}
    assert without_documentation(data) == {"a": {"b": "2"}, "l": [{"d": 2}]}


def test_changeme_found_whole_and_inside_prose_but_not_in_documentation():
    data = {"nnodes": "<changeme> = number of nodes", "x": "<changeme>-no of nodes", "ok": "1",
            "_example_y": "<changeme>", "env": {"IP": "<changeme>"}, "list": ["a", "<changeme>"]}
    assert find_changeme(data, "config") == ["config.nnodes", "config.x", "config.env.IP", "config.list[1]"]


def test_deep_merge_merges_nested_and_null_removes():
    base = {"config": {"a": "1", "vol": {"/x": "/x", "/y": "/y"}}}
    merged = deep_merge(base, {"config": {"a": "2", "vol": {"/y": None}, "new": [1]}})
    assert merged == {"config": {"a": "2", "vol": {"/x": "/x"}, "new": [1]}}
    assert base["config"]["vol"] == {"/x": "/x", "/y": "/y"}


def test_deep_merge_refuses_non_object_overrides():
    with pytest.raises(ConfigError, match="overrides: expected an object"):
        deep_merge({}, ["x"])


@pytest.mark.parametrize("value, expected", [("True", True), ("FALSE", False), ("1", True), ("no", False),
                                             (True, True), (0, False)])
def test_to_bool(value, expected):
    assert to_bool(value, "p") is expected


@pytest.mark.parametrize("value", ["maybe", "", 2, None, [1]])
def test_to_bool_refuses_nonsense(value):
    with pytest.raises(ConfigError, match="p: expected a boolean"):
        to_bool(value, "p")


def test_to_int_and_minimum():
    assert to_int("30", "p") == 30
    assert to_int("500_000", "p") == 500000
    assert to_int(-1, "p") == -1
    with pytest.raises(ConfigError, match="expected an integer >= 1, found '0'"):
        to_int("0", "p", minimum=1)
    with pytest.raises(ConfigError, match="expected an integer, found '3.5'"):
        to_int("3.5", "p")
    with pytest.raises(ConfigError):
        to_int(True, "p")


def test_to_float():
    assert to_float("0.975", "p") == 0.975
    assert to_float("1.0e-5", "p") == 1e-5
    for bad in ("fast", "", "1.2.3", None, False):
        with pytest.raises(ConfigError, match="expected a number"):
            to_float(bad, "p")


def test_selection_defaults_to_the_only_choice():
    selection = select_model_params(load_config_text(MINIMAL))
    assert (selection.mode, selection.model, selection.gpu_arch) == ("single_node", "m", "a")
    assert selection.path == "model_params.single_node.m.a"


def test_selection_lists_available_names():
    data = {"config": {}, "model_params": {"multi_node": {"llama3.1-70b": {"mi300x": {}, "mi325": {}}}}}
    with pytest.raises(ConfigError) as err:
        select_model_params(data, model="llama3.1-8b")
    assert err.value.path == 'model_params.multi_node["llama3.1-8b"]'
    assert "llama3.1-70b" in str(err.value)
    with pytest.raises(ConfigError, match="available: mi300x, mi325"):
        select_model_params(data)
    with pytest.raises(ConfigError, match=r"mi300x, mi325"):
        select_model_params(data, gpu_arch="mi355")
    assert select_model_params(data, gpu_arch="mi325").gpu_arch == "mi325"


def test_a_changeme_in_a_key_is_unset_too():
    config = {"env_dict": {"<changeme>_HOME": "/x", "OK": "<changeme>"}, "volume_dict": {"/data": "/data"}}
    assert find_changeme(config, "config") == ["config.env_dict.OK", 'config.env_dict["<changeme>_HOME"]']


# -- booleans wherever they appear, overrides of the wrong type ------------------------------------

from ansible_collections.clusterval.training.plugins.module_utils._config import (  # noqa: E402
    check_overrides, merge_overrides, refuse_non_booleans)


@pytest.mark.parametrize("document, path", [
    ({"config": {"distributed_training": "maybe"}}, "config.distributed_training"),
    ({"model_params": {"multi_node": {"m": {"mi300x": {"scan_layers": "yes please"}}}}},
     "model_params.multi_node.m.mi300x.scan_layers"),
    ({"training": {"maxtext_config": {"packing": 2}}}, "training.maxtext_config.packing"),
    ({"enforce_thresholds": "sometimes"}, "enforce_thresholds"),
    ({"training": {"checkpoint_resume": {"enabled": "maybe"}}}, "training.checkpoint_resume.enabled"),
])
def test_a_non_boolean_for_a_boolean_key_is_refused_by_its_path(document, path):
    with pytest.raises(ConfigError) as caught:
        refuse_non_booleans(document)
    assert caught.value.path == path and "expected a boolean (true/false)" in caught.value.message


def test_booleans_as_the_configs_write_them_pass_and_every_bad_one_is_named():
    refuse_non_booleans({"config": {"distributed_training": "True", "mock_data": "0", "enable_checkpointing": False},
                         "model_params": {"x": {"scan_layers": "false", "packing": True, "fsdp": 1}},
                         "training": {"distributed": "<changeme>"}, "_comment": {"packing": "maybe"}})
    with pytest.raises(ConfigError) as caught:
        refuse_non_booleans({"config": {"distributed_training": "maybe", "mock_data": "perhaps"}})
    assert [p.path for p in caught.value.problems] == ["config.distributed_training", "config.mock_data"]


@pytest.mark.parametrize("value, found", [([{"config": {}}], "a list"), ("config.x=1", "a string"), (3, "an integer")])
def test_overrides_of_the_wrong_type_get_our_message(value, found):
    with pytest.raises(ConfigError) as caught:
        check_overrides(value, "training_overrides_extra")
    message = caught.value.message
    assert message.startswith("training_overrides_extra: expected an object in the config's shape") and found in message


def test_extra_overrides_merge_deep_and_keep_a_null_that_removes_the_configs_key():
    base = {"config": {"a": "1", "container_config": {"volume_dict": {"/x": "/x"}}}}
    extra = {"config": {"b": "2", "container_config": {"volume_dict": {"/x": None}}}}
    assert merge_overrides(base, extra) == {"config": {"a": "1", "b": "2", "container_config": {"volume_dict": {"/x": None}}}}
    assert base["config"] == {"a": "1", "container_config": {"volume_dict": {"/x": "/x"}}}
    assert check_overrides(None, "training_overrides") == {} and check_overrides({"a": 1}, "x") == {"a": 1}
