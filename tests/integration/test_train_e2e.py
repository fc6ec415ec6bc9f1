"""playbooks/train.yml end to end against the simulated cluster: real ansible-playbook, SSH, Docker."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view
from controller import ansible_playbook

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = ansible_playbook()
JAX_MULTI = "configs/jax/mi300x_distributed_llama3_1_70b.json"
JAX_SINGLE = "configs/jax/mi300x_singlenode_llama3_1_70b.json"
MEGATRON_MULTI = "configs/megatron/mi3xx_megatron_llama_distributed.json"
MEGATRON_ARGS = ["-e", "training_model=llama3_1_8b", "-e", "training_gpu_arch=mi300x"]
PRIMUS_ARGS = [*MEGATRON_ARGS, "-e", "training_framework=primus"]
# Primus writes under its checkout, not Megatron-LM's (as configs/comparison/llama3_8b_nvidia_vs_amd.yml says).
PRIMUS_OUTPUT = {"config": {"container_config": {"volume_dict": {"/tmp/TRAINING_LOGS": "/workspace/Primus/output"}}}}
FAST = "0.2"
# Every run must end well inside this (the slowest fault below is the hang timeout + teardown).
RUN_TIMEOUT_S = 240


def sim_env(**knobs: str) -> dict:
    env = {"CLUSTERVAL_SIM_STEP_SECONDS": FAST, **{f"CLUSTERVAL_SIM_{k}": v for k, v in knobs.items()}}
    return {"config": {"container_config": {"env_dict": env}}}


def deep_merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def train_argv(cluster, config: str, run_dir: Path, hosts: list[str], extra: dict | None = None,
               args: list[str] | None = None, fabric: bool = False) -> list[str]:
    """``fabric``: the fabric gate as configured (on for multi-node runs); off by default here, where the
    training is judged (test_fabric.py tests the gate)."""
    variables = {"training_run_dir": str(run_dir), "training_hosts": ":".join(hosts),
                 "training_overrides_extra": deep_merge(sim_env(), extra or {})}
    if not fabric:
        variables["fabric_enabled"] = False
    return [ANSIBLE_PLAYBOOK, "-i", str(cluster.inventory), str(REPO / "playbooks" / "train.yml"),
            "-e", f"training_config={config}", "-e", json.dumps(variables), *(args or [])]


def run_train(cluster, config: str, run_dir: Path, hosts: list[str], extra: dict | None = None,
              args: list[str] | None = None, more_vars: dict | None = None,
              fabric: bool = False) -> subprocess.CompletedProcess:
    argv = train_argv(cluster, config, run_dir, hosts, extra, args, fabric)
    if more_vars:
        argv += ["-e", json.dumps(more_vars)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def training_containers(cluster, node: str) -> list[str]:
    out = cluster.docker(node, "ps", "-a", "--filter", "label=clusterval.run_id", "--format", "{{.Names}}").stdout
    return [line for line in out.splitlines() if line.strip()]


def assert_no_training_container(cluster, nodes: list[str]) -> None:
    for node in nodes:
        assert training_containers(cluster, node) == [], f"{node} still runs a training container"


def final_step_of(run_dir: Path) -> int:
    return json.loads((run_dir / "plan.json").read_text())["final_step"]


def watch_file(run_dir: Path, name: str) -> Path:
    """A file of the run's watch directory (``<run dir>/watch/<run id>/``)."""
    found = sorted(run_dir.glob(f"watch/*/{name}"))
    assert len(found) == 1, found
    return found[0]


