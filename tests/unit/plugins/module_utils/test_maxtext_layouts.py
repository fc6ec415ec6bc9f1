"""Every key the collection writes into MaxText's config file, for every JAX config it ships or meets, against the
base.yml keys of the MaxText its image runs (tests/fixtures/maxtext, each list with its source commit); and the
step line of MaxText of 2025 (its format string, 0f12f3da src/MaxText/metric_logger.py lines 103-113) through the
parser."""
import glob
import json
import os

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _stack_maxtext, _maxtext_keys
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._logs import parse_maxtext_step
from ansible_collections.clusterval.training.plugins.module_utils._models import MODELS
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "maxtext")
LAYOUT_NAMES = ("maxtext-package", "maxtext-2025", "maxtext-legacy")
SITE = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_ib_hca": "bnxt_re0,bnxt_re1",
                   "nccl_ib_gid_index": "3", "nccl_socket_ifname": "eth0", "gloo_socket_ifname": "eth0",
                   "nic_type": "thor2"}}
# The seed configs, and the validation suite's own (legacy and versioned formats, tests/fixtures/cvs).
JAX_CONFIGS = sorted(
    os.path.relpath(path, REPO)
    for pattern in (("configs", "jax", "*.json"), ("tests", "fixtures", "cvs", "jax*", "*.json"))
    for path in glob.glob(os.path.join(REPO, *pattern)) if "threshold" not in path)
SEED = "configs/jax/mi300x_singlenode_llama3_1_70b.json"


