"""The MaxText stand-in: checks as MaxText/JAX/XLA would, real step lines, rendezvous, faults."""
from __future__ import annotations

import re
import time

STEP = re.compile(r"^completed step: (\d+), seconds: ([\d.]+), TFLOP/s/device: ([\d.]+), "
                  r"Tokens/s/device: ([\d.]+), total_weights: (\d+), loss: (\S+)$", re.M)


def steps(output: str) -> list[tuple]:
    return [(int(m[0]), float(m[1]), float(m[2]), float(m[3]), int(m[4]), m[5]) for m in STEP.findall(output)]


def test_single_node_prints_every_step_in_maxtexts_format(standin):
    proc = standin.maxtext("base_output_directory=/tmp/out", "steps=5")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("[clusterval simulator] simulated MaxText training")
    rows = steps(proc.stdout)
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    assert all(r[4] == 2 * 8192 * 8 for r in rows)  # total_weights = batch x seq x devices
    losses = [float(r[5]) for r in rows]
    assert losses[-1] < losses[0]
    assert rows[0][1] > rows[2][1] > rows[1][1]  # step 0 compiles, step 1 is absurdly fast
    assert "Distributed task shutdown result: OK" in proc.stdout


def test_throughput_follows_the_simulated_speed(standin):
    fast = steps(standin.maxtext(env={"CLUSTERVAL_SIM_TFLOPS": "400"}).stdout)
    slow = steps(standin.maxtext(env={"CLUSTERVAL_SIM_TFLOPS": "100"}).stdout)
    assert 380 < fast[3][2] < 420
    assert 95 < slow[3][2] < 105
    assert fast[3][3] > 3.5 * slow[3][3]


def test_unknown_command_line_key_fails_like_maxtext(standin):
    proc = standin.maxtext("micro_batch_size=2")
    assert proc.returncode != 0
    assert "ValueError: Key micro_batch_size was passed at the command line but isn't in config." in proc.stdout
    assert not STEP.search(proc.stdout)


def test_string_values_in_the_yaml_are_a_type_error(standin):
    proc = standin.maxtext(yaml=standin.yaml.read_text().replace("enable_dropout: False", 'enable_dropout: "False"'))
    assert proc.returncode != 0
    assert "TypeError: config key 'enable_dropout' has value 'False' of type str, expected bool" in proc.stdout


def test_command_line_values_are_converted_to_the_defaults_type(standin):
    proc = standin.maxtext("steps=3", "enable_checkpointing=false")
    assert proc.returncode == 0, proc.stdout
    assert [r[0] for r in steps(proc.stdout)] == [0, 1, 2]
    bad = standin.maxtext("steps=three")
    assert bad.returncode != 0 and "invalid literal for int()" in bad.stdout


def test_malformed_yaml_fails_with_a_parser_error(standin):
    proc = standin.maxtext(yaml="steps: 5\nmlp_activations: [silu, linear\n")
    assert proc.returncode != 0
    assert "yaml.parser.ParserError" in proc.stdout and "line 2" in proc.stdout


def test_unknown_xla_flag_aborts_like_xla(standin):
    proc = standin.maxtext(env={"XLA_FLAGS": "--xla_gpu_graph_level=0 --xla_gpu_enable_cublas_lt=true"})
    assert proc.returncode == 134
    assert "Unknown flag in XLA_FLAGS: --xla_gpu_enable_cublas_lt=true" in proc.stdout


def test_xla_flags_need_dashes_and_typed_values(standin):
    assert "Unknown flag in XLA_FLAGS: xla_gpu_graph_level=0" in standin.maxtext(
        env={"XLA_FLAGS": "xla_gpu_graph_level=0"}).stdout
    bad_bool = standin.maxtext(env={"XLA_FLAGS": "--xla_gpu_enable_cublaslt=True"})
    assert bad_bool.returncode == 134 and "Illegal value for flag" in bad_bool.stdout
    good = standin.maxtext(env={"XLA_FLAGS": "--xla_gpu_enable_cublaslt=true --xla_gpu_autotune_level=4 "
                                             "--xla_gpu_all_gather_combine_threshold_bytes=137438953472"})
    assert good.returncode == 0, good.stdout


def test_multi_node_without_node_rank_is_a_key_error(standin):
    proc = standin.maxtext(env={"JAX_COORDINATOR_IP": "127.0.0.1", "NNODES": "2"})
    assert proc.returncode != 0
    assert "KeyError: 'NODE_RANK'" in proc.stdout