def training_underway(run_dir: Path) -> bool:
    """The cluster watch saw a step on some node."""
    for path in run_dir.glob("watch/*/progress.json"):
        try:
            progress = json.loads(path.read_text())["progress"]
        except (ValueError, KeyError):
            continue
        if progress["step"]["max"] is not None:
            return True
    return False


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def record_timing(what: str, seconds: float) -> None:
    """A figure for BENCHMARKS.md ("Time to a verdict"), never a bound in a test (a loaded machine would break
    it): appended as a JSON line to $CLUSTERVAL_TIMINGS when it is set."""
    path = os.environ.get("CLUSTERVAL_TIMINGS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"what": what, "seconds": round(seconds, 1)}) + "\n")


@pytest.fixture(scope="module")
def nodes(simcluster) -> list[str]:
    return simcluster.nodes[:2]


def test_jax_multi_node_seed_config_passes(simcluster, nodes, tmp_path):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "VERDICT: PASS" in proc.stdout
    assert results(tmp_path)["verdict"] == "PASS"
    for node in nodes:
        log = (tmp_path / "logs" / node / "training.log").read_text()
        assert "completed step: 11," in log
    assert (tmp_path / "plan.json").is_file()
    assert_no_training_container(simcluster, nodes)
    assert "shared_cache: " in proc.stdout and not list(simcluster.shared_dir.glob(".clusterval-preflight-*"))
    # preflight's real defaults, as the nodes' user (not root): dmesg as root through become, the GPUs through
    # the vendor's tool at its real path
    for node in nodes:
        assert f"{node} preflight OK   gpu_errors: no GPU error in the kernel log since boot (dmesg, as root)" \
            in proc.stdout
        assert (f"{node} preflight OK   gpu_count: /opt/rocm/bin/amd-smi lists 8 GPUs (AMD Instinct MI300X), the "
                "plan needs 8") in proc.stdout


def test_megatron_multi_node_seed_config_passes(simcluster, nodes, tmp_path):
    proc = run_train(simcluster, MEGATRON_MULTI, tmp_path, nodes, args=MEGATRON_ARGS)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert results(tmp_path)["verdict"] == "PASS"
    # Only the last node prints iteration lines; the first is done when its process exits or the job completes.
    assert "iteration" in (tmp_path / "logs" / nodes[-1] / "training.log").read_text()
    assert_no_training_container(simcluster, nodes)


@pytest.mark.parametrize("watch_mode", ["cluster", "node"])
def test_a_primus_run_passes_in_both_watch_modes(simcluster, nodes, tmp_path, watch_mode):
    """Primus prints Megatron-LM's lines: both watches read them as such (the per-node watch once asked
    training_log for a format named primus and failed at its first poll)."""
    proc = run_train(simcluster, MEGATRON_MULTI, tmp_path, nodes, extra=PRIMUS_OUTPUT, args=PRIMUS_ARGS,
                     more_vars={"train_watch_mode": watch_mode})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    document = results(tmp_path)
    assert (document["verdict"], document["framework"]) == ("PASS", "primus")
    # tokens_per_gpu comes from the sequence length and the world size handed to the parser of Megatron's lines
    assert document["summary"]["cluster"]["tokens_per_gpu"]["mean"] > 0, document["summary"]["cluster"]
    assert_no_training_container(simcluster, nodes)


def test_the_direct_look_at_silent_primus_nodes_reads_their_logs(simcluster, nodes, tmp_path):
    """The status directory removed: no node's status comes, every node gets a direct look, and each look reads
    the node's Primus log (the look's training_log once refused the format primus and learned nothing)."""
    argv = train_argv(simcluster, MEGATRON_MULTI, tmp_path, nodes, deep_merge(sim_env(STEP_SECONDS="1"), PRIMUS_OUTPUT),
                      args=[*PRIMUS_ARGS, "-e", "training_iterations=60"])
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: training_underway(tmp_path), 180)
        run_id = json.loads((tmp_path / "plan.json").read_text())["run_id"]
        subprocess.run(["rm", "-rf", str(simcluster.shared_dir / ".clusterval-status" / run_id)], check=True)
        output, dummy = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "VERDICT: FAIL: removed: the run's status directory" in output, output[-3000:]
    looks = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("watch/*/direct/*.json")}
    assert sorted(looks) == sorted(nodes), output[-3000:]
    for host, look in looks.items():
        assert "reading the training log failed" not in look["msg"], look
        assert look["reason"] != "error", look
    assert_no_training_container(simcluster, nodes)


def test_thresholds_above_the_simulated_speed_fail_naming_the_metric(simcluster, nodes, tmp_path):
    extra = {"model_params": {"multi_node": {"llama3_1_8b": {"mi300x": {"result_dict": {
        "throughput_per_gpu": "1000000.0", "tokens_per_gpu": "1.0"}}}}}}
    proc = run_train(simcluster, MEGATRON_MULTI, tmp_path, nodes, extra=extra, args=MEGATRON_ARGS)
    assert proc.returncode != 0
    assert "throughput_per_gpu" in proc.stdout
    failed = [c for c in results(tmp_path)["checks"] if c["status"] == "fail"]
    assert {c["metric"] for c in failed} == {"throughput_per_gpu"}
    assert_no_training_container(simcluster, nodes)


