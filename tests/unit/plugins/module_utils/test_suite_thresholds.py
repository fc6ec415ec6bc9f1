"""Every sweep of the validation suite's current versioned configs, judged by its own threshold file
(tests/fixtures/cvs, copied from ROCm/cvs at dddd914, MIT; see SOURCE.md there): as in the suite, the cell the
sweep names judges the run (MaxText: the sweep's name; Megatron-LM: ``MBS=,GBS=,PRECISION=`` of its
combination), and the settings where the name and the run differ are named.

The expected differences below were worked out by hand from each config: MaxText's global batch is
per_device_batch_size x 8 GPUs x nodes, which many of the suite's names do not state."""
import json
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _verdict
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run
from ansible_collections.clusterval.training.plugins.module_utils._threshold_file import labels_of

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
SUITE = os.path.join(REPO, "tests", "fixtures", "cvs")
SITE = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_ib_hca": "bnxt_re0,bnxt_re1",
                   "nccl_socket_ifname": "eth0", "gloo_socket_ifname": "eth0", "nic_type": "thor2"}}

# (config, sweep): the differences "SETTING: cell, run" on the node count the cell names.
SWEEPS = {
    ("jaxmaxtext/mi300x_jaxmaxtext_deepseek-v2-lite_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=4,GBS=640,SEQLEN=4096"): ["GBS: the cell says 640, this run has 64"],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=2,GBS=128,SEQLEN=8192"): ["GBS: the cell says 128, this run has 32"],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=FP8,BATCH=2,GBS=128,SEQLEN=8192"): ["GBS: the cell says 128, this run has 32"],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=10,PRECISION=BF16,BATCH=2,GBS=32,SEQLEN=8192"): [],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=10,PRECISION=FP8,BATCH=2,GBS=32,SEQLEN=8192"): [],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.3-70b_single.json",
     "NNODES=1,STEPS=30,PRECISION=BF16,BATCH=5,GBS=40,SEQLEN=8192"): [],
    ("jaxmaxtext/mi300x_jaxmaxtext_llama-3.3-70b_single.json",
     "NNODES=1,STEPS=30,PRECISION=FP8,BATCH=5,GBS=40,SEQLEN=8192"): [],
    ("jaxmaxtext/mi325x_jaxmaxtext_deepseek-v2-lite_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=10,GBS=80,SEQLEN=4096"): ["GBS: the cell says 80, this run has 160"],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.1-405b_distributed.json",
     "NNODES=4,STEPS=30,PRECISION=BF16,BATCH=2,GBS=64,SEQLEN=8192"): ["STEPS: the cell says 30, this run has 10"],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.1-405b_distributed.json",
     "NNODES=4,STEPS=30,PRECISION=FP8,BATCH=3,GBS=96,SEQLEN=8192"): ["STEPS: the cell says 30, this run has 10"],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=4,GBS=128,SEQLEN=8192"): ["GBS: the cell says 128, this run has 64"],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=FP8,BATCH=4,GBS=128,SEQLEN=8192"): ["GBS: the cell says 128, this run has 64"],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=3,GBS=48,SEQLEN=8192"): [],
    ("jaxmaxtext/mi325x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=FP8,BATCH=3,GBS=48,SEQLEN=8192"): [],
    ("jaxmaxtext/mi355x_jaxmaxtext_deepseek-v2-lite_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=12,GBS=768,SEQLEN=4096"): ["GBS: the cell says 768, this run has 192"],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.1-405b_distributed.json",
     "NNODES=4,STEPS=30,PRECISION=BF16,BATCH=2,GBS=64,SEQLEN=8192"): [],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.1-405b_distributed.json",
     "NNODES=4,STEPS=30,PRECISION=FP8,BATCH=3,GBS=96,SEQLEN=8192"): [],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=4,GBS=256,SEQLEN=8192"): ["GBS: the cell says 256, this run has 64"],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.1-8b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=FP8,BATCH=6,GBS=384,SEQLEN=8192"): ["GBS: the cell says 384, this run has 96"],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=6,GBS=48,SEQLEN=8192"): ["GBS: the cell says 48, this run has 96"],
    ("jaxmaxtext/mi355x_jaxmaxtext_llama-3.3-70b_distributed.json",
     "NNODES=2,STEPS=30,PRECISION=FP8,BATCH=4,GBS=32,SEQLEN=8192"): ["GBS: the cell says 32, this run has 64"],
    ("megatron/mi325x_megatron_llama-3.1-8b_single.json", "llama3_1_8b-mi325-bs128-mbs4-fp8"): [],
    ("megatron/mi325x_megatron_llama-3.1-8b_single.json", "llama3_1_8b-mi325-bs128-mbs4-bf16"): [],
    ("megatron/mi325x_megatron_llama-3.3-70b_distributed.json", "llama3_3_70b-mi325-bs64-mbs1-fp8"): [],
    ("megatron/mi325x_megatron_llama-3.3-70b_distributed.json", "llama3_3_70b-mi325-bs64-mbs1-bf16"): [],
    ("megatron/mi325x_megatron_llama-3.3-70b_single.json", "llama3_3_70b-mi325-bs96-mbs3-fp8"): [],
    ("megatron/mi325x_megatron_llama-3.3-70b_single.json", "llama3_3_70b-mi325-bs96-mbs3-bf16"): [],
}
# The sweeps refused until the stacks grew: deepseek through its own script, the MXFP recipes through the llama
# script's TE_FP4/TE_FP8 variables; TorchTitan's, each on the nodes its parallel sizes need.
SWEEPS.update({
    ("megatron/mi325x_megatron_deepseek-v2-lite_single.json", "deepseek_v2_lite-mi325x-bs128-mbs4-bf16"): [],
    ("megatron/mi325x_megatron_deepseek-v2-lite_single.json", "deepseek_v2_lite-mi325x-bs128-mbs4-fp8"): [],
    ("megatron/mi325x_megatron_llama-3.1-8b_single.json", "llama3_1_8b-mi325-bs128-mbs4-mxfp4"): [],
    ("megatron/mi325x_megatron_llama-3.1-8b_single.json", "llama3_1_8b-mi325-bs128-mbs4-mxfp8"): [],
    ("torchtitan/mi355_deepseek_v3_16b_single_config.json", "deepseek_v3_16b-mi355-bs16-mbs1-bf16"): [],
    ("torchtitan/mi355_llama3_1_405b_distributed_config.json", "llama3_1_405b-mi355-8n-bs256-mbs1-fp8"): [],
    ("torchtitan/mi355_llama3_1_70b_distributed_config.json", "llama3_1_70b-mi355-4n-bs128-mbs1-fp8"): [],
    ("torchtitan/mi355_llama3_1_70b_distributed_config.json", "llama3_1_70b-mi355-4n-bs128-mbs1-bf16"): [],
    ("torchtitan/mi355_llama3_1_8b_single_config.json", "llama3_1_8b-mi355-bs8-mbs1-bf16"): [],
    ("torchtitan/mi355_llama3_1_8b_single_config.json", "llama3_1_8b-mi355-bs8-mbs1-fp8"): [],
    ("torchtitan/mi355_llama3_3_70b_distributed_config.json", "llama3_3_70b-mi355-4n-bs128-mbs1-fp8"): [],
    ("torchtitan/mi355_llama3_3_70b_distributed_config.json", "llama3_3_70b-mi355-4n-bs128-mbs1-bf16"): [],
    ("torchtitan/mi355_llama3_3_70b_single_config.json", "llama3_3_70b-mi355-bs32-mbs1-bf16"): [],
    ("torchtitan/mi355_llama3_3_70b_single_config.json", "llama3_3_70b-mi355-bs32-mbs1-fp8"): [],
    ("torchtitan/mi355_mixtral_8x22b_single_config.json", "mixtral_8x22b-mi355-bs32-mbs1-bf16"): [],
    ("torchtitan/mi355_qwen3_32b_single_config.json", "qwen3_32b-mi355-bs16-mbs1-bf16"): [],
})


