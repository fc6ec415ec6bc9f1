"""The validation suite's versioned format (schema_version 1) and its threshold files, with the suite's own
files (tests/fixtures/cvs, copied from ROCm/cvs, MIT; see SOURCE.md there): planned by the same engine as the
seed format, the threshold cell chosen by what the run actually is, errors naming the paths as written."""
import copy
import json
import os
import shutil

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _verdict
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import Host, PlanOptions, plan_run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
SUITE = os.path.join(REPO, "tests", "fixtures", "cvs")
JAX = os.path.join(SUITE, "jaxmaxtext", "mi300x_jaxmaxtext_llama-3.3-70b_distributed.json")
MEGATRON = os.path.join(SUITE, "megatron", "mi325x_megatron_llama-3.3-70b_distributed.json")
BF16 = "NNODES=2,STEPS=10,PRECISION=BF16,BATCH=2,GBS=32,SEQLEN=8192"
FP8 = "NNODES=2,STEPS=10,PRECISION=FP8,BATCH=2,GBS=32,SEQLEN=8192"
SITE = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_ib_hca": "bnxt_re0,bnxt_re1",
                   "nccl_socket_ifname": "eth0", "gloo_socket_ifname": "eth0", "nic_type": "thor2",
                   "container_image": "rocm/megatron-lm:v25.5_py310"}}


def hosts(count=2):
    return [Host("n%d" % i, "10.0.0.%d" % i) for i in range(1, count + 1)]


def plan(path=JAX, nodes=2, change=None, **options):
    config = load_config_file(path)
    if change:
        change(config)
    return plan_run(config, hosts(nodes), PlanOptions(config_path=path, overrides=SITE, run_id="r1", **options))


def maxtext_yaml(result):
    files = result["nodes"]["n1"]["files"]
    return next(f["content"] for f in files if f["path"].endswith("maxtext.yml"))


def by_metric(result):
    return {t["metric"]: t for t in result["thresholds"]}


# -- MaxText -------------------------------------------------------------------------------------

def test_maxtext_config_and_the_sweep_reach_maxtexts_yaml_typed():
    result = plan()
    yaml = maxtext_yaml(result).splitlines()
    assert result["framework"] == "maxtext" and result["mode"] == "multi_node" and result["sweep"] == BF16
    for line in ("model_name: llama3.3-70b", "steps: 10", "enable_checkpointing: false", "per_device_batch_size: 2",
                 "quantization: ''", "ici_fsdp_parallelism: 8", "dcn_data_parallelism: -1", "scan_layers: true",
                 "tokenizer_path: /home/root/cache/maxtext/Meta-Llama-70-B"):
        assert line in yaml, line
    assert result["trains_model"] == "llama3.3-70b"


def test_another_sweep_is_chosen_by_name_and_brings_its_overrides_and_its_cell():
    result = plan(sweep=FP8)
    assert "quantization: nanoo_fp8" in maxtext_yaml(result).splitlines()
    assert result["threshold_file"]["cell"] == FP8
    file = json.load(open(JAX.replace(".json", "_threshold.json"), encoding="utf-8"))
    assert by_metric(result)["tokens_per_sec_per_gpu"]["value"] == file[FP8]["training.tokens_per_sec_per_gpu"]["value"]


def test_with_several_sweeps_enabled_the_first_runs_and_a_warning_names_the_others():
    warnings = plan()["warnings"]
    assert any(w.startswith("training.sweeps: 2 sweeps enabled, this run is %s" % BF16) and FP8 in w for w in warnings)


def test_an_unknown_sweep_is_refused_with_the_ones_there_are():
    with pytest.raises(ConfigError, match=r"^training\.sweeps: expected a sweep of the config \(NNODES=2.*'FP16'"):
        plan(sweep="FP16")


def test_environment_xla_flags_jax_timeouts_and_paths_reach_the_container():
    raw = load_config_file(JAX)["training"]
    node = plan()["nodes"]["n2"]
    env = node["container"]["env"]
    for name, value in raw["env_vars"].items():
        if name != "NNODES":
            assert env[name] == value, name
    assert env["NNODES"] == "2", "the suite's NNODES: auto is the host count"
    assert env["JAX_COORDINATOR_PORT"] == "12346" and env["JAX_COORDINATOR_IP"] == "10.0.0.1"
    assert env["JAX_DISTRIBUTED_INITIALIZATION_TIMEOUT_SECONDS"] == "1800"
    assert env["JAX_DISTRIBUTED_HEARTBEAT_TIMEOUT_SECONDS"] == "900"
    assert "--xla_gpu_enable_command_buffer=" in env["XLA_FLAGS"].split()
    assert env["HF_HOME"] == "/home/root/cache/maxtext", "{shared_fs} inside paths, {user-id} the remote user"
    assert node["container"]["shm_size"] == "256G"
    assert "/tmp/root/jax/TRAINING_LOGS:/workspace/maxtext/output" in node["container"]["volumes"]


