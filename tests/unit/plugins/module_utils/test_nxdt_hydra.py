"""The rendered NxDT YAML refereed by Hydra and OmegaConf, as NxDT's entry point composes it.

training_orchestrator.py is ``@hydra.main(config_path=..., config_name=..., version_base="1.2")`` and reads the
composed config with OmegaConf; the ``${multiply:...}`` resolver of NxDT's YAMLs comes from NeMo, which NxDT
imports (registered here the same way). Hydra and OmegaConf are on PyPI (requirements-test.txt).
"""
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _config, _nxdt, _plan

hydra = pytest.importorskip("hydra")
omegaconf = pytest.importorskip("omegaconf")
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.errors import ConfigCompositionException  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nxdt")

if not OmegaConf.has_resolver("multiply"):
    OmegaConf.register_new_resolver("multiply", lambda x, y: x * y, replace=True)


def planned(name="seed003_nxdt.yaml", nnodes=2, steps=30, **kwargs):
    with open(os.path.join(FIXTURES, name)) as handle:
        return _nxdt.plan_job(_nxdt.load_text(handle.read(), name), nnodes, steps=steps, **kwargs)


def composed(job, tmp_path, overrides=()):
    """What torchrun's training_orchestrator.py --config-path DIR --config-name NAME gets."""
    (tmp_path / (_nxdt.CONFIG_NAME + ".yaml")).write_text(_nxdt.render(job.document))
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.2"):
        cfg = compose(config_name=_nxdt.CONFIG_NAME, overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def test_seed003_for_two_nodes_composes_with_the_run_settings(tmp_path):
    job = planned(log_dir="/runs/r1/nxdt")
    cfg = composed(job, tmp_path)
    assert cfg["trainer"]["num_nodes"] == 2 and cfg["trainer"]["devices"] == 32
    assert cfg["trainer"]["max_steps"] == 30 and cfg["trainer"]["log_every_n_steps"] == 1
    assert cfg["exp_manager"]["explicit_log_dir"] == "/runs/r1/nxdt"
    # interpolations resolve against the run's values, as NxDT sees them
    assert cfg["model"]["optim"]["sched"]["max_steps"] == 30
    assert cfg["exp_manager"]["checkpoint_callback_params"]["model_parallel_size"] == 8
    assert cfg["precision"]["type"] in _nxdt.PRECISIONS


def test_the_plan_of_seed003_for_two_trainium_nodes_composes(tmp_path):
    """The file the plan writes on the nodes, composed as torchrun's training_orchestrator.py composes it."""
    path = os.path.join(FIXTURES, "seed003_nxdt.yaml")
    hosts = [_plan.Host("trn-a", "10.1.0.1"), _plan.Host("trn-b", "10.1.0.2")]
    planned = _plan.plan_run(_config.load_config_file(path), hosts,
                             _plan.PlanOptions(config_path=path, run_id="r1", iterations=12))
    node = planned["nodes"]["trn-b"]
    argv = node["launch"]["torchrun"]
    config_dir, name = argv[argv.index("--config-path") + 1], argv[argv.index("--config-name") + 1]
    content = next(item["content"] for item in node["files"] if item["path"] == "%s/%s.yaml" % (config_dir, name))
    (tmp_path / (name + ".yaml")).write_text(content)
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.2"):
        cfg = OmegaConf.to_container(compose(config_name=name), resolve=True)
    assert (cfg["trainer"]["num_nodes"], cfg["trainer"]["devices"], cfg["trainer"]["max_steps"]) == (2, 32, 12)
    assert cfg["exp_manager"]["explicit_log_dir"] == config_dir + "/logs"
    assert cfg["precision"]["type"] == "mixed_precision"


def test_nxdt_example_composes_unchanged_but_for_the_run(tmp_path):
    job = planned("hf_llama3_8B_config.yaml", nnodes=4, steps=10, watched=False)
    cfg = composed(job, tmp_path)
    assert cfg["trainer"]["num_nodes"] == 4 and cfg["distributed_strategy"]["tensor_model_parallel_size"] == 32


def test_hydra_refuses_an_unknown_override_key(tmp_path):
    """Why the launch passes no key=value overrides: Hydra refuses any key the YAML lacks."""
    with pytest.raises(ConfigCompositionException, match="trainer.no_such_key"):
        composed(planned(), tmp_path, ["trainer.no_such_key=1"])


def test_every_key_the_plan_sets_is_one_the_yaml_has(tmp_path):
    """Setting them as overrides works only for keys Hydra finds in the YAML: the rendered file has them all."""
    job = planned(log_dir="/runs/r1/nxdt")
    overrides = ["trainer.devices=32", "trainer.num_nodes=2", "trainer.max_steps=30",
                 "exp_manager.explicit_log_dir=/runs/r1/nxdt"]
    assert composed(job, tmp_path, overrides) == composed(job, tmp_path)