def test_node_rank_must_be_below_nnodes(standin):
    proc = standin.maxtext(env={"JAX_COORDINATOR_IP": "127.0.0.1", "NNODES": "2", "NODE_RANK": "2"})
    assert proc.returncode != 0 and "NODE_RANK=2 is not in [0, NNODES=2)" in proc.stdout


def test_ici_product_must_equal_gpus_per_node(standin):
    proc = standin.maxtext("ici_fsdp_parallelism=4")
    assert proc.returncode != 0
    assert "Number of devices per slice 8 does not match the product of the ICI parallelism 4" in proc.stdout
    assert standin.maxtext("ici_fsdp_parallelism=4", env={"CLUSTERVAL_SIM_GPUS": "4"}).returncode == 0


def test_dcn_product_must_equal_nnodes(standin):
    env = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": str(standin.free_port()), "NNODES": "2",
           "NODE_RANK": "0"}
    proc = standin.maxtext("dcn_fsdp_parallelism=1", env=env)
    assert proc.returncode != 0
    assert "Number of slices 2 does not match the product of the DCN parallelism 1" in proc.stdout


def test_no_visible_gpu_devices(standin):
    (standin.dev / "kfd").unlink()
    proc = standin.maxtext()
    assert proc.returncode != 0 and "FAILED_PRECONDITION: No visible GPU devices" in proc.stdout


def test_required_paths_must_be_mounted(standin):
    proc = standin.maxtext(env={"CLUSTERVAL_SIM_REQUIRE_PATHS": f"{standin.tmp}:/nonexistent/cache"})
    assert proc.returncode != 0 and "No such file or directory: '/nonexistent/cache'" in proc.stdout


def test_two_ranks_rendezvous_and_both_train(standin):
    port = str(standin.free_port())
    common = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": port, "NNODES": "2"}
    rank1 = standin.maxtext_popen({**common, "NODE_RANK": "1"})
    time.sleep(0.3)  # rank 1 first: it must retry until rank 0 listens
    rank0 = standin.maxtext(env={**common, "NODE_RANK": "0"})
    out1, dummy = rank1.communicate(timeout=60)
    assert rank0.returncode == 0 and rank1.returncode == 0, rank0.stdout + out1
    for output in (rank0.stdout, out1):
        assert [r[0] for r in steps(output)] == [0, 1, 2, 3, 4]
        assert all(r[4] == 2 * 8192 * 16 for r in steps(output))


def test_rendezvous_timeout_is_a_jax_barrier_error(standin):
    env = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": str(standin.free_port()), "NNODES": "3",
           "NODE_RANK": "0", "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "0.5"}
    proc = standin.maxtext(env=env)
    assert proc.returncode != 0
    assert "DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect" in proc.stdout
    assert "# of tasks that reached the barrier: 1/3." in proc.stdout
    assert "/job:jax_worker/replica:0/task:2" in proc.stdout