def test_the_train_script_is_the_first_of_train_script_paths_the_image_has():
    script = plan()["nodes"]["n1"]["files"][0]["content"]
    assert "for candidate in /workspace/maxtext/src/maxtext/trainers/pre_train/train.py " \
           "/workspace/maxtext/src/MaxText/train.py; do" in script


def test_keys_the_engine_does_not_use_are_named():
    warnings = plan()["warnings"]
    for path in ("training.checkpoint_resume", "training.error_patterns", "container.runtime.args.privileged", "container.runtime.args.ulimit",
                 "training.tokenizer.hf_model_id"):
        assert any(w.startswith(path + ": ignored (") for w in warnings), path


def test_the_loss_curve_check_runs_as_a_threshold_on_the_loss_slope():
    for path, source in ((JAX, "training.loss_curve"), (MEGATRON, "loss_curve")):
        slope = by_metric(plan(path))["loss_slope"]
        assert (slope["kind"], slope["value"], slope["source"], slope["enforce"]) == ("max", 0.0, source, True)
    assert not any(w.startswith("training.loss_curve") for w in plan()["warnings"])

    def not_enforced(config):
        config["training"]["loss_curve"].update(enforce=False, max_slope=-0.01)
    slope = by_metric(plan(change=not_enforced))["loss_slope"]
    assert (slope["value"], slope["enforce"]) == (-0.01, False)


def test_a_rising_loss_fails_the_loss_curve_check_naming_the_slope():
    result = plan()
    rising = [{"step": s, "loss": 9.0 + s * 0.1, "tokens_per_sec_per_gpu": 5000.0, "tflops_per_sec_per_gpu": 1000.0,
               "seconds": 1.0} for s in range(11)]
    nodes = {host: {"steps": rising, "last_step": 10, "exit_code": 0, "errors": []} for host in ("n1", "n2")}
    outcome = _verdict.verdict(result, nodes)
    slope = [c for c in outcome["checks"] if c["metric"] == "loss_slope" and c["check"] == "threshold"]
    assert [c["status"] for c in slope] == ["fail", "fail"]
    assert slope[0]["actual"] == pytest.approx(0.1) and "loss_slope 0.100 > 0.000" in slope[0]["detail"]


def test_a_loss_curve_without_a_numeric_slope_is_refused_by_its_path():
    def bad(config):
        config["training"]["loss_curve"]["max_slope"] = "flat"
    with pytest.raises(ConfigError, match=r"^training\.loss_curve\.max_slope: expected a number"):
        plan(change=bad)


def test_an_enabled_checkpoint_resume_test_is_refused_by_name():
    def enable(config):
        config["training"]["checkpoint_resume"]["enabled"] = True
    with pytest.raises(ConfigError, match=r"^training\.checkpoint_resume\.enabled: expected false: the checkpoint "
                                          r"save-and-resume test \(and its smoke_model_overrides\) is not run"):
        plan(change=enable)
    assert "training.checkpoint_resume: ignored (enabled is false: the suite skips its checkpoint save-and-resume " \
           "test too)" in plan()["warnings"]


# -- threshold cells by the run's actual values -------------------------------------------------

def test_the_cell_whose_settings_are_the_runs_judges_it_with_its_kinds():
    result = plan()
    thresholds = by_metric(result)
    assert result["threshold_file"]["cell"] == BF16
    assert result["run_settings"] == {"STEPS": 10, "BATCH": 2, "SEQLEN": 8192, "PRECISION": "BF16", "NNODES": 2, "GBS": 32}
    assert thresholds["tokens_per_sec_per_gpu"]["kind"] == "min" and thresholds["tokens_per_sec_per_gpu"]["set"]
    assert thresholds["final_loss"]["kind"] == "max" and thresholds["loss_decreased"]["kind"] == "min"
    assert thresholds["step_time_p95_ms"]["kind"] == "info" and not thresholds["step_time_p95_ms"]["set"]


