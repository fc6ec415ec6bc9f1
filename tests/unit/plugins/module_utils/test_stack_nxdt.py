"""Seed 003's NxDT YAML planned for two Trainium nodes: the torchrun lines, the Neuron environment, the YAML."""
import os

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _config, _plan
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nxdt")
HOSTS = (_plan.Host("trn-a", "10.1.0.1"), _plan.Host("trn-b", "10.1.0.2"))


def yaml_file(tmp_path, **changes):
    with open(os.path.join(FIXTURES, "seed003_nxdt.yaml")) as handle:
        document = yaml.safe_load(handle)
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        target = document
        for part in parents:
            target = target[part]
        target[key] = value
    path = tmp_path / "seed003.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def plan(path=os.path.join(FIXTURES, "seed003_nxdt.yaml"), hosts=HOSTS, **options):
    options.setdefault("iterations", 30)
    return _plan.plan_run(_config.load_config_file(path), list(hosts),
                          _plan.PlanOptions(config_path=path, run_id="r1", **options))


class TestSeed003OnTwoNodes:
    def test_one_job_on_trainium(self):
        planned = plan()
        assert (planned["framework"], planned["gpu_vendor"], planned["gpu_arch"], planned["model"]) == \
            ("nxdt", "trainium", "trn2", "hf_llama")
        assert (planned["gpus_per_node"], planned["total_steps"], planned["final_step"]) == (32, 30, 29)
        assert planned["jobs"] == [{"name": "job-0", "hosts": ["trn-a", "trn-b"], "nnodes": 2,
                                    "coordinator_address": "10.1.0.1", "coordinator_port": 41000}]

    def test_torchrun_line_per_node(self):
        nodes = plan()["nodes"]
        for rank, host in enumerate(("trn-a", "trn-b")):
            assert nodes[host]["launch"]["torchrun"] == [
                "torchrun", "--nproc_per_node", "32", "--nnodes", "2", "--node_rank", str(rank), "--master_addr",
                "10.1.0.1", "--master_port", "41000", "training_orchestrator.py", "--config-path",
                "/var/tmp/clusterval-logs/clusterval/r1/nxdt", "--config-name", "clusterval_nxdt"]
            env = nodes[host]["container"]["env"]
            assert (env["NNODES"], env["NODE_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == \
                ("2", str(rank), "10.1.0.1", "41000")

    def test_only_the_first_node_prints_steps(self):
        nodes = plan()["nodes"]
        assert (nodes["trn-a"]["prints_steps"], nodes["trn-b"]["prints_steps"]) == (True, False)

    def test_launch_environment_and_the_neuron_environment_nxdt_derives(self):
        planned = plan()
        env = planned["nodes"]["trn-a"]["container"]["env"]
        wanted = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1", "MALLOC_ARENA_MAX": "128"}
        assert {name: env[name] for name in wanted} == wanted
        assert "NEURON_CC_FLAGS" not in env  # NxDT appends to it: exporting it would double the flags
        neuron = planned["nxdt"]["neuron_env"]
        assert neuron["NEURON_CC_FLAGS"] == "--model-type transformer --enable-mixed-precision-accumulation"
        assert (neuron["XLA_USE_BF16"], neuron["XLA_DOWNCAST_BF16"], neuron["NEURON_RT_EXEC_TIMEOUT"]) == \
            ("0", "1", "100")
        assert planned["nxdt"]["parallel"] == {"tp": 8, "pp": 1, "cp": 1, "dp": 8}

    def test_containers_get_the_neuron_and_efa_devices(self):
        container = plan()["nodes"]["trn-b"]["container"]
        assert container["devices"][0] == "/dev/neuron0" and "/dev/infiniband/uverbs15" in container["devices"]
        assert container["groups"] == [] and "device_requests" not in container
        assert container["image"].startswith("public.ecr.aws/neuron/pytorch-training-neuronx:")

    def test_rendered_yaml_is_written_beside_the_log(self):
        files = {item["path"]: item["content"] for item in plan()["nodes"]["trn-a"]["files"]}
        written = yaml.safe_load(files["/var/tmp/clusterval-logs/clusterval/r1/nxdt/clusterval_nxdt.yaml"])
        assert written["trainer"]["num_nodes"] == 2 and written["trainer"]["max_steps"] == 30
        assert written["exp_manager"]["explicit_log_dir"] == "/var/tmp/clusterval-logs/clusterval/r1/nxdt/logs"

    def test_overrides_reach_the_cluster_settings(self):
        planned = plan(overrides={"config": {"container_image": "clusterval/simulator:latest", "log_dir": "/tmp/l"}},
                       container_image=None)
        assert planned["simulated"] and planned["nodes"]["trn-a"]["run_dir"] == "/tmp/l/clusterval/r1"

    def test_one_node(self):
        planned = plan(hosts=HOSTS[:1])
        assert "FI_PROVIDER" not in planned["nodes"]["trn-a"]["container"]["env"]


class TestRefusedNamingTheYamlPath:
    def refused(self, tmp_path, **changes):
        with pytest.raises(ConfigError) as info:
            plan(yaml_file(tmp_path, **changes))
        return info.value

    def test_documented_precision(self, tmp_path):
        error = self.refused(tmp_path, precision__type="mixed_precisionSR")
        assert error.path == "precision.type" and "mixed_precision_SR" in str(error)

    def test_model_parallel_not_dividing_the_two_nodes(self, tmp_path):
        assert self.refused(tmp_path, distributed_strategy__tensor_model_parallel_size=48).path == \
            "distributed_strategy"

    def test_batch(self, tmp_path):
        assert self.refused(tmp_path, data__global_batch_size=12).path == "data.global_batch_size"

    def test_log_every_n_steps(self, tmp_path):
        assert self.refused(tmp_path, trainer__log_every_n_steps=10).path == "trainer.log_every_n_steps"

    def test_more_processes_than_neuron_cores(self, tmp_path):
        error = self.refused(tmp_path, trainer__devices=128)
        assert error.path == "trainer.devices" and "at most 64" in str(error)

    def test_a_yaml_that_is_not_nxdt(self, tmp_path):
        path = tmp_path / "other.yaml"
        path.write_text("steps: 3\n")
        with pytest.raises(ConfigError, match="expected an NxDT YAML"):
            _config.load_config_file(str(path))
