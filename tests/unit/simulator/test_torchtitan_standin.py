"""The TorchTitan stand-in run directly on two local 'nodes' with the TOML and the torchrun line the plan writes:
every local rank prints TorchTitan's metrics line, which the collection's parser reads back; what TorchTitan
refuses at start-up, the stand-in refuses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _logs, _stack_torchtitan

STANDIN = Path(__file__).resolve().parents[3] / "simulator" / "standin"
GPUS = 2


class Job:
    def __init__(self, tmp_path: Path, port: int) -> None:
        self.tmp = tmp_path
        self.port = port
        self.dev = tmp_path / "dev"
        (self.dev / "dri").mkdir(parents=True)
        (self.dev / "kfd").touch()
        (self.dev / "dri" / "renderD128").touch()
        self.config = tmp_path / "run_config.toml"

    def render(self, steps: int = 4, **params: str) -> None:
        values = _stack_torchtitan.settings(params, "p")
        model = _stack_torchtitan.MODELS["llama3_1_8b"]
        self.config.write_text(_stack_torchtitan.toml(model, values, False, steps))

    def start(self, rank: int, nnodes: int, extra: list[str], **env: str) -> subprocess.Popen:
        argv = _stack_torchtitan.torchrun_argv(GPUS, nnodes, rank, "127.0.0.1:%d" % self.port, str(self.config))
        environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTERVAL_SIM_DEVICE_ROOT": str(self.dev),
                   "CLUSTERVAL_SIM_STEP_SECONDS": "0.01", "CLUSTERVAL_SIM_FIRST_STEP_SECONDS": "0",
                   "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "30", **env}
        return subprocess.Popen([sys.executable, str(STANDIN / "torchtitan_train.py"), *argv, *extra],
                                env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def run(self, nnodes: int = 2, extra: list[str] | None = None, **env: str) -> list[tuple[int, str]]:
        procs = [self.start(rank, nnodes, extra or [], **env) for rank in range(nnodes)]
        return [(proc.wait(timeout=120), proc.communicate()[0]) for proc in procs]


@pytest.fixture
def job(tmp_path):
    from conftest import free_port
    return Job(tmp_path, free_port())


def test_two_nodes_train_and_every_local_rank_prints_the_metrics_line(job):
    job.render(steps=4, data_parallel_shard_degree="4")
    (first_rc, first), (second_rc, second) = job.run()
    assert (first_rc, second_rc) == (0, 0), first + second
    assert first.count("[rank0]:[titan] ") == 4 and first.count("[rank1]:[titan] ") == 4
    assert "[rank2]:[titan] " in second and "[rank0]:" not in second
    parsed = _logs.parse_text(second, "torchtitan")
    assert [step["step"] for step in parsed.steps] == [1, 2, 3, 4], "one record per step, whatever the ranks"
    step = parsed.steps[-1]
    assert step["rank"] == 2 and step["tokens_per_gpu"] == step["tokens_per_sec"] > 0
    assert step["throughput_per_gpu"] > 0 and 0 < step["mfu_pct"] < 100 and step["mem_gib"] > 0


def test_the_step_count_of_the_command_line_wins_over_the_file(job):
    job.render(steps=9)
    [(code, output)] = job.run(nnodes=1, extra=["--training.steps", "3"])
    assert code == 0 and max(s["step"] for s in _logs.parse_text(output, "torchtitan").steps) == 3


def test_parallel_sizes_that_do_not_make_up_the_world_are_refused_as_torchtitan_refuses_them(job):
    job.render(data_parallel_shard_degree="8")
    [(code, output)] = job.run(nnodes=1)
    assert code != 0
    assert ("AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard(8) * cp(1) * tp(1) * pp(1) != "
            "WORLD_SIZE(2)") in output


def test_a_missing_config_file_is_refused(job):
    [(code, output)] = job.run(nnodes=1)
    assert code != 0 and "FileNotFoundError: [Errno 2] No such file or directory: '%s'" % job.config in output


def test_a_crash_prints_torchruns_summary(job):
    job.render(steps=5, data_parallel_shard_degree="4")
    results = job.run(CLUSTERVAL_SIM_CRASH_AT_STEP="3", CLUSTERVAL_SIM_CRASH_RANK="1")
    assert results[1][0] != 0 and "torchtitan.train FAILED" in results[1][1]
    assert "ChildFailedError" in results[1][1]
