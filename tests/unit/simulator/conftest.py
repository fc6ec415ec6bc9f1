"""Runs the simulator's stand-ins directly (no Docker): a crafted environment and a fake /dev."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parents[3] / "simulator" / "standin"
if str(STANDIN) not in sys.path:
    sys.path.insert(0, str(STANDIN))

MAXTEXT_YAML = """\
base_config: base.yml
run_name: unit
steps: 5
hardware: gpu
enable_checkpointing: false
per_device_batch_size: 2
max_target_length: 8192
base_emb_dim: 8192
base_num_query_heads: 64
base_num_kv_heads: 8
base_num_decoder_layers: 80
base_mlp_dim: 28672
head_dim: 128
vocab_size: 128256
mlp_activations: ["silu", "linear"]
quantization: ""
normalization_layer_epsilon: 1.0e-5
enable_dropout: False
ici_fsdp_parallelism: 8
dcn_fsdp_parallelism: -1
dcn_data_parallelism: 1
"""

MEGATRON_ENV = {"MODEL_SIZE": "8", "MBS": "2", "BS": "128", "TP": "1", "PP": "1", "SEQ_LENGTH": "8192",
                "TOTAL_ITERS": "6", "TE_FP8": "1", "FSDP": "0", "RECOMPUTE": "0", "MOCK_DATA": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandIn:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.dev = tmp_path / "dev"
        (self.dev / "dri").mkdir(parents=True)
        (self.dev / "kfd").touch()
        (self.dev / "dri" / "renderD128").touch()
        self.yaml = tmp_path / "maxtext.yml"
        self.yaml.write_text(MAXTEXT_YAML)

    @staticmethod
    def free_port() -> int:
        return free_port()

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTERVAL_SIM_DEVICE_ROOT": str(self.dev),
                "CLUSTERVAL_SIM_STEP_SECONDS": "0.01", "CLUSTERVAL_SIM_FIRST_STEP_SECONDS": "0"}
        return {**base, **extra}

    def maxtext(self, *args: str, env: dict[str, str] | None = None, yaml: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
        path = self.yaml
        if yaml is not None:
            path = self.tmp / "custom.yml"
            path.write_text(yaml)
        return subprocess.run([sys.executable, str(STANDIN / "maxtext_train.py"), str(path), *args],
                              env=self.env(env or {}), capture_output=True, text=True, timeout=timeout, check=False)

    def maxtext_popen(self, env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(STANDIN / "maxtext_train.py"), str(self.yaml)],
                                env=self.env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def megatron(self, env: dict[str, str] | None = None, drop: tuple[str, ...] = (),
                 script: str = "train_llama3.sh", timeout: float = 60) -> subprocess.CompletedProcess:
        full = {k: v for k, v in {**MEGATRON_ENV, **(env or {})}.items() if k not in drop}
        return subprocess.run([sys.executable, str(STANDIN / "megatron_train.py"), f"examples/llama/{script}"],
                              env=self.env(full), capture_output=True, text=True, timeout=timeout, check=False)

    def megatron_popen(self, env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(STANDIN / "megatron_train.py"), "train_llama3.sh"],
                                env=self.env({**MEGATRON_ENV, **env}), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)


@pytest.fixture()
def standin(tmp_path) -> StandIn:
    return StandIn(tmp_path)