def suite_sweeps():
    """Every (config, sweep) of the suite's versioned configs in the fixtures."""
    found = set()
    for directory in ("jaxmaxtext", "megatron", "torchtitan"):
        for name in sorted(os.listdir(os.path.join(SUITE, directory))):
            if not name.endswith(".json") or name.endswith("_threshold.json"):
                continue
            config = load_config_file(os.path.join(SUITE, directory, name))
            if "schema_version" not in config:
                continue
            if config["framework"] == "jaxmaxtext":
                sweeps = [sweep["name"] for sweep in config["training"]["sweeps"]]
            else:
                sweeps = [key for key in config["sweep"]["combinations"] if not key.startswith("_")]
            found.update(("%s/%s" % (directory, name), sweep) for sweep in sweeps)
    return found


def named_cell(config, sweep):
    if config["framework"] == "jaxmaxtext":
        return sweep
    combo = config["sweep"]["combinations"][sweep]
    return "MBS=%s,GBS=%s,PRECISION=%s" % (combo["micro_batch_size"], combo["global_batch_size"], combo["precision"])


def plan_sweep(relative, sweep, nodes=None):
    path = os.path.join(SUITE, relative)
    config = load_config_file(path)
    cell = named_cell(config, sweep)
    written = config["config"].get("nnodes", "") if "config" in config else ""
    default = int(written) if relative.startswith("torchtitan/") and written.isdigit() else \
        1 if "_single" in relative else 2
    count = nodes or int(labels_of(cell).get("NNODES", default))
    hosts = [Host("n%d" % i, "10.0.0.%d" % i) for i in range(1, count + 1)]
    overrides = dict(SITE, container={"image": "rocm/megatron-lm:v25.5_py310"}) \
        if config["container"].get("image") == "<changeme>" else SITE
    options = PlanOptions(config_path=path, overrides=overrides, run_id="r1", sweep=sweep)
    return config, cell, plan_run(config, hosts, options)


