"""Slurm as the launcher (issue 31), on `scripts/simcluster up --slurm`: Debian's real slurmctld, slurmd, munge and
slurmdbd. The run is one sbatch job submitted from the login host; the nodes are never reached over SSH."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import pytest

from test_isolate import slow_node_inventory
from test_safety import finish
from test_train_e2e import (ANSIBLE_PLAYBOOK, JAX_MULTI, REPO, RUN_TIMEOUT_S, assert_no_training_container, results,
                            sim_env, train_argv, training_underway, wait_for)

pytestmark = pytest.mark.cluster

SIMCLUSTER = REPO / "scripts" / "simcluster"
SLURM = {"training_launcher": "slurm"}


@pytest.fixture(scope="module")
def slurm(simcluster):
    """Slurm on the session's nodes (added once; `up --slurm` leaves a healthy Slurm as it is)."""
    proc = subprocess.run([str(SIMCLUSTER), "up", "--nodes", str(len(simcluster.nodes)), "--slurm"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return simcluster


def login(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """A command on the login host (its namespaces), as an administrator there would type it."""
    proc = subprocess.run([str(SIMCLUSTER), "exec", "login", "--", *argv], capture_output=True, text=True,
                          timeout=60, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def env() -> dict:
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def slurm_argv(cluster, run_dir, hosts, extra=None, more_vars=None) -> list[str]:
    argv = train_argv(cluster, JAX_MULTI, run_dir, hosts, extra)
    return argv + ["-e", json.dumps(dict(SLURM, **(more_vars or {})))]


def run_slurm(cluster, run_dir, hosts, extra=None, more_vars=None) -> subprocess.CompletedProcess:
    return subprocess.run(slurm_argv(cluster, run_dir, hosts, extra, more_vars), cwd=REPO, env=env(),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def start_slurm(cluster, run_dir, hosts, extra=None) -> subprocess.Popen:
    out = open(str(run_dir) + "-ansible.out", "w")
    return subprocess.Popen(slurm_argv(cluster, run_dir, hosts, extra), cwd=REPO, env=env(), stdout=out,
                            stderr=subprocess.STDOUT)


def running_job() -> str:
    """The id of the one clusterval job that runs now."""
    jobs = [line.split() for line in login("squeue", "-h", "-t", "RUNNING", "-o", "%i %j").stdout.splitlines()]
    ours = [job_id for job_id, name in jobs if name.startswith("clusterval-")]
    assert len(ours) == 1, jobs
    return ours[0]


def no_job_left() -> bool:
    return not login("squeue", "-h", "-o", "%i").stdout.strip()


@contextlib.contextmanager
def sshd_stopped(cluster, hosts):
    """The nodes' sshd stopped for the block: a run that needs no SSH to the nodes still passes."""
    for host in hosts:
        pid = (cluster.state_dir / "nodes" / host / "sshd.pid").read_text().strip()
        os.kill(int(pid), signal.SIGTERM)
    try:
        yield
    finally:
        for host in hosts:
            node_dir = cluster.state_dir / "nodes" / host
            cluster.run(host, ["/usr/sbin/sshd", "-f", str(node_dir / "sshd_config"), "-E", str(node_dir / "sshd.log")])


def test_a_pass_on_the_nodes_slurm_gave_from_a_reservation_and_sacct_shows_the_job(slurm, tmp_path):
    """Nodes from the scheduler: Slurm picks 2 free nodes of a reservation, the run is planned on them in the
    plan's order (the pool's, not Slurm's), never reaches them over SSH, and releases the holding job."""
    given = slurm.nodes[-2:]
    pool = list(reversed(slurm.nodes))
    login("scontrol", "create", "reservation", "ReservationName=pool", "StartTime=now", "Duration=30",
          "Nodes=%s" % ",".join(given), "Users=%s" % slurm.user)
    try:
        with sshd_stopped(slurm, given):
            proc = run_slurm(slurm, tmp_path, pool, more_vars={"slurm_nodes": 2, "slurm_reservation": "pool"})
    finally:
        login("scontrol", "delete", "ReservationName=pool", check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    document = results(tmp_path)
    assert document["verdict"] == "PASS", document["headline"]
    job = json.loads((tmp_path / "plan.json").read_text())["jobs"][0]
    assert job["hosts"] == pool[:2] == list(reversed(given)), job["hosts"]
    assert job["coordinator_address"] == slurm.addresses[pool[0]], job
    record = document["scheduler"]
    assert record["launcher"] == "slurm" and record["sacct"]["State"] == "COMPLETED", record
    assert record["sacct"]["NodeList"] == "%s[%s-%s]" % (given[0][:-1], given[0][-1], given[1][-1]), record
    assert record["srun_errors"] == {} and record["drain"] == {"argv": [], "run": False}, record
    accounted = login("sacct", "-j", record["job_id"], "-X", "--parsable2", "--noheader",
                      "--format=JobName,State,Comment").stdout.strip().split("|")
    assert accounted == ["clusterval-%s" % document["run_id"], "COMPLETED",
                         "clusterval.training:run:%s" % document["run_id"]], accounted
    # the holding job: released as soon as the run's job was submitted on its nodes
    held = holding_jobs()[-1]
    assert int(held[0]) < int(record["job_id"]) and held[1].startswith("CANCELLED"), held
    assert record["allocation"] == {"job_id": held[0], "nodes": pool[:2]}, record
    assert "Slurm | Submit the job" in proc.stdout and "Slurm | Release the allocation" in proc.stdout
    assert_no_training_container(slurm, given)
    assert no_job_left()


def holding_jobs() -> list[list[str]]:
    """JobID, State of every holding job of the nodes from the scheduler, oldest first."""
    table = login("sacct", "-X", "--parsable2", "--noheader", "--name=clusterval-allocation",
                  "--format=JobID,State").stdout
    return [line.split("|") for line in table.splitlines() if line.strip()]


def test_nodes_slurm_gave_outside_the_training_hosts_are_refused_and_released(slurm, tmp_path):
    """Bad input before anything runs: the nodes Slurm gave must be training hosts of the inventory (here the pool
    is node1:node2, the reservation holds the other two), and slurm_nodes needs the Slurm launcher."""
    pool, given = slurm.nodes[:2], slurm.nodes[-2:]
    login("scontrol", "create", "reservation", "ReservationName=pool", "StartTime=now", "Duration=30",
          "Nodes=%s" % ",".join(given), "Users=%s" % slurm.user)
    try:
        proc = run_slurm(slurm, tmp_path, pool, more_vars={"slurm_nodes": 2, "slurm_reservation": "pool"})
    finally:
        login("scontrol", "delete", "ReservationName=pool", check=False)
    assert proc.returncode != 0
    assert "slurm_nodes: Slurm gave %s, not in %s of the inventory" % (", ".join(given), ":".join(pool)) \
        in proc.stdout, proc.stdout[-3000:]
    assert holding_jobs()[-1][1].startswith("CANCELLED") and "Plan the run" not in proc.stdout
    assert no_job_left()
    refused = run_slurm(slurm, tmp_path / "refused", pool, more_vars={"slurm_nodes": 2, "slurm_reservation": "none"})
    assert refused.returncode != 0 and "slurm_nodes: the allocation failed (no node was tested): sbatch: error: " \
        in refused.stdout, refused.stdout[-3000:]
    over_ssh = subprocess.run(train_argv(slurm, JAX_MULTI, tmp_path / "ssh", pool) + ["-e", "slurm_nodes=2"],
                              cwd=REPO, env=env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert over_ssh.returncode != 0 and "slurm_nodes: expected 0 (the given nodes) with training_launcher ssh, found 2" in \
        over_ssh.stdout, over_ssh.stdout[-3000:]


def test_isolate_runs_its_subsets_as_slurm_jobs_on_the_nodes_slurm_gave(slurm, tmp_path):
    """isolate.yml under Slurm with slurm_nodes: one allocation for the isolation (released before the first
    subset), then each subset its own job on exactly its nodes; the slow node follows its node (a host variable of
    its container, as on the SSH path), whatever its rank in the subset."""
    if len(slurm.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    a, b, c, d = slurm.nodes[:4]
    run_dir = tmp_path / "isolation"
    argv = [ANSIBLE_PLAYBOOK, "-i", str(slurm.inventory), "-i", slow_node_inventory(tmp_path / "slow.json", c),
            str(REPO / "playbooks" / "isolate.yml"), "-e", f"training_config={JAX_MULTI}", "-e", json.dumps(dict(
                SLURM, slurm_nodes=4, training_run_dir=str(run_dir), isolate_iterations=6, isolate_max_rounds=1,
                training_overrides_extra=sim_env(STEP_SECONDS="0.15")))]
    proc = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=2 * RUN_TIMEOUT_S,
                          check=False)
    document = json.loads((run_dir / "isolation.json").read_text())
    rounds = [[(g["hosts"], g["judgement"]) for g in entry["groups"]] for entry in document["rounds"]]
    assert rounds == [[([a, b], "healthy"), ([c, d], "slow")]], (rounds, proc.stdout[-3000:])
    allocation = holding_jobs()[-1]
    assert allocation[1].startswith("CANCELLED"), allocation
    for group in document["rounds"][0]["groups"]:
        record = json.loads((run_dir / "rounds" / group["name"] / "results.json").read_text())["scheduler"]
        assert record["launcher"] == "slurm" and int(record["job_id"]) > int(allocation[0]), record
        assert login("scontrol", "show", "hostnames", record["sacct"]["NodeList"]).stdout.split() == group["hosts"]
    assert_no_training_container(slurm, slurm.nodes[:4])
    assert no_job_left()


def last_job_id() -> int:
    """The newest job id Slurm gave: slurmctld's own memory (every job of the last MinJobAge seconds, ended ones
    too) and the accounting's, which records a job a moment after slurmctld does."""
    known = login("squeue", "-h", "-t", "all", "-o", "%i").stdout.split()
    known += login("sacct", "-X", "-n", "-o", "JobID").stdout.split()
    return max((int(job_id) for job_id in known if job_id.isdigit()), default=0)


def test_check_mode_shows_the_job_script_and_submits_nothing(slurm, tmp_path):
    hosts = slurm.nodes[:2]
    before = last_job_id()
    proc = subprocess.run(slurm_argv(slurm, tmp_path, hosts, more_vars={"slurm_partition": "gpu"}) + ["--check"],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for line in ("#SBATCH --nodelist=node1,node2", "#SBATCH --no-requeue", "#SBATCH --partition=gpu",
                 "exec srun --kill-on-bad-exit=0"):
        assert line in proc.stdout, line
    assert last_job_id() == before
    assert_no_training_container(slurm, hosts)


def test_a_crash_on_one_node_of_four_names_that_node_as_on_the_ssh_path_and_drains_it(slurm, tmp_path):
    """The crash's culprit as on the SSH path, the other nodes' own causes kept; drain (opt-in) rendered and run
    with the run and the headline as Slurm's reason."""
    if len(slurm.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    hosts = slurm.nodes[:4]
    proc = run_slurm(slurm, tmp_path, hosts, extra=sim_env(CRASH_AT_STEP="3", CRASH_RANK="2"),
                     more_vars={"slurm_drain": True})
    try:
        assert proc.returncode != 0
        document = results(tmp_path)
        culprit = document["culprit"]
        assert culprit["host"] == hosts[2] and culprit["step"] == 2 and "XlaRuntimeError" in culprit["text"], culprit
        assert sorted(document["consequences"]) == sorted(set(hosts) - {hosts[2]}), document["consequences"]
        record = document["scheduler"]
        assert record["srun_errors"][hosts[2]]["exit_code"] == 1, record["srun_errors"]
        drain = record["drain"]
        assert drain["run"] is True and drain["argv"][:4] == ["scontrol", "update", "NodeName=%s" % hosts[2],
                                                              "State=DRAIN"], drain
        state, reason = login("sinfo", "-h", "-n", hosts[2], "-o", "%t|%E").stdout.strip().split("|", 1)
        assert state in ("drain", "drng"), state
        assert reason.startswith("clusterval run %s: FAIL: %s" % (document["run_id"], hosts[2])), reason
        assert {login("sinfo", "-h", "-n", host, "-o", "%t").stdout.strip() for host in hosts if host != hosts[2]} \
            == {"idle"}
    finally:
        login("scontrol", "update", "NodeName=%s" % hosts[2], "State=RESUME", check=False)
    assert_no_training_container(slurm, hosts)
    assert no_job_left()


def job_of(run_dir) -> str:
    """The id of the run's job, running now."""
    run_id = json.loads((run_dir / "plan.json").read_text())["run_id"]
    jobs = login("squeue", "-h", "-t", "RUNNING", "-n", "clusterval-%s" % run_id, "-o", "%i").stdout.split()
    assert len(jobs) == 1, jobs
    return jobs[0]


def test_scancel_by_someone_else_and_a_time_limit_are_the_runs_causes_and_name_no_node(slurm, tmp_path):
    """Two runs at once, on two pairs of nodes, each ended by Slurm while it trains: one job cancelled by someone
    else, the other's limit shortened by an administrator to a minute (Slurm ends it within its next check)."""
    if len(slurm.nodes) < 4:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    cancelled, timed = tmp_path / "scancel", tmp_path / "time-limit"
    runs = [start_slurm(slurm, cancelled, slurm.nodes[:2], sim_env(STEP_SECONDS="3")),
            start_slurm(slurm, timed, slurm.nodes[2:4], sim_env(STEP_SECONDS="15"))]
    try:
        for run_dir in (cancelled, timed):
            wait_for(lambda: training_underway(run_dir), 120)
        login("scontrol", "update", "JobId=%s" % job_of(timed), "TimeLimit=1")
        login("scancel", job_of(cancelled))
        assert [finish(run) != 0 for run in runs] == [True, True]
    finally:
        for run in runs:
            finish(run, 5)
    assert_no_training_container(slurm, slurm.nodes[:4])
    assert no_job_left()
    for run_dir, cause in ((cancelled, "cancelled"), (timed, "time limit")):
        document = results(run_dir)
        assert document["culprit"] is None and document["scheduler"]["drain"]["argv"] == [], document["culprit"]
        assert document["run_cause"]["class"] == cause, document["run_cause"]
    assert results(cancelled)["headline"].startswith("FAIL: cancelled: the job was cancelled outside this run")
    assert "JobState=TIMEOUT" in results(timed)["run_cause"]["text"]


def test_a_job_pending_on_a_reservation_runs_no_timer_and_its_limit_names_slurms_reason(slurm, tmp_path):
    hosts = slurm.nodes[:2]
    login("scontrol", "create", "reservation", "ReservationName=maint", "StartTime=now", "Duration=30",
          "Nodes=%s" % ",".join(slurm.nodes), "Users=root", "Flags=maint")
    try:
        # pending 20 s: four times the stale timeout (5 s here), which would have ended a watched run
        proc = run_slurm(slurm, tmp_path, hosts, more_vars={"slurm_pending_timeout": 20})
        # nodes from the scheduler: the allocation pends as well, and its limit ends the run before any plan
        allocating = run_slurm(slurm, tmp_path / "allocation", hosts,
                               more_vars={"slurm_pending_timeout": 4, "slurm_nodes": 2})
    finally:
        login("scontrol", "delete", "ReservationName=maint", check=False)
    assert proc.returncode != 0
    document = results(tmp_path)
    assert document["culprit"] is None, document["culprit"]
    cause = document["run_cause"]
    assert cause["class"] == "pending" and "Slurm's reason: ReqNodeNotAvail" in cause["text"], cause
    assert "no node was tested" in cause["text"] and "stale" not in document["headline"]
    assert allocating.returncode != 0
    assert ("FAIL: pending: the allocation of 2 nodes pended past the pending limit of 4 s: Slurm's reason: "
            "ReqNodeNotAvail") in allocating.stdout, allocating.stdout[-3000:]
    assert holding_jobs()[-1][1].startswith("CANCELLED") and "Plan the run" not in allocating.stdout
    assert no_job_left(), login("squeue").stdout
    assert_no_training_container(slurm, hosts)


def kill_node(host: str) -> None:
    """The node dies as far as Slurm and the training know: slurmd, the job's steps and the training processes
    killed (its sshd and Docker engine stay, to clean up after)."""
    netns = "%s-%s" % (os.environ.get("CLUSTERVAL_SIMCLUSTER_PREFIX", "cvsim"), host)
    keep = ("sshd", "dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2")
    for pid in subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout.split():
        try:
            comm = open("/proc/%s/comm" % pid).read().strip()
            if comm not in keep:
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_a_node_slurm_lost_is_named_with_its_node_fail_and_the_job_is_not_requeued(slurm, tmp_path):
    hosts = slurm.nodes[:2]
    run = start_slurm(slurm, tmp_path, hosts, sim_env(STEP_SECONDS="2"))
    try:
        wait_for(lambda: training_underway(tmp_path), 120)
        job_id = running_job()
        kill_node(hosts[1])
        assert finish(run) != 0
    finally:
        finish(run, 5)
        subprocess.run([str(SIMCLUSTER), "up", "--nodes", str(len(slurm.nodes)), "--slurm"], capture_output=True,
                       timeout=600, check=False)
    document = results(tmp_path)
    culprit = document["culprit"]
    assert culprit["host"] == hosts[1] and culprit["evidence"] == "slurm", culprit
    assert "NODE_FAIL: %s is down" % hosts[1] in culprit["text"] and "Not responding" in culprit["text"], culprit
    assert document["consequences"] == [hosts[0]]
    assert document["scheduler"]["job"]["state"] == "NODE_FAIL"
    # --no-requeue: the job was not sent back to the queue to run again on other nodes
    assert document["scheduler"]["job"]["restarts"] == "0" and document["scheduler"]["job_id"] == job_id
    assert_no_training_container(slurm, hosts[:1])
    # The lost node's container died with it; Slurm cannot reach the node to remove what is left (SSH can).
    assert slurm.docker(hosts[1], "ps", "-q", "--filter", "label=clusterval.run_id").stdout.strip() == ""
    slurm.docker(hosts[1], "container", "prune", "-f", "--filter", "label=clusterval.run_id")


@pytest.mark.parametrize("signums", [(signal.SIGINT, signal.SIGTERM), (signal.SIGKILL,)], ids=["sigint-sigterm", "sigkill"])
def test_an_interrupted_controller_leaves_no_container_and_no_job(slurm, tmp_path, signums):
    """Ctrl-C and SIGTERM (two runs at once, on two pairs of nodes), and a killed controller (SIGKILL), which runs no
    teardown at all: the lease alone stops every supervisor."""
    pairs = [slurm.nodes[2 * index:2 * index + 2] for index in range(len(signums))]
    if len(pairs[-1]) < 2:
        pytest.skip("needs 4 simulated nodes (CLUSTERVAL_SIMCLUSTER_NODES=4)")
    run_dirs = [tmp_path / signal.Signals(signum).name for signum in signums]
    runs = [start_slurm(slurm, run_dir, hosts, sim_env(STEP_SECONDS="3600")) for run_dir, hosts in zip(run_dirs, pairs)]
    try:
        for run_dir in run_dirs:
            wait_for(lambda: bool(list(run_dir.glob("watch/*/progress.json"))), 120)
        for run, signum in zip(runs, signums):
            run.send_signal(signum)
        assert [finish(run, 120) != 0 for run in runs] == [True] * len(runs)
    finally:
        for run in runs:
            finish(run, 5)
    # The lease lapses (train_lease_timeout, 20 s here): every supervisor stops its job, every task ends.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not no_job_left():
        time.sleep(2)
    assert no_job_left(), login("squeue").stdout
    assert_no_training_container(slurm, [host for hosts in pairs for host in hosts])


@pytest.mark.real
def test_real_maxtext_passes_through_sbatch_on_two_nodes(slurm, tmp_path):
    """Real MaxText, JAX and XLA on CPU (the real-framework image) as one sbatch job: jax.distributed joins the two
    nodes from the environment each task takes by its Slurm node name."""
    loaded = subprocess.run([str(SIMCLUSTER), "real-image"], capture_output=True, text=True, timeout=1800, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    hosts = slurm.nodes[:2]
    proc = run_slurm(slurm, tmp_path, hosts, more_vars={"simcluster_real": True})
    assert proc.returncode == 0, proc.stdout[-5000:]
    document = results(tmp_path)
    assert document["verdict"] == "PASS" and document["simulated"] is False, document["headline"]
    assert document["scheduler"]["sacct"]["State"] == "COMPLETED", document["scheduler"]
    # MaxText's own steps on both nodes, read from their status streams on the shared file system
    assert any("MaxText's own train.py" in line for line in document["realism"]["real"]), document["realism"]
    assert document["final_step"] == 11 and document["summary"]["cluster"]["loss_decreased"]["nodes"] == 2
    assert_no_training_container(slurm, hosts)
    assert no_job_left()