def test_a_run_on_other_nodes_than_its_cell_says_is_judged_by_its_named_cell_and_the_differences_named():
    result = plan(nodes=4, change=lambda c: c["training"]["maxtext_config"].update(dcn_data_parallelism=-1))
    assert result["threshold_file"]["cell"] == BF16, "the sweep's cell judges the run, as in the suite"
    assert result["threshold_file"]["differences"] == [{"setting": "NNODES", "cell": "2", "run": 4},
                                                       {"setting": "GBS", "cell": "32", "run": 64}]
    assert result["threshold_file"]["differences_text"] == ["NNODES: the cell says 2, this run has 4",
                                                            "GBS: the cell says 32, this run has 64"]
    note = next(w for w in result["warnings"] if "the cell is for another run" in w)
    assert "GBS: the cell says 32, this run has 64" in note
    assert by_metric(result)["tokens_per_sec_per_gpu"]["set"]
    assert not _verdict.cell_difference_checks(plan()), "a run the cell is for has no difference"
    checks = _verdict.cell_difference_checks(result)
    assert [(c["metric"], c["status"]) for c in checks] == [("NNODES", "fail"), ("GBS", "fail")]
    assert "training_require_thresholds is true" in checks[1]["detail"]


def test_require_thresholds_fails_a_run_judged_by_a_cell_for_another_run():
    result = plan(iterations=12)
    steps = [{"step": s, "loss": 9.0 - s * 0.1, "tokens_per_sec_per_gpu": 5000.0, "tflops_per_sec_per_gpu": 400.0,
              "seconds": 1.0} for s in range(12)]
    nodes = {host: {"steps": steps, "last_step": 11, "exit_code": 0, "errors": []} for host in ("n1", "n2")}
    assert _verdict.verdict(result, nodes)["verdict"] == "PASS"
    strict = _verdict.verdict(result, nodes, require_thresholds=True)
    assert strict["verdict"] == "FAIL"
    assert strict["failures"] == ["cluster: STEPS: the cell %s says 10, this run has 12, and "
                                  "training_require_thresholds is true" % BF16]
    assert strict["threshold_file"]["differences_text"] == ["STEPS: the cell says 10, this run has 12"]


def test_a_sweep_whose_cell_the_file_lacks_is_not_judged():
    def rename(config):
        config["training"]["sweeps"][0]["name"] = "NNODES=2,STEPS=10,PRECISION=BF16,BATCH=2,GBS=32,SEQLEN=4096"
        config["training"]["enabled_sweep_list"] = [config["training"]["sweeps"][0]["name"]]
    result = plan(change=rename)
    assert result["threshold_file"]["cell"] is None
    assert all(not t["set"] for t in result["thresholds"] if t["source"] != "training.loss_curve")
    assert any("no cell named NNODES=2,STEPS=10,PRECISION=BF16,BATCH=2,GBS=32,SEQLEN=4096" in w
               for w in result["warnings"])
    unjudged = _verdict.judged_and_unjudged(result)["unjudged"]
    assert _verdict.required_threshold_checks(unjudged), "training_require_thresholds turns it into a FAIL"


def test_without_a_threshold_file_the_metrics_are_reported_not_judged(tmp_path):
    config = tmp_path / "run.json"
    document = load_config_file(JAX)
    del document["threshold_json"]
    config.write_text(json.dumps(document))
    result = plan(str(config))
    assert [t["metric"] for t in result["thresholds"]] == ["loss_slope"], "the loss curve needs no threshold file"
    assert any(w.startswith("threshold_json: no threshold file") for w in result["warnings"])


def test_a_threshold_file_that_is_not_there_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"^threshold_json: expected a readable threshold file, found .*missing\.json "
                                          r"\(No such file or directory\)"):
        plan(change=set_in(("threshold_json",), "missing.json"))


def test_a_threshold_file_with_an_unknown_kind_is_refused_with_its_path(tmp_path):
    shutil.copy(JAX, tmp_path / "run.json")
    cells = {BF16: {"training.tokens_per_sec_per_gpu": {"kind": "minimum", "value": 1}}}
    (tmp_path / "mi300x_jaxmaxtext_llama-3.3-70b_distributed_threshold.json").write_text(json.dumps(cells))
    with pytest.raises(ConfigError, match=r'^mi300x_jaxmaxtext_llama-3\.3-70b_distributed_threshold\.json\["NNODES=2,.*,SEQLEN=8192"\]'
                       r'\.training\.tokens_per_sec_per_gpu\.kind: expected one of min, max'):
        plan(str(tmp_path / "run.json"))