def test_single_node_config_on_two_hosts_runs_two_jobs(simcluster, nodes, tmp_path):
    # The seed's thresholds are real MI300X figures, far above the simulator's speed.
    extra = {"model_params": {"single_node": {"llama3.1-70b": {"mi300x": {"result_dict": {
        "tflops_per_sec_per_gpu": "1.0", "tokens_per_sec_per_gpu": "1.0"}}}}}}
    proc = run_train(simcluster, JAX_SINGLE, tmp_path, nodes, extra=extra)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert [job["hosts"] for job in plan["jobs"]] == [[nodes[0]], [nodes[1]]]
    assert all(node_view(plan, host)["nnodes"] == 1 for host in plan["nodes"])
    assert_no_training_container(simcluster, nodes)


@pytest.mark.parametrize("knobs, cause", [
    ({"CRASH_AT_STEP": "5", "CRASH_RANK": "1"}, "xlaruntimeerror"),  # the cause: the traceback's exception
    ({"NAN_AT_STEP": "4"}, "nan"),
], ids=["crash", "nan"])
def test_a_fault_fails_naming_the_node_and_the_cause(simcluster, nodes, tmp_path, knobs, cause):
    started = time.monotonic()
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra=sim_env(**knobs),
                     more_vars={"train_hang_timeout": 8})
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    outcome = json.loads(watch_file(tmp_path, "outcome.json").read_text())
    culprit = outcome["culprit"]
    if cause == "nan":
        # Every rank reaches the same non-finite loss at the same step: the model's, no node's.
        assert culprit is None and outcome["run_cause"]["text"].startswith("all 2 nodes failed alike: "), outcome
        assert "VERDICT: FAIL: nan: all 2 nodes failed alike" in proc.stdout
    else:
        assert culprit["host"] == nodes[1], outcome
        assert cause in (culprit["text"] + culprit["class"]).lower(), outcome
        assert f"VERDICT: FAIL: {culprit['host']} " in proc.stdout
        assert results(tmp_path)["culprit"]["host"] == culprit["host"]
    record_timing(f"a {cause} reported (run)", elapsed)
    assert_no_training_container(simcluster, nodes)


def test_a_hung_rank_stops_every_rank_in_lock_step_and_the_run_is_a_hang(simcluster, nodes, tmp_path):
    """As real JAX (tests/integration/test_real_maxtext.py): the other rank blocks at the next step's collective,
    so both stop at the same step; nothing in their output singles out the hung one."""
    started = time.monotonic()
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra=sim_env(HANG_AT_STEP="4", HANG_RANK="1"),
                     more_vars={"train_hang_timeout": 8})
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    document = results(tmp_path)
    assert [document["summary"]["nodes"][node]["last_step"] for node in nodes] == [3, 3]
    assert "hang" in json.dumps(document["failures"]).lower(), document["failures"]
    record_timing("a lock-step hang reported (run)", elapsed)
    assert_no_training_container(simcluster, nodes)
    # Both ranks sleep (the hung one in its stall, the other in the collective): nothing singles one out.
    assert document["culprit"] is None, document["headline"]
    assert document["headline"].startswith("FAIL: hang: all 2 nodes stopped after step 3; no node stands out")
    # The verdict gives the exact isolation command (playbooks/isolate.yml), which tests/integration/test_isolate.py runs.
    assert "clusterval.training.isolate" in document["advice"] and "clusterval.training.isolate" in proc.stdout


def test_a_slow_node_slows_every_node_in_lock_step_and_is_no_straggler(simcluster, nodes, tmp_path):
    """Real JAX runs in lock-step (every step's collectives wait for the slowest rank): each node reports the
    same step times, so the step times single out no straggler; the whole job is slower."""
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra=sim_env(SLOW_RANK="1", SLOW_FACTOR="3"))
    document = results(tmp_path)
    stragglers = [c for c in document["checks"] if c["check"] == "straggler" and c["status"] == "fail"]
    assert stragglers == [], stragglers
    seconds = [document["summary"]["nodes"][node]["steady"]["seconds"]["mean"] for node in nodes]
    assert abs(seconds[0] - seconds[1]) <= 0.01 * max(seconds), seconds
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert_no_training_container(simcluster, nodes)