def layout(name):
    with open(os.path.join(FIXTURES, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def plan(path, change=None):
    config = load_config_file(os.path.join(REPO, path))
    if change:
        change(config)
    return plan_run(config, [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")],
                    PlanOptions(config_path=path, overrides=SITE, run_id="r1"))


def written(result):
    content = next(f["content"] for f in result["nodes"]["n1"]["files"] if f["path"].endswith("/maxtext.yml"))
    return yaml.safe_load(content)


def targeted(image):
    """The layouts whose key lists bind a config: today's MaxText always (the real-framework image runs the seed
    configs on it, and it refuses what it does not know); both layouts of 2025 for an image of 2025."""
    return LAYOUT_NAMES if _stack_maxtext.runs_maxtext_2025(image) else ("maxtext-package",)


def test_the_fixtures_are_the_three_layouts_and_name_their_source():
    assert tuple(layout.name for layout in _stack_maxtext.LAYOUTS) == LAYOUT_NAMES
    for name in LAYOUT_NAMES:
        data = layout(name)
        assert data["layout"] == name
        assert data["source"]["repository"] and data["source"]["commit"] and data["source"]["keys_from"]
        assert {"run_name", "steps", "model_name", "hardware", "base_output_directory"} <= set(data["keys"])


def test_the_seed_configs_target_maxtext_of_2025():
    images = {str(load_config_file(os.path.join(REPO, path))["config"]["container_image"])
              for path in JAX_CONFIGS if path.startswith("configs/")}
    assert images == {"rocm/jax-training:maxtext-v25.9"}
    assert _stack_maxtext.runs_maxtext_2025("docker.io/rocm/jax-training:maxtext-v25.9.1")
    assert not _stack_maxtext.runs_maxtext_2025("rocm/jax-training:maxtext-v26.3")
    assert not _stack_maxtext.runs_maxtext_2025("example/rocm/jax-training-x:maxtext-v25.9")


@pytest.mark.parametrize("path", JAX_CONFIGS)
def test_every_key_written_is_in_the_base_yml_of_the_maxtext_the_image_runs(path):
    result = plan(path)
    keys = written(result)
    image = result["nodes"]["n1"]["container"]["image"]
    for name in targeted(image):
        known = set(layout(name)["keys"]) | _stack_maxtext.PYCONFIG_KEYS
        assert [key for key in keys if key not in known] == [], "%s (%s) against %s" % (path, image, name)
        assert keys["model_name"] in layout(name)["model_names"], name
    assert not [w for w in result["warnings"] if "without a word" in w]


def test_every_command_line_key_is_one_every_layout_has():
    """MaxText of 2025 stops on a command-line key its config lacks ("Key ... was passed at the command line but
    isn't in config.", 0f12f3da src/MaxText/pyconfig.py line 491)."""
    arguments = _stack_maxtext.command_args("/run/maxtext.yml", "/run/output")
    assert arguments[0] == "/run/maxtext.yml"
    keys = [argument.split("=", 1)[0] for argument in arguments[1:]]
    assert keys == ["base_output_directory"]
    for name in LAYOUT_NAMES:
        assert set(keys) <= set(layout(name)["keys"]), name


def test_every_model_name_the_collection_writes_is_one_every_layout_accepts():
    for name in LAYOUT_NAMES:
        assert sorted(set(MODELS) - set(layout(name)["model_names"])) == [], name


def test_the_plans_key_sets_are_the_fixtures():
    keys_2025 = layout("maxtext-2025")["keys"]
    legacy = layout("maxtext-legacy")["keys"]
    assert _maxtext_keys.KEYS_2025 == frozenset(keys_2025)
    assert set(legacy) <= set(keys_2025)
    assert _maxtext_keys.NOT_IN_LEGACY == frozenset(keys_2025) - frozenset(legacy)


def test_a_key_maxtext_of_2025_would_ignore_is_a_warning_naming_its_path():
    def add(config):
        params = config["model_params"]["single_node"]["llama3.1-70b"]["mi300x"]
        params["max_segments_per_seq"] = "32"   # upstream's since 2025-11-06 (24548581a); today's has it
        params["use_ring_of_experts"] = "False"  # in src/MaxText of September 2025, not in the MaxText/ layout
    warnings = [w for w in plan(SEED, add)["warnings"] if "without a word" in w]
    assert len(warnings) == 2
    assert warnings[0].startswith('model_params.single_node["llama3.1-70b"].mi300x.max_segments_per_seq: MaxText of '
                                  "2025 (rocm/jax-training:maxtext-v25.9) has no key max_segments_per_seq")
    assert "use_ring_of_experts" in warnings[1] and "maxtext-legacy" in warnings[1]

    def newer_image(config):
        add(config)
        config["config"]["container_image"] = "rocm/jax-training:maxtext-v26.3"
    assert not [w for w in plan(SEED, newer_image)["warnings"] if "without a word" in w]


@pytest.mark.parametrize("image", ["clusterval/simulator:latest", "rocm/jax-training:maxtext-v26.3",
                                   "registry.example/jax:latest"])
def test_a_misspelt_key_is_named_whatever_the_image_tag_with_the_layouts_checked(image):
    """No tag gives the MaxText away: the key is checked against every layout the collection knows."""
    def misspell(config):
        config["config"]["container_image"] = image
        config["model_params"]["single_node"]["llama3.1-70b"]["mi300x"]["max_target_lenght"] = "4096"
    warnings = [w for w in plan(SEED, misspell)["warnings"] if "max_target_lenght" in w]
    assert warnings == [
        'model_params.single_node["llama3.1-70b"].mi300x.max_target_lenght: no MaxText layout has the key '
        "max_target_lenght (did you mean max_target_length?): maxtext-2025 and maxtext-legacy would ignore it "
        "without a word; maxtext-package refuses it when it starts (MAXTEXT CONFIG ERROR) (every layout the "
        "collection knows: the image's tag (%s) does not say which MaxText it runs)" % image]


def test_with_the_2025_tag_the_warning_names_the_layouts_it_assumed():
    def misspell(config):
        config["model_params"]["single_node"]["llama3.1-70b"]["mi300x"]["max_target_lenght"] = "4096"
    [warning] = [w for w in plan(SEED, misspell)["warnings"] if "max_target_lenght" in w]
    assert "MaxText of 2025 (rocm/jax-training:maxtext-v25.9) has no key max_target_lenght (did you mean " \
           "max_target_length?): maxtext-2025 and maxtext-legacy would ignore it without a word (assumed from the " \
           "image's tag rocm/jax-training:maxtext-v25.9)" in warning


def test_the_step_line_of_maxtext_2025_parses():
    """Built with MaxText of 2025's own format string (0f12f3da src/MaxText/metric_logger.py lines 103-107, and
    110-113 with multi-token prediction); real lines of that format: MX-01 in the shared real logs."""
    fields = {"step": 9, "seconds": 5.6692, "tflops": 134.8841, "tokens": 8670.2071, "weights": 196608,
              "loss": 11.1104}
    line = ("completed step: {step}, seconds: {seconds:.3f}, TFLOP/s/device: {tflops:.3f}, "
            "Tokens/s/device: {tokens:.3f}, total_weights: {weights}, loss: {loss:.3f}").format(**fields)
    step = parse_maxtext_step(line)
    assert step == {"step": 9, "seconds": 5.669, "tflops_per_sec_per_gpu": 134.884,
                    "tokens_per_sec_per_gpu": 8670.207, "total_weights": 196608.0, "loss": 11.110}
    mtp = parse_maxtext_step(line + ", main_model_loss: {:.3f}, mtp_loss: {:.3f}".format(10.9, 0.2104))
    assert mtp == {**step, "main_model_loss": 10.9, "mtp_loss": 0.210}
