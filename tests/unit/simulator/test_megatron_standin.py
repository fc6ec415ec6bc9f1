"""The Megatron-LM stand-in: the ROCm example script's interface, real iteration and summary lines."""
from __future__ import annotations

import re
import time

import pytest

ITERATION = re.compile(
    r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +(\d+)/ +(\d+) \| consumed samples: +(\d+) \| "
    r"elapsed time per iteration \(ms\): ([\d.]+) \| mem usages: [\d.]+ \| throughput per GPU \(TFLOP/s/GPU\): "
    r"([\d.]+) \| learning rate: \d\.\d{6}E[-+]\d\d \| global batch size: +(\d+) \|(?: lm loss: (\S+) \|)? "
    r"loss scale: 1\.0 \|(?: grad norm: [\d.]+ \|)? number of skipped iterations: +0 \| "
    r"number of nan iterations: +(\d+) \|$", re.M)
# A real line of the ROCm fork (tests/fixtures/real-logs/megatron_real.txt, MG-11).
REAL_LINE = (" [2025-08-13 03:42:28] iteration       50/      50 | consumed samples:        12800 | elapsed time per "
             "iteration (ms): 10235.8 | mem usages: 0.7494 | throughput per GPU (TFLOP/s/GPU): 590.2 | learning rate: "
             "9.999999E-05 | global batch size:   256 | lm loss: 7.272264E+00 | loss scale: 1.0 | grad norm: 1.571 | "
             "number of skipped iterations:   0 | number of nan iterations:   0 |")


def iterations(output: str) -> list[tuple]:
    return ITERATION.findall(output)


def summary(output: str) -> dict[str, str]:
    keys = ("throughput per GPU", "elapsed time per iteration", "tokens/GPU/s", "mem usages")
    return {m[0]: m[1] for m in re.findall(rf"^({'|'.join(map(re.escape, keys))}): (\S+)$", output, re.M)}


def test_the_pattern_matches_a_real_line():
    assert ITERATION.fullmatch(REAL_LINE)


def test_single_node_prints_iterations_and_the_scripts_summary(standin):
    proc = standin.megatron()
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("[clusterval simulator] simulated Megatron-LM training")
    rows = iterations(proc.stdout)
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r[1] == "6" and r[5] == "128" for r in rows)
    assert [int(r[2]) for r in rows] == [128 * i for i in range(1, 7)]
    losses = [float(r[6]) for r in rows]
    assert losses[-1] < losses[0]
    stats = summary(proc.stdout)
    kept = [float(r[3]) for r in rows][2:-1]  # the script drops the first two and the last
    assert float(stats["elapsed time per iteration"]) == pytest.approx(sum(kept) / len(kept), rel=1e-12)
    tokens = 128 * 8192 * 1000 / (float(stats["elapsed time per iteration"]) * 8)
    assert abs(float(stats["tokens/GPU/s"]) - tokens) < 0.01


def test_short_runs_summarise_as_nan(standin):
    stats = summary(standin.megatron({"TOTAL_ITERS": "3"}).stdout)
    assert stats == {"throughput per GPU": "nan", "elapsed time per iteration": "nan", "tokens/GPU/s": "nan",
                     "mem usages": "nan"}


def test_fp8_is_faster_than_bf16(standin):
    fp8 = iterations(standin.megatron({"TE_FP8": "1"}).stdout)
    bf16 = iterations(standin.megatron({"TE_FP8": "0"}).stdout)
    assert float(fp8[3][4]) > 1.2 * float(bf16[3][4])


def test_unsupported_model_size(standin):
    proc = standin.megatron({"MODEL_SIZE": "13"})
    assert proc.returncode == 1 and proc.stdout.strip() == "Model size not supported."


def test_te_fp8_must_be_an_integer(standin):
    proc = standin.megatron({"TE_FP8": "True"})
    assert proc.returncode == 2
    assert "integer expression expected" in proc.stdout
    assert "invalid int value: 'True'" in proc.stdout


def test_every_setting_must_be_passed_explicitly(standin):
    proc = standin.megatron(drop=("FSDP",))
    assert proc.returncode != 0 and "FSDP is not set" in proc.stdout


def test_data_path_must_stay_unset_for_mock_data(standin):
    proc = standin.megatron({"DATA_PATH": ""})
    assert proc.returncode != 0 and "DATA_PATH is set" in proc.stdout


def test_recompute_needs_the_layer_count(standin):
    assert "RECOMPUTE_NUM_LAYERS=32" in standin.megatron({"RECOMPUTE": "1"}).stdout
    assert standin.megatron({"RECOMPUTE": "1", "RECOMPUTE_NUM_LAYERS": "32"}).returncode == 0


def test_batch_must_divide_by_micro_batch_times_data_parallel(standin):
    proc = standin.megatron({"BS": "100"})
    assert proc.returncode != 0
    assert ("global batch size (100) is not divisible by micro batch size (2) times data parallel size (8)"
            in proc.stdout)


