"""playbooks/compare.yml on the simulated cluster: Megatron-LM (pretrain_gpt.py under torchrun) on two NVIDIA-like
nodes (GPUs through Docker's device request), Primus (run_pretrain.sh) on two AMD-like ones (/dev/kfd, /dev/dri),
both through train.yml, then the comparison report; and a deliberate mismatch refused before any node is
touched."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_report_callback import count_colour, needs_chromium, screenshot

from ansible_collections.clusterval.training.plugins.module_utils._plan import node_view
from ansible_collections.clusterval.training.plugins.module_utils._report_html import PALETTE
from controller import ansible_playbook

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SIMCLUSTER = REPO / "scripts" / "simcluster"
ANSIBLE_PLAYBOOK = ansible_playbook()


def run_compare(cluster, nodes, runs_dir, extra=None):
    variables = {"compare_nvidia_hosts": ":".join(nodes[:2]), "compare_amd_hosts": ":".join(nodes[2:4]),
                 "compare_iterations": 6, "compare_gpus_per_node": 4, "compare_runs_dir": str(runs_dir),
                 "fabric_enabled": False,
                 # 4 simulated GPUs per node: 2 nodes x 4 = the table's data-parallel size 8
                 "compare_training_overrides": {"config": {"container_config": {"env_dict": {
                     "CLUSTERVAL_SIM_GPUS": "4", "CLUSTERVAL_SIM_STEP_SECONDS": "0.2"}}}}}
    variables.update(extra or {})
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(cluster.inventory), str(REPO / "playbooks" / "compare.yml"),
                           "-e", json.dumps(variables)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_mbs_4_on_one_side_is_refused_before_any_node_is_touched(simcluster, four_nodes, tmp_path):
    done = run_compare(simcluster, four_nodes, tmp_path, {"compare_overrides": {"amd": {"micro_batch_size": 4}}})
    assert done.returncode != 0
    assert "comparison refused before the run" in done.stdout
    assert "micro_batch_size (Micro Batch Size (MBS)): NVIDIA 2, AMD 4, in the rendered launch" in done.stdout
    assert "PLAY [Train and judge]" not in done.stdout
    for node in four_nodes:
        listed = simcluster.docker(node, "ps", "-aq", "--filter", "label=clusterval.managed_by")
        assert listed.stdout.strip() == ""


@pytest.fixture(scope="module")
def compared(simcluster, four_nodes, tmp_path_factory):
    """A mixed run: the NVIDIA side on two simulated NVIDIA nodes, the AMD side on two AMD ones."""
    runs = tmp_path_factory.mktemp("compare")
    nvidia = four_nodes[:2]
    subprocess.run([str(SIMCLUSTER), "vendor", "nvidia", *nvidia], check=True, capture_output=True, timeout=60)
    files = [simcluster.state_dir / "nodes" / node / "sim" / "gpus.json" for node in four_nodes]
    before = [path.read_text() for path in files]
    for path in files:  # 4 GPUs per node, as the run plans: the nodes' GPU tools list 4 to preflight
        path.write_text(json.dumps({**json.loads(path.read_text()), "count": 4}))
    try:
        done = run_compare(simcluster, four_nodes, runs)
    finally:
        for path, text in zip(files, before):
            path.write_text(text)
        subprocess.run([str(SIMCLUSTER), "vendor", "amd", *nvidia], check=True, capture_output=True, timeout=60)
    directories = [path for path in runs.iterdir() if path.is_dir()]
    return done, (directories[0] if directories else None)


def test_comparison_end_to_end(compared):
    done, directory = compared
    assert done.returncode == 0, done.stdout[-4000:]
    document = json.loads((directory / "comparison.json").read_text())
    assert document["verdict"] == "PASS" and document["problems"] == [] and document["simulated"]
    assert document["sides"]["nvidia"]["stack"] == "megatron" and document["sides"]["amd"]["stack"] == "primus"
    assert document["sides"]["nvidia"]["world_size"] == document["sides"]["amd"]["world_size"] == 8
    statuses = {row["parameter"]: row["status"] for row in document["rows"]}
    assert len(statuses) == 44 and statuses["Micro Batch Size (MBS)"] == "match"
    assert statuses["use_turbo_attention"] == "best_vs_best" and statuses["Dataset"] == "mock_data"
    figures = {f["metric"]: f for f in document["figures"]}
    assert figures["tokens_per_gpu"]["nvidia"] > 0 and figures["tokens_per_gpu"]["amd"] > 0
    assert figures["mem_used_gb"]["amd"] > 0 and figures["mem_used_gb"]["nvidia"] is None
    assert document["loss"]["agreement"]["agrees"] and document["loss"]["agreement"]["compared_steps"] == 6
    for side in ("nvidia", "amd"):
        results = json.loads((directory / document["sides"][side]["run_id"] / "results.json").read_text())
        assert results["verdict"] == "PASS"
        plan = json.loads((directory / document["sides"][side]["run_id"] / "plan.json").read_text())
        assert plan["gpu_vendor"] == side
        container = node_view(plan, next(iter(plan["nodes"])))["container"]
        if side == "nvidia":
            assert container["device_requests"][0]["driver"] == "nvidia" and not container.get("groups")
        else:
            assert any(device.endswith("/dev/kfd") for device in container["devices"])


@needs_chromium
def test_comparison_html_in_headless_chromium(compared, tmp_path):
    done, directory = compared
    assert done.returncode == 0, done.stdout[-2000:]
    pixels = screenshot(directory / "comparison.html", tmp_path / "comparison.png", tmp_path / "profile", 1200, 3600)
    assert count_colour(pixels, "#d9ead3") > 500          # the PASS verdicts
    assert count_colour(pixels, PALETTE[0]) > 300         # the NVIDIA loss curve (drawn wider, under)
    assert count_colour(pixels, PALETTE[1]) > 300         # the AMD loss curve over it
    assert count_colour(pixels, "#eef4fb") > 2000         # the best-vs-best rows