def test_the_table_covers_every_sweep_of_the_suites_current_configs():
    assert suite_sweeps() == set(SWEEPS)
    assert len([key for key in SWEEPS if key[0].startswith("jaxmaxtext/")]) == 21


@pytest.mark.parametrize("relative, sweep", sorted(SWEEPS))
def test_each_sweep_is_judged_by_its_named_cell_and_the_differences_are_named(relative, sweep):
    config, cell, result = plan_sweep(relative, sweep)
    threshold = os.path.join(os.path.dirname(os.path.join(SUITE, relative)), config["threshold_json"])
    cells = json.load(open(threshold, encoding="utf-8"))
    assert result["sweep"] == sweep and result["threshold_file"]["cell"] == cell
    assert result["threshold_file"]["differences_text"] == SWEEPS[(relative, sweep)]
    judged = {t["metric"]: t for t in result["thresholds"] if t["set"]}
    for metric, spec in cells[cell].items():
        if spec["kind"] in ("min", "max") and metric != "training.scaling_efficiency_pct":
            name = metric.split(".", 1)[1]
            assert judged[name]["value"] == spec["value"] and judged[name]["kind"] == spec["kind"], name
    for text in SWEEPS[(relative, sweep)]:
        assert any(text in warning for warning in result["warnings"]), text


def test_the_issues_example_on_two_nodes_and_require_thresholds():
    relative = "jaxmaxtext/mi300x_jaxmaxtext_llama-3.1-8b_distributed.json"
    sweep = "NNODES=2,STEPS=30,PRECISION=BF16,BATCH=2,GBS=128,SEQLEN=8192"
    dummy, dummy, result = plan_sweep(relative, sweep)
    steps = [{"step": s, "loss": 9.0 - s * 0.1, "tokens_per_sec_per_gpu": 9000.0, "tflops_per_sec_per_gpu": 900.0,
              "seconds": 1.0} for s in range(30)]
    nodes = {host: {"steps": steps, "last_step": 29, "exit_code": 0, "errors": []} for host in ("n1", "n2")}
    assert _verdict.verdict(result, nodes)["verdict"] == "PASS"
    strict = _verdict.verdict(result, nodes, require_thresholds=True)
    assert strict["verdict"] == "FAIL" and any("GBS: the cell %s says 128, this run has 32" % sweep in line
                                               for line in strict["failures"])