def test_fsdp_forces_tp_1(standin):
    proc = standin.megatron({"FSDP": "1", "TP": "8", "MODEL_SIZE": "70", "BS": "16", "MBS": "2"})
    assert proc.returncode == 0, proc.stdout
    assert "TP=1 PP=1 FSDP=1" in proc.stdout


def test_multi_node_needs_real_interface_names(standin):
    env = {"NNODES": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    proc = standin.megatron(env)
    assert proc.returncode != 0
    assert "Unable to find address for: ens51np0" in proc.stdout
    no_hca = standin.megatron({**env, "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"})
    assert "NCCL_IB_HCA" in no_hca.stdout and no_hca.returncode != 0


def multi_node_env(port: int) -> dict[str, str]:
    return {"NNODES": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo",
            "NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_HCA": "rdma0"}


def test_only_the_last_node_prints_iterations(standin):
    env = multi_node_env(standin.free_port())
    last = standin.megatron_popen({**env, "NODE_RANK": "1"})
    first = standin.megatron({**env, "NODE_RANK": "0"})
    out_last, dummy = last.communicate(timeout=60)
    assert first.returncode == 0 and last.returncode == 0, first.stdout + out_last
    assert iterations(first.stdout) == [] and summary(first.stdout) == {}
    assert len(iterations(out_last)) == 6
    assert "tokens/GPU/s" in summary(out_last)


def test_master_unreachable_is_a_dist_network_error(standin):
    env = {**multi_node_env(standin.free_port()), "NODE_RANK": "1", "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "0.5"}
    proc = standin.megatron(env)
    assert proc.returncode != 0
    assert "torch.distributed.DistNetworkError: The client socket has timed out after 500ms" in proc.stdout


def test_master_waiting_for_workers_is_a_store_timeout(standin):
    env = {**multi_node_env(standin.free_port()), "NODE_RANK": "0", "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "0.5"}
    proc = standin.megatron(env)
    assert proc.returncode != 0
    assert "DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined." in proc.stdout


def test_nan_drops_the_loss_and_counts_nan_iterations(standin):
    rows = iterations(standin.megatron({"CLUSTERVAL_SIM_NAN_AT_STEP": "4"}).stdout)
    assert [r[6] != "" for r in rows] == [True, True, True, False, False, False]
    assert [r[7] for r in rows] == ["0", "0", "0", "1", "1", "1"]


def test_crash_prints_an_nccl_error_and_fails(standin):
    proc = standin.megatron({"CLUSTERVAL_SIM_CRASH_AT_STEP": "3"})
    assert proc.returncode == 1
    assert len(iterations(proc.stdout)) == 2
    assert "torch.distributed.DistBackendError: NCCL error" in proc.stdout
    assert "ChildFailedError" in proc.stdout


def test_crash_can_exit_zero_like_the_real_script(standin):
    proc = standin.megatron({"CLUSTERVAL_SIM_CRASH_AT_STEP": "3", "CLUSTERVAL_SIM_EXIT_ZERO_ON_FAILURE": "1"})
    assert proc.returncode == 0 and "ncclSystemError" in proc.stdout


def test_tee_output_writes_the_train_log(standin):
    log_dir = standin.tmp / "logs"
    proc = standin.megatron({"LOG_DIR": str(log_dir), "EXP_NAME": "exp"})
    assert proc.returncode == 0
    assert (log_dir / "output_exp.log").read_text() == proc.stdout


def test_hang_on_the_last_node_stops_the_lines(standin):
    proc = standin.megatron_popen({"CLUSTERVAL_SIM_HANG_AT_STEP": "3"})
    time.sleep(2)
    assert proc.poll() is None
    proc.kill()
    out, dummy = proc.communicate()
    assert [int(r[0]) for r in iterations(out)] == [1, 2]


def test_nnodes_must_be_an_integer(standin):
    proc = standin.megatron({"NNODES": "two"})
    assert proc.returncode == 1
    assert "NNODES='two' is not an integer" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_llama2_script_takes_llama2_sizes(standin):
    assert standin.megatron({"MODEL_SIZE": "7"}, script="train_llama2.sh").returncode == 0
    assert standin.megatron({"MODEL_SIZE": "7"}).stdout.strip() == "Model size not supported."
    assert standin.megatron({"MODEL_SIZE": "8"}, script="train_llama2.sh").returncode == 1


def test_nvidia_device_nodes_are_gpus_too_and_none_at_all_is_an_error(standin):
    # what the simulated NVIDIA Container Toolkit hook makes for a device request, without AMD's nodes
    (standin.dev / "kfd").unlink()
    proc = standin.megatron()
    assert proc.returncode != 0 and "RuntimeError: No HIP GPUs are available" in proc.stdout
    (standin.dev / "nvidiactl").touch()
    (standin.dev / "nvidia0").touch()
    proc = standin.megatron()
    assert proc.returncode == 0, proc.stdout