# -- Megatron-LM ---------------------------------------------------------------------------------

def test_megatron_combination_sets_batch_and_precision_and_picks_its_cell():
    result = plan(MEGATRON)
    env = result["nodes"]["n1"]["container"]["env"]
    assert (result["framework"], result["model"], result["sweep"]) == \
        ("megatron", "llama3.3_70B", "llama3_3_70b-mi325-bs64-mbs1-fp8")
    assert (env["MBS"], env["BS"], env["TE_FP8"], env["TP"], env["TOTAL_ITERS"]) == ("1", "64", "1", "8", "10")
    assert result["threshold_file"]["cell"] == "MBS=1,GBS=64,PRECISION=FP8"
    assert env["MASTER_ADDR"] == "10.0.0.1" and env["NNODES"] == "2"
    bf16 = plan(MEGATRON, sweep="llama3_3_70b-mi325-bs64-mbs1-bf16")
    assert bf16["nodes"]["n1"]["container"]["env"]["TE_FP8"] == "0"
    assert bf16["threshold_file"]["cell"] == "MBS=1,GBS=64,PRECISION=BF16"


def test_scaling_efficiency_without_a_scaling_baseline_is_named_not_judged():
    scaling = by_metric(plan(MEGATRON))["scaling_efficiency_pct"]
    assert not scaling["set"] and "no scaling baseline" in scaling["unset_reason"]
    baseline = {"tokens_per_sec_total": 80000.0, "num_nodes": 1}
    result = plan(MEGATRON, change=lambda c: c.update(scaling_baseline=baseline))
    assert by_metric(result)["scaling_efficiency_pct"]["set"]
    assert result["scaling_baseline"]["tokens_per_sec_total"] == 80000.0


def test_a_result_dict_in_a_combination_is_named_as_ignored():
    assert "sweep.combinations.llama3_3_70b-mi325-bs64-mbs1-fp8.result_dict: ignored (the threshold file judges " \
           "the run)" in plan(MEGATRON)["warnings"]


# -- errors name the paths as written -----------------------------------------------------------

def set_in(path, value):
    def change(config):
        target = config
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


@pytest.mark.parametrize("path, value, message", [
    (("training", "maxtext_config", "ici_fsdp_parallelism"), 3, r"^training\.maxtext_config: expected a product"),
    (("training", "sweeps", 0, "maxtext_overrides", "ici_fsdp_parallelism"), "x",
     r"^training\.sweeps\[0\]\.maxtext_overrides\.ici_fsdp_parallelism: expected a positive integer"),
    (("training", "steps"), "maybe", r"^training\.steps: expected an integer, found 'maybe'"),
    (("paths", "log_dir"), "{shared_fs}/{nope}", r"^paths\.log_dir: expected a reference to one of paths\..*'\{nope\}'"),
    (("schema_version",), 2, r"^schema_version: expected 1"),
    (("container", "runtime", "args", "volumes"), ["/a:/b:ro"],
     r"^container\.runtime\.args\.volumes\[0\]: expected host:container \(volume options are not supported\)"),
    (("training", "env_vars", "HF_TOKEN"), "hf_x", r"^training\.env_vars\.HF_TOKEN: expected no secret"),
    (("container", "name"), "bad name", r"^container\.name: expected a Docker container name"),
    (("training", "enabled_sweep_list"), ["NNODES=9"], r"^training\.enabled_sweep_list: expected names of sweeps"),
])
def test_errors_name_the_path_as_written(path, value, message):
    with pytest.raises(ConfigError, match=message):
        plan(change=set_in(path, value))


def test_megatron_errors_name_the_combination():
    change = set_in(("sweep", "combinations", "llama3_3_70b-mi325-bs64-mbs1-fp8", "micro_batch_size"), "0")
    with pytest.raises(ConfigError, match=r"^sweep\.combinations\.llama3_3_70b-mi325-bs64-mbs1-fp8\.micro_batch_size"):
        plan(MEGATRON, change=change)


def test_the_seed_format_is_unchanged_by_the_versioned_one():
    seed = os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json")
    site = copy.deepcopy(SITE)
    site["config"]["nccl_ib_gid_index"] = "3"
    result = plan_run(load_config_file(seed), hosts(), PlanOptions(config_path=seed, overrides=site, run_id="r1"))
    assert "sweep" not in result and result["gpus_per_node"] == 8


