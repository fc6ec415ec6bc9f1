"""Real MaxText, JAX and XLA on the simulated cluster: the real-framework group (`pytest -m real`).

Every run here is MaxText's own train.py (the PyPI wheel pinned in simulator/real/requirements.txt)
on real JAX and XLA on CPU, two processes on two simulated nodes joined by jax.distributed through the
environment the plan generates, gloo collectives over the nodes' network. Only the GPUs and RDMA are
simulated. The faults are real too: a process killed, a typo that reaches XLA, a mesh MaxText refuses,
a process stopped. The tests assert what the playbooks write (results.json, the VERDICT line).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from test_train_e2e import (JAX_MULTI, REPO, assert_no_training_container, record_timing, results, train_argv,
                            watch_file)

pytestmark = [pytest.mark.cluster, pytest.mark.real]

REAL = {"simcluster_real": True}
# import, jax.distributed, compilation on 2 shared cores, 12 steps, teardown
RUN_TIMEOUT_S = 400
# steps of the runs a fault interrupts: after compilation a step takes 0.02 to 1 s, so the fault lands
# mid-run, well before the end
LONG_RUN = 400


@pytest.fixture(scope="module")
def real(simcluster) -> list[str]:
    """The real-framework image loaded into the nodes (built once and cached); the first two nodes."""
    proc = subprocess.run([str(REPO / "scripts" / "simcluster"), "real-image"], capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return simcluster.nodes[:2]


def start_train(cluster, run_dir: Path, nodes: list[str], extra: dict | None = None,
                steps: int | None = None) -> subprocess.Popen:
    variables = {**REAL, **({"training_iterations": steps} if steps else {})}
    argv = train_argv(cluster, JAX_MULTI, run_dir, nodes, extra) + ["-e", json.dumps(variables)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen) -> str:
    out = proc.communicate(timeout=RUN_TIMEOUT_S)[0]
    return out


def signalled_run(cluster, run_dir: Path, nodes: list[str], node: str, sig: str) -> tuple[subprocess.Popen, str, float]:
    """A long run whose training process on ``node`` gets ``sig`` after step 3: the process, its output and when."""
    proc = start_train(cluster, run_dir, nodes, steps=LONG_RUN)
    try:
        wait_for_step(cluster, run_dir, node, 3, proc)
        signal_training(cluster, node, sig)
        signalled_at = time.monotonic()
        out = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, out, signalled_at


def run_real(cluster, run_dir: Path, nodes: list[str], extra: dict | None = None) -> tuple[int, str]:
    proc = start_train(cluster, run_dir, nodes, extra)
    out = finish(proc)
    return proc.returncode, out


def verdict_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith("VERDICT:")]
    assert lines, stdout[-4000:]
    return lines[-1]


def model_params(**values: str) -> dict:
    return {"model_params": {"multi_node": {"llama3.1-70b": {"mi300x": values}}}}


def node_log(run_dir: Path, node: str) -> str:
    return (run_dir / "logs" / node / "training.log").read_text(errors="replace")


def live_log(cluster, run_dir: Path, node: str) -> str:
    """The node's training log of this run, as it grows (plan.json names it once the run is planned)."""
    try:
        plan = json.loads((run_dir / "plan.json").read_text())
    except (OSError, ValueError):
        return ""
    return cluster.run(node, ["cat", node_view(plan, node)["log_path"]], check=False).stdout


