"""NxDT from its YAML: seed 003 planned for Trainium nodes, and what NxDT itself would refuse."""
import os

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _nxdt
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nxdt")


def load(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return _nxdt.load_text(handle.read(), name)


def seed(**changes):
    document = load("seed003_nxdt.yaml")
    for path, value in changes.items():
        *parents, key = path.split("__")
        target = document
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return document


def refused(document, nnodes=2, **kwargs):
    with pytest.raises(ConfigError) as info:
        _nxdt.plan_job(document, nnodes, **kwargs)
    return info.value


class TestSeed003OnTwoNodes:
    def test_the_run_sets_nodes_steps_and_devices(self):
        job = _nxdt.plan_job(seed(), 2, steps=30, log_dir="/runs/r1")
        trainer = job.document["trainer"]
        assert (trainer["num_nodes"], trainer["max_steps"], trainer["devices"]) == (2, 30, 32)
        assert job.document["exp_manager"]["explicit_log_dir"] == "/runs/r1"
        assert job.parallel == {"tp": 8, "pp": 1, "cp": 1, "dp": 8}
        assert (job.micro_batch_size, job.global_batch_size, job.steps, job.seq_length) == (1, 1024, 30, 8192)

    def test_the_user_document_is_left_alone(self):
        document = seed()
        _nxdt.plan_job(document, 2, steps=30)
        assert document["trainer"]["num_nodes"] == 1 and document["trainer"]["max_steps"] == 20000

    def test_neuron_environment_as_training_orchestrator_derives_it(self):
        env = _nxdt.plan_job(seed(), 2).neuron_env
        assert env == {
            "NEURON_FUSE_SOFTMAX": "1",
            "NEURON_EXPERIMENTAL_COMPRESS_RG": "0",
            "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "5",
            "BUCKET_CAP_MB": "1024",
            "NEURON_COMPILE_CACHE_URL": "/home/ubuntu/neuron_cache",
            "NEURON_RT_EXEC_TIMEOUT": "100",
            "XLA_USE_BF16": "0",
            "XLA_DOWNCAST_BF16": "1",
            "NEURON_RT_STOCHASTIC_ROUNDING_EN": "0",
            "NEURON_CC_FLAGS": "--model-type transformer --enable-mixed-precision-accumulation",
        }

    def test_torchrun_line_per_node(self):
        lines = [_nxdt.torchrun_argv(32, 2, rank, "10.0.0.1", 41000, "/runs/r1") for rank in (0, 1)]
        assert lines[1] == ["torchrun", "--nproc_per_node", "32", "--nnodes", "2", "--node_rank", "1",
                            "--master_addr", "10.0.0.1", "--master_port", "41000", "training_orchestrator.py",
                            "--config-path", "/runs/r1", "--config-name", "clusterval_nxdt"]
        assert lines[0][lines[0].index("--node_rank") + 1] == "0"

    def test_launch_line_takes_the_node_from_its_environment(self):
        lines, command = _nxdt.run_lines(32, "/runs/my run", "/runs/my run/training.log")
        assert command == ('torchrun --nproc_per_node 32 --nnodes "$NNODES" --node_rank "$NODE_RANK" --master_addr '
                           '"$MASTER_ADDR" --master_port "$MASTER_PORT" training_orchestrator.py --config-path '
                           "'/runs/my run' --config-name clusterval_nxdt")
        assert lines == [command + " >>'/runs/my run/training.log' 2>&1"]

    def test_rendered_yaml_reads_back_the_same(self):
        job = _nxdt.plan_job(seed(), 2, steps=30)
        text = _nxdt.render(job.document)
        assert yaml.safe_load(text) == job.document
        assert "${multiply:${distributed_strategy.tensor_model_parallel_size}" in text


class TestRecognised:
    def test_nxdt_yaml(self):
        assert _nxdt.is_nxdt(seed()) and _nxdt.is_nxdt(load("hf_llama3_8B_config.yaml"))

    @pytest.mark.parametrize("document", [{"config": {}, "model_params": {}}, {"schema_version": 1},
                                          {"trainer": {}}, [], "x"])
    def test_other_formats(self, document):
        assert not _nxdt.is_nxdt(document)

    def test_not_a_mapping(self):
        with pytest.raises(ConfigError, match="seed.yaml: expected an NxDT YAML"):
            _nxdt.load_text("- a\n- b\n", "seed.yaml")

    def test_yaml_that_does_not_parse(self):
        with pytest.raises(ConfigError, match="does not parse"):
            _nxdt.load_text("trainer: [\n", "seed.yaml")


class TestRefusedBeforeAnyNode:
    def test_devices_times_nodes_not_divisible_by_model_parallel(self):
        error = refused(seed(distributed_strategy__tensor_model_parallel_size=24))
        assert error.path == "distributed_strategy"
        assert "(32 devices x 2 nodes = 64)" in str(error) and "24 x 1 x 1 = 24" in str(error)

    def test_context_parallel_counts(self):
        error = refused(seed(distributed_strategy__context_parallel_size=3))
        assert "8 x 1 x 3 = 24" in str(error)

    def test_global_batch_not_a_multiple_of_micro_batch_times_data_parallel(self):
        error = refused(seed(data__global_batch_size=1020))
        assert error.path == "data.global_batch_size" and "(1 x 8 = 8)" in str(error)

    def test_log_every_n_steps_must_be_one_when_watched(self):
        error = refused(seed(trainer__log_every_n_steps=10))
        assert error.path == "trainer.log_every_n_steps"
        assert _nxdt.plan_job(seed(trainer__log_every_n_steps=10), 2, watched=False).steps == 20000

    def test_documented_precision_its_code_refuses(self):
        error = refused(seed(precision__type="mixed_precisionSR"))
        assert error.path == "precision.type"
        assert "checks mixed_precision_SR and refuses mixed_precisionSR" in str(error)

    def test_stochastic_rounding_as_its_code_spells_it(self):
        env = _nxdt.plan_job(seed(precision__type="mixed_precision_SR"), 2).neuron_env
        assert (env["XLA_DOWNCAST_BF16"], env["NEURON_RT_STOCHASTIC_ROUNDING_EN"]) == ("1", "1")

    def test_unknown_precision(self):
        assert "one of bf16SR, mixed_precision, mixed_precision_SR, fp32, autocast, manual" in str(
            refused(seed(precision__type="bf16")))

    def test_manual_precision_reads_its_three_settings(self):
        env = _nxdt.plan_job(seed(precision__type="manual", precision__xla_use_bf16="1"), 2).neuron_env
        assert (env["XLA_USE_BF16"], env["XLA_DOWNCAST_BF16"], env["NEURON_RT_STOCHASTIC_ROUNDING_EN"]) == \
            ("1", "0", "0")
        assert env["NEURON_CC_FLAGS"] == "--model-type transformer"

    def test_manual_precision_with_a_bad_value(self):
        assert refused(seed(precision__type="manual", precision__xla_use_bf16="yes")).path == \
            "precision.xla_use_bf16"

    def test_fp32_leaves_stochastic_rounding_alone(self):
        env = _nxdt.plan_job(seed(precision__type="fp32"), 2).neuron_env
        assert "NEURON_RT_STOCHASTIC_ROUNDING_EN" not in env
        assert env["NEURON_CC_FLAGS"] == "--model-type transformer --auto-cast none"

    def test_every_problem_at_once(self):
        error = refused(seed(trainer__devices=0, precision__type="x", bucket_size_collectives=None))
        paths = {problem.path for problem in error.problems}
        assert paths == {"trainer.devices", "bucket_size_collectives", "precision.type"}

    def test_a_reference_is_followed(self):
        job = _nxdt.plan_job(seed(data__global_batch_size="${data.micro_batch_size}",
                                  distributed_strategy__tensor_model_parallel_size=64), 2)
        assert job.global_batch_size == 1

    def test_a_count_that_is_not_a_number(self):
        assert refused(seed(data__micro_batch_size="one")).path == "data.micro_batch_size"


class TestEngineShape:
    def test_seed003_is_one_trn2_job_of_its_model(self):
        engine = _nxdt.to_engine(seed())
        assert engine["model_params"] == {"multi_node": {"hf_llama": {"trn2": {}}}}
        config = engine["config"]
        assert (config["framework"], config["gpu_vendor"], config["max_steps"]) == ("nxdt", "trainium", "20000")
        assert config["data_cache_dir"] == "/home/ubuntu/examples_datasets"
        assert config["nxdt"] == seed() and len(config["container_config"]["device_list"]) == 16 + 16

    def test_without_lnc_it_is_trn1(self):
        engine = _nxdt.to_engine(seed(trainer__lnc=None, data__train_dir="relative/dir"))
        assert list(engine["model_params"]["multi_node"]["hf_llama"]) == ["trn1"]
        assert engine["config"]["data_cache_dir"] == _nxdt.DATA_DIR
        assert engine["config"]["container_config"]["device_list"][-1] == "/dev/infiniband/uverbs7"