@pytest.mark.parametrize("image, first", [
    ("rocm/jax-training:maxtext-v26.4", "/workspace/maxtext/src/maxtext/trainers/pre_train/train.py"),
    ("rocm/jax-training:maxtext-v26.3", "/workspace/maxtext/src/MaxText/train.py"),
    ("registry.local/jax:latest", "/workspace/maxtext/src/maxtext/trainers/pre_train/train.py"),
])
def test_the_train_script_of_the_images_maxtext_version_comes_first(image, first):
    script = plan(change=set_in(("container", "image"), image))["nodes"]["n1"]["files"][0]["content"]
    line = next(line for line in script.splitlines() if line.startswith("for candidate in "))
    candidates = line[len("for candidate in "):-len("; do")].split()
    assert candidates[0] == first
    assert set(candidates) == {"/workspace/maxtext/src/maxtext/trainers/pre_train/train.py",
                               "/workspace/maxtext/src/MaxText/train.py"}


def test_with_enforce_thresholds_false_a_missed_threshold_is_reported_not_failed():
    result = plan(change=set_in(("enforce_thresholds",), False))
    # the loss curve has its own enforce (loss_curve.enforce)
    assert {t["enforce"] for t in result["thresholds"] if t["metric"] != "loss_slope"} == {False}
    steps = [{"step": s, "loss": 9.0 - s * 0.1, "tokens_per_sec_per_gpu": 500.0, "tflops_per_sec_per_gpu": 100.0,
              "seconds": 1.0} for s in range(11)]
    nodes = {host: {"steps": steps, "last_step": 9, "exit_code": 0, "errors": []} for host in ("n1", "n2")}
    outcome = _verdict.verdict(result, nodes)
    missed = [c for c in outcome["checks"] if c["metric"] == "tokens_per_sec_per_gpu" and c["check"] == "threshold"]
    assert outcome["verdict"] == "PASS", outcome["failures"]
    assert [c["status"] for c in missed] == ["info", "info"] and missed[0]["detail"].endswith("(not enforced)")
    assert "tokens_per_sec_per_gpu 500.0 < 962.0" in missed[0]["detail"]
    assert plan()["thresholds"][1]["enforce"] is True


def test_overrides_at_the_paths_the_config_and_its_errors_use_are_applied():
    config = load_config_file(JAX)
    with pytest.raises(ConfigError, match=r"training\.nccl\.ib_hca_list"):
        plan_run(config, hosts(), PlanOptions(config_path=JAX, run_id="r1"))
    written = {"training": {"nccl": {"ib_hca_list": "mlx5_0,mlx5_1", "ib_hca": "mlx5_0,mlx5_1", "socket_ifname": "ib0",
                                     "gloo_socket_ifname": "ib0"}, "env_vars": {"NCCL_DEBUG": "INFO"}}}
    result = plan_run(config, hosts(), PlanOptions(config_path=JAX, run_id="r1", overrides=written))
    env = result["nodes"]["n1"]["container"]["env"]
    assert (env["NCCL_IB_HCA"], env["NCCL_SOCKET_IFNAME"], env["NCCL_DEBUG"]) == ("mlx5_0,mlx5_1", "ib0", "INFO")
    engine = plan_run(config, hosts(), PlanOptions(config_path=JAX, run_id="r1", overrides=SITE))
    assert engine["nodes"]["n1"]["container"]["env"]["NCCL_IB_HCA"] == "bnxt_re0,bnxt_re1", "the engine's paths too"


def test_a_megatron_override_at_the_containers_path_is_applied():
    result = plan(MEGATRON, change=set_in(("container", "image"), "<changeme>"))
    assert result["nodes"]["n1"]["container"]["image"] == "rocm/megatron-lm:v25.5_py310"
    config = load_config_file(MEGATRON)
    config["container"]["image"] = "<changeme>"
    site = {"config": {key: value for key, value in SITE["config"].items() if key != "container_image"}}
    written = dict(site, container={"image": "registry.local/megatron:1"},
                   sweep={"combinations": {"llama3_3_70b-mi325-bs64-mbs1-fp8": {"global_batch_size": "128"}}})
    result = plan_run(config, hosts(), PlanOptions(config_path=MEGATRON, run_id="r1", overrides=written))
    assert result["nodes"]["n1"]["container"]["image"] == "registry.local/megatron:1"
    assert result["nodes"]["n1"]["container"]["env"]["BS"] == "128"
    assert result["threshold_file"]["cell"] == "MBS=1,GBS=64,PRECISION=FP8", "the cell the config names"
    assert result["threshold_file"]["differences_text"] == ["GBS: the cell says 64, this run has 128"]