def wait_for_step(cluster, run_dir: Path, node: str, step: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while f"completed step: {step}," not in live_log(cluster, run_dir, node):
        assert proc.poll() is None, "the run ended before step %d on %s" % (step, node)
        assert time.monotonic() < deadline, "no step %d on %s in %.0fs" % (step, node, timeout)
        time.sleep(0.5)


def signal_training(cluster, node: str, signal_name: str) -> None:
    """Sends a signal to MaxText's train.py in the node's training container (not to the supervisor)."""
    script = "\n".join([
        "import os, signal",
        "for pid in filter(str.isdigit, os.listdir('/proc')):",
        "    try:",
        "        cmd = open('/proc/' + pid + '/cmdline', 'rb').read()",
        "    except OSError:",
        "        continue",
        "    if b'pre_train/train.py' in cmd and int(pid) != os.getpid():",
        "        os.kill(int(pid), signal." + signal_name + ")",
    ])
    names = cluster.docker(node, "ps", "--filter", "label=clusterval.run_id", "--format", "{{.Names}}").stdout.split()
    assert len(names) == 1, names
    cluster.docker(node, "exec", names[0], "python3", "-c", script)


def test_real_maxtext_trains_on_two_nodes_and_passes(simcluster, real, tmp_path):
    code, out = run_real(simcluster, tmp_path, real)
    assert code == 0, out[-5000:]
    assert verdict_line(out).startswith("VERDICT: PASS"), verdict_line(out)
    document = results(tmp_path)
    assert document["verdict"] == "PASS" and document["simulated"] is False
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["xla_flags_checked"]["jaxlib"] == "0.12.0.1", plan["xla_flags_checked"]
    assert any("xla_gpu_graph_level" in w for w in plan["warnings"]) is False, "the override removed it"
    for node in real:
        log = node_log(tmp_path, node)
        # MaxText's own step lines, from train.py of the PyPI wheel
        assert "metric_logger.py" in log and "completed step: 11," in log, log[-3000:]
        # jax.distributed joined both nodes: two CPU devices, one per process
        assert "JAX global devices: [CpuDevice(id=0), CpuDevice(id=" in log, log[:3000]
        # the shrunk model of the simulated inventory's overrides
        assert "Config param base_emb_dim: 64" in log and "Config param base_num_decoder_layers: 2" in log
        # XLA parsed the XLA_FLAGS we rendered (it aborts on any flag it does not know)
        assert "Unknown flag" not in log
    assert_no_training_container(simcluster, real)


def test_a_rank_killed_mid_run_is_the_culprit_and_the_survivor_a_consequence(simcluster, real, tmp_path):
    victim, survivor = real[1], real[0]
    proc, out, killed_at = signalled_run(simcluster, tmp_path, real, victim, "SIGKILL")
    took = time.monotonic() - killed_at
    assert proc.returncode != 0, out[-4000:]
    document = results(tmp_path)
    assert document["culprit"]["host"] == victim, document["culprit"]
    assert document["consequences"] == [survivor], document["consequences"]
    survivor_log = node_log(tmp_path, survivor)
    # the survivor's real line: gloo's collective to the dead peer (all-reduce or all-gather: where the step was)
    assert re.search(r"Gloo [\w-]+ failed", survivor_log), survivor_log[-3000:]
    assert "Connection reset by peer" in survivor_log or "Connection closed by peer" in survivor_log
    assert verdict_line(out).startswith("VERDICT: FAIL: %s " % victim), verdict_line(out)
    assert_no_training_container(simcluster, real)
    # The run's one decision follows the killed rank's exit, as the supervisor beside it saw it.
    exited = json.loads(watch_file(tmp_path, "%s.json" % victim).read_text())["exit_time"]
    decided = watch_file(tmp_path, "outcome.json").stat().st_mtime
    assert exited <= decided, "decided %.1f s before the rank's exit" % (exited - decided)
    # MaxText's survivors exit only after JAX's heartbeat timeout (85 s measured): the watch decided on the
    # survivor's own failure line while its training still ran (no exit of its own seen), and the collection
    # stopped it instead of waiting for it to exit.
    survivor_state = json.loads(watch_file(tmp_path, "%s.json" % survivor).read_text())
    assert (survivor_state["reason"], survivor_state.get("exit_time")) == ("error", None), survivor_state["msg"]
    # How long it took is a figure (BENCHMARKS.md), never a bound here: a loaded machine would break it.
    record_timing("a killed rank decided (its exit to the decision, real MaxText)", decided - exited)
    record_timing("a killed rank reported (kill to the controller's end, real MaxText)", took)


def test_an_xla_flag_typo_reaches_xla_and_its_unknown_flag_line_is_the_cause(simcluster, real, tmp_path):
    typo = model_params(xla_flags={"xla_gpu_enable_cublasltt": "true"})
    code, out = run_real(simcluster, tmp_path, real, typo)
    assert code != 0, out[-4000:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert any("unknown XLA flag xla_gpu_enable_cublasltt" in w and "xla_gpu_enable_cublaslt" in w
               for w in plan["warnings"]), plan["warnings"]
    document = results(tmp_path)
    causes = [c["actual"] for c in document["checks"] if c["check"] == "errors" and c["status"] == "fail"]
    assert causes, document["checks"]
    for node in real:
        assert "Unknown flag in XLA_FLAGS: --xla_gpu_enable_cublasltt=true" in node_log(tmp_path, node)
    assert all("Unknown flag in XLA_FLAGS: --xla_gpu_enable_cublasltt=true" in str(c) for c in causes), causes
    assert "Unknown flag in XLA_FLAGS" in verdict_line(out), verdict_line(out)
    assert_no_training_container(simcluster, real)
    # Every node failed on its own with the same line: the cause is named, no node is singled out.
    assert document["culprit"] is None, document["headline"]
    assert document["run_cause"]["text"].startswith("all 2 nodes failed alike: "), document["run_cause"]


def test_a_mesh_maxtext_refuses_gives_its_assertion_error_as_the_cause(simcluster, real, tmp_path):
    # The plan believes 8 GPUs per node (the seed's), so 8 passes its check; MaxText sees the job's 2 devices.
    code, out = run_real(simcluster, tmp_path, real, model_params(ici_fsdp_parallelism="8"))
    assert code != 0, out[-4000:]
    document = results(tmp_path)
    causes = [str(c["actual"]) for c in document["checks"] if c["check"] == "errors" and c["status"] == "fail"]
    expected = "AssertionError: Number of devices per slice 2 does not match the product of the ICI parallelism 8"
    assert causes and all(expected in cause for cause in causes), causes
    assert "transformer_engine" not in verdict_line(out), "MaxText's handled import is never the cause"
    assert "AssertionError: Number of devices per slice" in verdict_line(out), verdict_line(out)
    assert_no_training_container(simcluster, real)
    assert document["culprit"] is None, document["headline"]
    assert document["run_cause"]["text"].startswith("all 2 nodes failed alike: "), document["run_cause"]


def test_a_stopped_rank_stops_every_rank_in_lock_step_and_the_run_is_a_hang(simcluster, real, tmp_path):
    stopped, other = real[1], real[0]
    proc, out, dummy = signalled_run(simcluster, tmp_path, real, stopped, "SIGSTOP")
    assert proc.returncode != 0, out[-4000:]
    document = results(tmp_path)
    last = {node: document["summary"]["nodes"][node]["last_step"] for node in real}
    # lock-step: the other rank blocks at the next collective, so no node gets ahead by more than a step
    assert abs(last[stopped] - last[other]) <= 1, last
    assert max(last.values()) < LONG_RUN - 1, last
    assert "hang" in json.dumps(document["failures"]).lower(), document["failures"]
    assert_no_training_container(simcluster, real)
    # Every node stopped at the same step and printed nothing after it; only the supervisor's sample of the
    # processes (the stopped rank's is in state T) singles one out. Never the rank that waits.
    culprit = document["culprit"]
    if culprit is None:
        assert "no node stands out" in document["run_cause"]["text"], document["run_cause"]
    else:
        assert culprit["host"] == stopped and "stopped (T)" in culprit["text"], culprit