def test_rendezvous_timeout_defaults_to_the_jax_timeout_capped(standin):
    from clusterval_sim import rendezvous_timeout

    assert rendezvous_timeout({}, 1800.0) == 120.0
    assert rendezvous_timeout({}, 30.0) == 30.0
    assert rendezvous_timeout({"CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "5"}, 1800.0) == 5.0


def test_crash_at_step_exits_with_a_traceback(standin):
    proc = standin.maxtext(env={"CLUSTERVAL_SIM_CRASH_AT_STEP": "3"})
    assert proc.returncode == 1
    assert [r[0] for r in steps(proc.stdout)] == [0, 1, 2]
    assert "Traceback (most recent call last):" in proc.stdout
    assert "XlaRuntimeError: INTERNAL: RCCL operation ncclAllReduce" in proc.stdout


def test_crash_on_another_rank_spares_this_one(standin):
    proc = standin.maxtext(env={"CLUSTERVAL_SIM_CRASH_AT_STEP": "1", "CLUSTERVAL_SIM_CRASH_RANK": "1"})
    assert proc.returncode == 0


def test_a_peer_that_dies_takes_the_job_down_as_real_jax_does(standin):
    """Real survivors (jax 0.12.0.1, gloo) print gloo's error at once, then abort after the heartbeat timeout."""
    port = str(standin.free_port())
    common = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": port, "NNODES": "2",
              "CLUSTERVAL_SIM_CRASH_AT_STEP": "2", "CLUSTERVAL_SIM_CRASH_RANK": "1",
              "CLUSTERVAL_SIM_PEER_EXIT_SECONDS": "1.5"}
    rank1 = standin.maxtext_popen({**common, "NODE_RANK": "1"})
    started = time.monotonic()
    rank0 = standin.maxtext(env={**common, "NODE_RANK": "0"})
    out1, dummy = rank1.communicate(timeout=60)
    assert rank1.returncode == 1 and "Traceback" in out1
    assert rank0.returncode == 134, rank0.stdout[-2000:]
    lines = rank0.stdout.splitlines()
    gloo = [i for i, line in enumerate(lines) if "Gloo all-reduce failed" in line and "Connection reset by peer" in line]
    fatal = [i for i, line in enumerate(lines) if "The following tasks are unhealthy (stopped sending heartbeats):" in line]
    assert gloo and fatal and gloo[0] < fatal[0], rank0.stdout[-2000:]
    assert "/job:jax_worker/replica:0/task:1" in rank0.stdout
    assert time.monotonic() - started >= 1.5, "the survivor waits the heartbeat timeout before it exits"
    assert [r[0] for r in steps(rank0.stdout)] == [0, 1], "lock-step: no rank completes the step its peer died in"


def test_lock_step_a_hung_rank_stops_every_rank_at_the_next_collective(standin):
    port = str(standin.free_port())
    common = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": port, "NNODES": "2",
              "CLUSTERVAL_SIM_HANG_AT_STEP": "3", "CLUSTERVAL_SIM_HANG_RANK": "1"}
    ranks = [standin.maxtext_popen({**common, "NODE_RANK": str(rank)}) for rank in (0, 1)]
    time.sleep(4)
    assert all(rank.poll() is None for rank in ranks), "both ranks still run: a collective has no timeout"
    outputs = []
    for rank in ranks:
        rank.kill()
        outputs.append(rank.communicate()[0])
    assert [[r[0] for r in steps(out)] for out in outputs] == [[0, 1, 2], [0, 1, 2]]


def test_lock_step_a_slow_rank_slows_every_rank(standin):
    port = str(standin.free_port())
    common = {"JAX_COORDINATOR_IP": "127.0.0.1", "JAX_COORDINATOR_PORT": port, "NNODES": "2",
              "CLUSTERVAL_SIM_SLOW_RANK": "1", "CLUSTERVAL_SIM_SLOW_FACTOR": "3"}
    rank1 = standin.maxtext_popen({**common, "NODE_RANK": "1"})
    rank0 = standin.maxtext(env={**common, "NODE_RANK": "0"})
    rows1 = steps(rank1.communicate(timeout=60)[0])
    rows0 = steps(rank0.stdout)
    assert [r[1] for r in rows0] == [r[1] for r in rows1], "every rank reports the step's slowest seconds"
    alone = steps(standin.maxtext(env={}).stdout)
    assert rows0[3][1] > 2.5 * alone[3][1]


def test_nan_from_step(standin):
    rows = steps(standin.maxtext(env={"CLUSTERVAL_SIM_NAN_AT_STEP": "3"}).stdout)
    assert [r[5] for r in rows][3:] == ["nan", "nan"]
    assert all(r[5] != "nan" for r in rows[:3])


def test_slow_rank_reports_lower_throughput(standin):
    normal = steps(standin.maxtext(env={"CLUSTERVAL_SIM_SLOW_RANK": "1", "CLUSTERVAL_SIM_SLOW_FACTOR": "2"}).stdout)
    slowed = steps(standin.maxtext(env={"CLUSTERVAL_SIM_SLOW_RANK": "0", "CLUSTERVAL_SIM_SLOW_FACTOR": "2"}).stdout)
    assert slowed[3][2] < 0.6 * normal[3][2]


def test_hang_stops_printing_but_keeps_running(standin):
    proc = standin.maxtext_popen({"CLUSTERVAL_SIM_HANG_AT_STEP": "2"})
    time.sleep(2)
    assert proc.poll() is None
    proc.kill()
    out, dummy = proc.communicate()
    assert [r[0] for r in steps(out)] == [0, 1]


def test_start_delay(standin):
    started = time.monotonic()
    assert standin.maxtext(env={"CLUSTERVAL_SIM_START_DELAY": "1"}).returncode == 0
    assert time.monotonic() - started >= 1


def test_the_first_step_is_the_slowest_as_compilation_makes_it(standin):
    proc = standin.maxtext_popen({"CLUSTERVAL_SIM_FIRST_STEP_SECONDS": "1.5"})
    time.sleep(1.0)
    early = proc.poll()
    out, dummy = proc.communicate(timeout=60)
    assert early is None and proc.returncode == 0
    printed = {int(r[0]): float(r[1]) for r in steps(out)}
    assert printed[0] == max(printed.values())
