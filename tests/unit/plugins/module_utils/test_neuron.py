"""Trainium nodes: neuron-ls's table, the vendor's facts, the probe asking neuron-ls."""
import os
import subprocess

from ansible_collections.clusterval.training.plugins.module_utils import _gpus, _neuron, _probe

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nxdt")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


class TestNeuronLs:
    def read(self, name):
        return _neuron.parse_neuron_ls(fixture(name))

    def test_trn2(self):
        report = self.read("neuron_ls_trn2.txt")
        assert (report["count"], report["cores"], report["logical_cores"], report["arch"]) == (16, 128, 64, "trn2")
        assert report["devices"][15] == {"index": 15, "cores": 8, "memory": "96 GB", "logical_cores": 4}

    def test_trn1_with_its_instance_type(self):
        report = self.read("neuron_ls_trn1.txt")
        assert (report["count"], report["cores"], report["instance_type"], report["arch"]) == \
            (16, 32, "trn1.32xlarge", "trn1")

    def test_no_device(self):
        assert _neuron.parse_neuron_ls("")["count"] == 0

    def test_logical_cores_of_an_arch(self):
        assert _neuron.ARCHS["trn1"].logical_cores() == 32 and _neuron.ARCHS["trn2"].logical_cores(1) == 128


class TestVendor:
    def test_arch_keys_and_images(self):
        assert _gpus.vendor_of_arch("trn1") == _gpus.vendor_of_arch("trn2") == _gpus.TRAINIUM
        image = "public.ecr.aws/neuron/pytorch-training-neuronx:2.7.0-neuronx-py310-sdk2.26.0-ubuntu22.04"
        assert _gpus.vendor_of_image(image) == _gpus.TRAINIUM
        assert _gpus.vendor_of_image("rocm/megatron-lm:v25.5") == _gpus.AMD

    def test_facts(self):
        facts = _gpus.VENDOR_FACTS[_gpus.TRAINIUM]
        assert facts.hca_provider == "efa" and facts.groups == () and facts.ld_library_path is None
        assert _gpus.is_gpu_device("/dev/neuron15", facts) and not _gpus.is_gpu_device("/dev/kfd", facts)
        assert not _gpus.is_gpu_device("/dev/neuron0", _gpus.VENDOR_FACTS[_gpus.AMD])

    def test_report(self):
        report = _gpus.trainium_report(fixture("neuron_ls_trn1.txt"))
        assert (report["vendor"], report["count"], report["arch"], report["neuron_cores"]) == \
            ("trainium", 16, "trn1", 32)
        assert _gpus.arch_matches("trn1", report) and not _gpus.arch_matches("trn2", report)
        assert _gpus.describe(report).startswith("16 x AWS Trainium (trn1)")


class TestProbe:
    def test_neuron_ls_is_the_device_tool(self, tmp_path):
        tool = tmp_path / "neuron-ls"
        tool.write_text("#!/bin/sh\ncat %s\n" % os.path.join(FIXTURES, "neuron_ls_trn1.txt"))
        tool.chmod(0o755)

        def run(argv):
            return subprocess.run(argv, capture_output=True, text=True, check=True)

        checks, report = _probe.gpu_probe([{"path": str(tool)}], {}, "trn1", None, run, _gpus.TRAINIUM)
        assert report["vendor"] == "trainium" and all(check["ok"] for check in checks), checks
        checks, _report = _probe.gpu_probe([{"path": str(tool)}], {}, "trn2", None, run, _gpus.TRAINIUM)
        assert not checks[-1]["ok"]


class TestPreflightCount:
    def test_the_plans_processes_fit_in_the_nodes_neuron_cores(self):
        from ansible_collections.clusterval.training.plugins.module_utils import _health
        output = fixture("neuron_ls_trn2.txt")
        assert _health.gpu_count_check("/opt/aws/neuron/bin/neuron-ls", output, 32)["ok"]
        assert _health.gpu_count_check("/opt/aws/neuron/bin/neuron-ls", output, 64)["ok"]
        refused = _health.gpu_count_check("/opt/aws/neuron/bin/neuron-ls", output, 65)
        assert not refused["ok"] and "16 Neuron devices, 64 logical NeuronCores" in refused["detail"]

    def test_no_device_listed(self):
        from ansible_collections.clusterval.training.plugins.module_utils import _health
        assert not _health.gpu_count_check("/opt/aws/neuron/bin/neuron-ls", "", 1)["ok"]
