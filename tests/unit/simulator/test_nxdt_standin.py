"""The NxDT stand-in run directly on two local 'nodes': the YAML the plan renders, its output as NxDT prints it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _logs, _nxdt

STANDIN = Path(__file__).resolve().parents[3] / "simulator" / "standin"
SEED = Path(__file__).resolve().parents[2] / "fixtures" / "nxdt" / "seed003_nxdt.yaml"


class Job:
    def __init__(self, tmp_path: Path, free_port) -> None:
        self.tmp = tmp_path
        self.port = free_port()
        self.dev = tmp_path / "dev"
        (self.dev / "infiniband").mkdir(parents=True)
        for index in range(16):
            (self.dev / ("neuron%d" % index)).touch()
        (self.dev / "infiniband" / "uverbs0").touch()
        self.examples = tmp_path / "examples"
        self.examples.mkdir()
        (self.examples / "training_orchestrator.py").write_text("# NxDT's entry point\n")

    def render(self, nnodes=2, steps=4, **changes) -> None:
        document = _nxdt.load_text(SEED.read_text(), "seed")
        document.update(changes)
        job = _nxdt.plan_job(document, nnodes, steps=steps)
        (self.tmp / (_nxdt.CONFIG_NAME + ".yaml")).write_text(_nxdt.render(job.document))

    def write_raw(self, text: str) -> None:
        (self.tmp / (_nxdt.CONFIG_NAME + ".yaml")).write_text(text)

    def start(self, rank: int, nnodes: int = 2, **env: str) -> subprocess.Popen:
        argv = _nxdt.torchrun_argv(32, nnodes, rank, "127.0.0.1", self.port, str(self.tmp))
        environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTERVAL_SIM_DEVICE_ROOT": str(self.dev),
                   "CLUSTERVAL_SIM_STEP_SECONDS": "0.01", "CLUSTERVAL_SIM_FIRST_STEP_SECONDS": "0",
                   "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "30", **_nxdt.LAUNCH_ENV, **env}
        return subprocess.Popen([sys.executable, str(STANDIN / "nxdt_train.py"), *argv], cwd=str(self.examples),
                                env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def run(self, nnodes: int = 2, **env: str) -> list[tuple[int, str]]:
        procs = [self.start(rank, nnodes, **env) for rank in range(nnodes)]
        outputs = [proc.communicate(timeout=120)[0].decode() for proc in procs]  # bytes: keeps the \r
        return [(proc.returncode, output) for proc, output in zip(procs, outputs)]


@pytest.fixture
def job(tmp_path):
    from conftest import free_port
    return Job(tmp_path, free_port)


def test_two_nodes_train_and_only_the_first_prints_the_bar(job):
    job.render()
    (code0, out0), (code1, out1) = job.run()
    assert (code0, code1) == (0, 0), out0 + out1
    assert out0.count("\r") == 4 and out0.endswith("]\n") and "\rEpoch 0: 100%|##########| 4/4 [" in out0
    assert "\r" not in out1 and "Epoch 0" not in out1
    assert "INFO ||NEURON_CACHE||: Compile cache path: /home/ubuntu/neuron_cache" in out1
    result = _logs.parse_text(out0, "nxdt")
    assert [step["step"] for step in result.steps] == [0, 1, 2, 3] and result.errors == []
    assert result.steps[-1]["throughput"] > 0 and result.simulated


def test_documented_precision_refused_as_nxdt_does(job):
    job.write_raw(SEED.read_text().replace("type: 'mixed_precision'", "type: 'mixed_precisionSR'")
                  .replace("num_nodes: 1", "num_nodes: 2"))
    (code, out), = job.run(nnodes=1)
    assert code == 1 and "Invalid option given for precision type" in out


def test_a_node_without_neuron_devices(job):
    job.render()
    for device in job.dev.glob("neuron*"):
        device.unlink()
    (code0, out0), (code1, out1) = job.run(CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT="3")
    assert code0 == 1 and "No neuron device available" in out0
    assert [error["pattern"] for error in _logs.parse_text(out0, "nxdt").errors][:1] == ["neuron_no_device"]


def test_several_nodes_need_efa(job):
    job.render()
    (code0, out0), (code1, out1) = job.run(FI_PROVIDER="sockets", CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT="3")
    assert code0 == 1 and "aws-ofi-nccl initialization failed" in out0


def test_a_crash_on_the_second_node(job):
    job.render(steps=6)
    (code0, out0), (code1, out1) = job.run(CLUSTERVAL_SIM_CRASH_AT_STEP="2", CLUSTERVAL_SIM_CRASH_RANK="1")
    assert code0 == 1 and code1 == 1
    crashed = _logs.parse_text(out1, "nxdt").errors
    assert {"child_failed", "exitcode"} <= {error["pattern"] for error in crashed}
    survivor = _logs.parse_text(out0, "nxdt")
    assert survivor.last_step in (0, 1) and all(error["consequence"] for error in survivor.errors)