def test_check_mode_shows_each_nodes_container_and_command_and_starts_nothing(simcluster, nodes, tmp_path):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    # The node's packages are checked as root in a task of their own (installed already: nothing would change).
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, nodes, args=["--check"]) + [
        "-e", json.dumps({"node_prep_rdma_packages": ["iproute2"]})]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    tasks = [task for play in json.loads(proc.stdout)["plays"] for task in play["tasks"]]
    shown = {host: result for t in tasks if t["task"]["name"].endswith("running the framework")
             for host, result in t["hosts"].items()}
    packages = {host: result for t in tasks if t["task"]["name"].endswith("The node's packages, installed as root")
                for host, result in t["hosts"].items()}
    plan = json.loads((tmp_path / "plan.json").read_text())
    for rank, node in enumerate(nodes):
        container = shown[node]["container"]
        # What the container would run: the node's supervisor, which runs the plan's launch script.
        assert container["command"][0] == "python3" and container["command"][-1].endswith("/config.json")
        assert node_view(plan, node)["container"]["command"] == ["sh", node_view(plan, node)["run_dir"] + "/launch.sh"]
        assert shown[node]["launch"] == node_view(plan, node)["launch"]
        assert container["env"]["NODE_RANK"] == str(rank) and container["image"] == simcluster.image
        assert packages[node]["changed"] is False and not packages[node].get("failed")
    assert_no_training_container(simcluster, nodes)
    assert not list(simcluster.shared_dir.glob(".clusterval-preflight-*"))


def test_a_package_the_nodes_lack_stops_the_run_at_the_containers_start(simcluster, nodes, tmp_path):
    missing = "clusterval-no-such-package"
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, more_vars={"node_prep_rdma_packages": ["iproute2", missing]})
    assert proc.returncode != 0
    assert f"No package matching '{missing}' is available" in proc.stdout
    stop = results(tmp_path)["stop"]
    assert stop["stage"] == "container start" and stop["hosts"] == nodes and stop["never_started"] == nodes
    assert "Launch the framework" not in proc.stdout
    assert_no_training_container(simcluster, nodes)


def test_a_remaining_changeme_fails_before_any_container_starts(simcluster, nodes, tmp_path):
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, extra={"config": {"nccl_ib_gid_index": "<changeme>"}})
    assert proc.returncode != 0
    assert "nccl_ib_gid_index" in proc.stdout + proc.stderr
    assert "Launch the framework" not in proc.stdout
    assert_no_training_container(simcluster, nodes)


def test_a_data_cache_dir_that_is_not_shared_fails_preflight(simcluster, nodes, tmp_path):
    private = "/tmp/clusterval-private-cache"  # every simulated node has its own /tmp
    proc = run_train(simcluster, JAX_MULTI, tmp_path, nodes, {"config": {"data_cache_dir": private}},
                     more_vars={"preflight_shared_wait": 3})
    assert proc.returncode != 0
    assert f"{nodes[1]} preflight FAIL shared_cache: {private} is not the directory {nodes[0]} wrote" in proc.stdout
    assert f"preflight failed on {nodes[1]}: shared_cache" in proc.stdout
    assert_no_training_container(simcluster, nodes)
    leftovers = simcluster.ssh(nodes[0], f"ls -A {private}").stdout
    assert ".clusterval-preflight-" not in leftovers


def test_a_training_container_killed_from_outside_fails_at_the_next_poll(simcluster, nodes, tmp_path):
    victim = nodes[1]
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, nodes, sim_env(STEP_SECONDS="1"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: training_underway(tmp_path), 120)
        simcluster.docker(victim, "kill", *training_containers(simcluster, victim))
        started = time.monotonic()
        output, dummy = proc.communicate(timeout=RUN_TIMEOUT_S)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    # Decided by the container's state (its exit status), not by a timeout or a hang; the job never ran to its end.
    assert f"{victim}: the training container rocm-jax-llama3.1-70b exited with status 137" in output
    last_steps = [state["last_step"] for state in results(tmp_path)["summary"]["nodes"].values()]
    assert max(step for step in last_steps if step is not None) < final_step_of(tmp_path), last_steps
    record_timing("a killed container reported (kill to the controller's end)", elapsed)
    assert_no_training_container(simcluster, nodes)


