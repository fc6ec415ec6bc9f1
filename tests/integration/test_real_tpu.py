"""TPU-like simulated nodes (`scripts/simcluster vendor tpu`) with the real-framework image (`pytest -m real`).

Real here: MaxText's own train.py with `hardware: tpu`, libtpu (as jax[tpu] pins it) parsing the
LIBTPU_INIT_ARGS the plan renders, JAX's TPU discovery joining the two hosts from TPU_WORKER_HOSTNAMES,
TPU_WORKER_ID and MEGASCALE_*. Simulated: the chips (libtpu fails its topology; JAX trains on CPU).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest

from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view
from ansible_collections.clusterval.training.plugins.module_utils._xla import (
    LIBTPU_INIT_ARGS, XLA_FLAGS, render_flag_variables)
from test_real_maxtext import node_log, verdict_line
from test_train_e2e import REPO, assert_no_training_container, results, train_argv

pytestmark = [pytest.mark.cluster, pytest.mark.real]

TPU_CONFIG = "configs/tpu/v5p_llama3_1_8b.json"
TPU = {"simcluster_tpu": True, "training_gpus_per_node": 4, "training_gpu_arch": "v5p"}
RUN_TIMEOUT_S = 400
SIMCLUSTER = str(REPO / "scripts" / "simcluster")
_PROBE = importlib.util.spec_from_file_location("xla_probe", REPO / "simulator" / "real" / "xla_probe.py")
xla_probe = importlib.util.module_from_spec(_PROBE)
_PROBE.loader.exec_module(xla_probe)
TPU_HOST, CHILD_TPU = xla_probe.TPU_HOST, xla_probe.CHILD_TPU
SEED_002 = json.loads((REPO / "tests" / "fixtures" / "xla" / "seed-002-flags.json").read_text())["flags"]


@pytest.fixture(scope="module")
def tpu_nodes(simcluster) -> list[str]:
    """The first two nodes as TPU VM hosts with the real-framework image; AMD-like again afterwards."""
    image = subprocess.run([SIMCLUSTER, "real-image"], capture_output=True, text=True, timeout=1800, check=False)
    assert image.returncode == 0, image.stderr[-3000:]
    nodes = simcluster.nodes[:2]
    subprocess.run([SIMCLUSTER, "vendor", "tpu", *nodes], check=True, capture_output=True, timeout=60)
    try:
        yield nodes
    finally:
        subprocess.run([SIMCLUSTER, "vendor", "amd", *nodes], check=True, capture_output=True, timeout=60)


def run_tpu(cluster, run_dir, nodes, extra=None) -> tuple[int, str]:
    argv = train_argv(cluster, TPU_CONFIG, run_dir, nodes, extra) + ["-e", json.dumps(TPU)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_tpu_job_on_two_tpu_nodes_passes_with_real_maxtext_and_libtpu(simcluster, tpu_nodes, tmp_path):
    code, out = run_tpu(simcluster, tmp_path, tpu_nodes)
    assert code == 0, out[-5000:]
    assert verdict_line(out).startswith("VERDICT: PASS"), verdict_line(out)
    document = results(tmp_path)
    assert document["verdict"] == "PASS"
    assert any("libtpu" in part for part in document["realism"]["real"]), document["realism"]
    assert any("TPU chips" in part for part in document["realism"]["simulated"]), document["realism"]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["gpu_vendor"] == "tpu"
    env = node_view(plan, tpu_nodes[1])["container"]["env"]
    assert "--xla_tpu_enable_async_collective_fusion=true" in env[LIBTPU_INIT_ARGS].split(" "), env
    assert (env["TPU_WORKER_ID"], env["TPU_ACCELERATOR_TYPE"]) == ("1", "v5p-16"), env
    for name in tpu_nodes:
        log = node_log(tmp_path, name)
        # MaxText's step lines; libtpu loaded (no chip: its topology fails); JAX's TPU discovery joined both
        # hosts: two CPU devices, one gloo peer
        assert "completed step: 11," in log, log[-3000:]
        assert "Jax distributed system initialized on TPUs!" in log, log[:4000]
        assert "Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology." in log, log[:4000]
        assert "Num_devices: 2," in log and "is connected to 1 peer ranks" in log, log[-6000:]
    assert_no_training_container(simcluster, tpu_nodes)


def test_a_flag_libtpu_refuses_fails_the_run_naming_the_flag(simcluster, tpu_nodes, tmp_path):
    bad = {"model_params": {"multi_node": {"llama3.1-8b": {"v5p": {"xla_flags": {
        "xla_tpu_enable_async_collective_fusion_fuse_all_gathr": "true"}}}}}}
    code, out = run_tpu(simcluster, tmp_path, tpu_nodes, bad)
    assert code != 0, out[-4000:]
    assert verdict_line(out).startswith("VERDICT: FAIL"), verdict_line(out)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert any("unknown XLA flag xla_tpu_enable_async_collective_fusion_fuse_all_gathr" in w
               for w in plan["warnings"]), plan["warnings"]
    document = results(tmp_path)
    # libtpu's refusal is the evidence; a node may also print its peers' end (JAX's distributed service, a stream
    # removed) when the other refused first.
    causes = [c["actual"] for c in document["checks"] if c["check"] == "errors" and c["status"] == "fail"]
    assert any("Unknown command line flag 'xla_tpu_enable_async_collective_fusion_fuse_all_gathr'" in str(c)
               for c in causes), causes
    assert "xla_tpu_enable_async_collective_fusion_fuse_all_gathr" in verdict_line(out), verdict_line(out)
    assert_no_training_container(simcluster, tpu_nodes)


def libtpu_start(cluster, node: str, image: str, env: dict) -> subprocess.CompletedProcess:
    """One JAX start in the image the TPU way, waiting for libtpu's verdict on its arguments (xla_probe.py)."""
    settings = [arg for name, value in {**TPU_HOST, **env}.items() for arg in ("-e", "%s=%s" % (name, value))]
    return cluster.docker(node, "run", "--rm", "--network", "none", *settings, image, "python3", "-c", CHILD_TPU,
                          check=False, timeout=300)


def test_the_images_libtpu_accepts_every_seed_002_flag_where_the_plan_puts_it(simcluster, tpu_nodes):
    image = subprocess.run([SIMCLUSTER, "real-image"], capture_output=True, text=True, timeout=1800, check=False)
    assert image.returncode == 0, image.stderr[-3000:]
    probed = json.loads((REPO / "tests" / "fixtures" / "xla" / "libtpu-0.0.50.1.json").read_text())["flags"]
    flags = {name: probed[name][LIBTPU_INIT_ARGS]["value"] for name in SEED_002}
    variables = render_flag_variables([(flags, "m.xla_flags")], "tpu")[0]
    assert set(variables) == {LIBTPU_INIT_ARGS, XLA_FLAGS}
    accepted = libtpu_start(simcluster, tpu_nodes[0], image.stdout.strip(), variables)
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert "Unknown command line flag" not in accepted.stderr and "Unknown flag" not in accepted.stderr
    # the seed's own spelling of a tristate, refused by the same libtpu: a real referee
    refused = libtpu_start(simcluster, tpu_nodes[0], image.stdout.strip(),
                           {LIBTPU_INIT_ARGS: "--xla_enable_async_all_gather=kAuto"})
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "Illegal value 'kAuto' specified for flag 'xla_enable_async_all_gather'" in refused.stderr