def test_a_node_unreachable_during_the_run_fails_naming_it(simcluster, nodes, tmp_path):
    lost = nodes[1]
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, nodes, sim_env(STEP_SECONDS="1"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out_path = tmp_path.parent / (tmp_path.name + "-ansible.out")
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: training_underway(tmp_path), 120)
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "down"])
        started = time.monotonic()
        proc.wait(timeout=RUN_TIMEOUT_S)
        elapsed = time.monotonic() - started
        output = out_path.read_text()
    finally:
        simcluster.run(lost, ["ip", "link", "set", simcluster.ifname, "up"], check=False)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "UNREACHABLE" in output and lost in output
    record_timing("a node unreachable during the run reported (link down to the controller's end)", elapsed)
    assert_no_training_container(simcluster, [nodes[0]])
    assert not list(simcluster.shared_dir.glob(".clusterval-preflight-*")), "the first node removes the marker"
    # The lost node's container is removed by the stand-alone teardown once it is back.
    wait_for(lambda: simcluster.ssh(lost, "true", check=False).returncode == 0, 60)
    teardown = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(simcluster.inventory), str(REPO / "playbooks" / "teardown.yml"),
                               "-e", f"training_config={JAX_MULTI}", "-e", "training_hosts=" + ":".join(nodes)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert teardown.returncode == 0, teardown.stdout[-3000:]
    assert_no_training_container(simcluster, nodes)


def test_rerun_after_an_interrupted_run_is_refused_then_takes_over_the_stale_containers(simcluster, nodes, tmp_path):
    first = tmp_path / "first"
    argv = train_argv(simcluster, JAX_MULTI, first, nodes, sim_env(STEP_SECONDS="2"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for(lambda: training_underway(first), 120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # Ansible's workers run in sessions of their own: end them too, as an operator would.
        subprocess.run(["pkill", "-KILL", "-f", str(first)], check=False)
    assert all(training_containers(simcluster, node) for node in nodes), "the interrupted run left no container"
    # One run per node: the rerun is refused while the interrupted run's job is there, then takes it over.
    refused = run_train(simcluster, JAX_MULTI, tmp_path / "second", nodes)
    assert refused.returncode != 0 and f"{nodes[0]} is busy with run " in refused.stdout
    assert all(training_containers(simcluster, node) for node in nodes), "a refused run removed a container"
    second = run_train(simcluster, JAX_MULTI, tmp_path / "third", nodes, more_vars={"training_takeover": True})
    assert second.returncode == 0, second.stdout[-4000:]
    assert_no_training_container(simcluster, nodes)


def test_the_hf_token_appears_nowhere(simcluster, nodes, tmp_path):
    token = "hf_clusterval" + os.urandom(8).hex()
    for node in nodes:
        simcluster.ssh(node, f"umask 077; printf %s {token} > /tmp/clusterval-hf-token")
    argv = train_argv(simcluster, JAX_MULTI, tmp_path, nodes, sim_env(STEP_SECONDS="0.5"), ["-vv"])
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out_path = tmp_path.parent / (tmp_path.name + "-ansible.out")
    with open(out_path, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: training_underway(tmp_path), 120)
        inspect = "".join(simcluster.docker(node, "inspect", name, check=False).stdout
                          for node in nodes for name in training_containers(simcluster, node))
        proc.wait(timeout=RUN_TIMEOUT_S)
        output = out_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for node in nodes:
            simcluster.ssh(node, "rm -f /tmp/clusterval-hf-token", check=False)
    assert proc.returncode == 0, output[-4000:]
    assert inspect and token not in inspect
    assert token not in output
    files = {path: path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()}
    for path, text in files.items():
        assert token not in text, path
    # The framework did get it (the simulator says whether HF_TOKEN is set, never its value).
    logs = [text for path, text in files.items() if path.suffix == ".log"]
    assert len(logs) == len(nodes) and all("HF_TOKEN set" in text for text in logs)


def wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"condition not met within {timeout_s}s")
