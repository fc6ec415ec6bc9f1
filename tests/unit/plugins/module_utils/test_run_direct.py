import json
import math
import os

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _run_direct, _run_records, _run_watch
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import (
    Host,
    PlanOptions,
    plan_run,
)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import compact_plan
from ansible_collections.clusterval.training.plugins.module_utils._run_records import Limits

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
T0 = 1_000_000.0
FINAL = 9
LIMITS = Limits(hang_timeout=60.0, startup_timeout=300.0, deadline=3600.0)
NETWORK = {"config": {"nic_type": "thor2", "nccl_ib_hca_list": "bnxt_re0,bnxt_re1", "nccl_socket_ifname": "ens1",
                      "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}


def make_plan(framework="maxtext", hosts=("n1", "n2")):
    """A small plan of one job; Megatron-LM: only the last node prints steps."""
    nodes = {}
    for rank, host in enumerate(hosts):
        prints = framework == "maxtext" or rank == len(hosts) - 1
        log = {"format": framework, "final_step": FINAL, "warmup_steps": 2}
        nodes[host] = {"host": host, "job": "job-0", "node_rank": rank, "nnodes": len(hosts), "gpus": 8,
                       "prints_steps": prints, "log_path": "/r/training.log", "exit_code_path": "/r/training.exit",
                       "container": {"env": {"SEQ_LENGTH": "8192"}}, "log": log}
    return {"framework": framework, "final_step": FINAL, "jobs": [{"name": "job-0", "hosts": list(hosts)}],
            "nodes": nodes}


def watch_of(tmp_path, host, plan=None, limits=LIMITS):
    return _run_direct.Watch.from_plan(plan or make_plan(), host, str(tmp_path), limits, "/var/run/docker.sock")


def step(number, **values):
    return {"step": number, "loss": 10.0 - number / 10, "tokens_per_sec_per_gpu": 900.0 + number, **values}


def poll(steps=(), errors=(), completed=False, exit_code=None, offset=100, lineno=10, **extra):
    return {"steps": list(steps), "errors": list(errors), "completed": completed, "exit_code": exit_code,
            "offset": offset, "lineno": lineno, "framework": "maxtext", "simulated": False, "summary": {}, **extra}


def error(failure_class, text, line=57, consequence=False):
    return {"class": failure_class, "line": line, "lineno": line, "text": text, "pattern": text,
            "consequence": consequence}


def run_poll(watch, result, now=T0 + 10, abort=None):
    """One poll as the action plugin makes it: state from disk, abort.json read before the poll."""
    state = _run_direct.load_state(watch.run_dir, watch.host, T0)
    if abort is None:
        abort = _run_watch.read_json(_run_watch.abort_path(watch.run_dir))
    _run_direct.record_poll(watch, state, result, abort, now)
    return _run_direct.answer(state, watch.final_step, now)


def read_abort(tmp_path):
    return json.loads((tmp_path / "abort.json").read_text())


# -- completion -----------------------------------------------------------------------------------

def test_every_printing_node_completes_at_the_final_step(tmp_path):
    for host in ("n1", "n2"):
        watch = watch_of(tmp_path, host)
        first = run_poll(watch, poll([step(0), step(1)]), now=T0 + 5)
        assert (first["done"], first["reason"], first["msg"]) == (False, "running", f"{host}: step 1 of 9")
        last = run_poll(watch, poll([step(8), step(9)], completed=True), now=T0 + 20)
        assert (last["done"], last["failed"], last["reason"]) == (True, False, "completed")
        assert last["msg"] == f"{host}: reached the final step 9"
    assert not (tmp_path / "abort.json").exists()


def test_the_final_step_completes_even_without_the_completed_flag(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(FINAL)]))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, False, "completed")


def test_megatron_silent_node_is_done_when_its_process_exited_zero(tmp_path):
    watch = watch_of(tmp_path, "n1", make_plan("megatron"))
    answer = run_poll(watch, poll(exit_code=0))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, False, "exit")
    assert answer["msg"] == "n1: the training process exited with status 0"


def test_megatron_silent_node_is_done_when_the_printing_node_of_its_job_completed(tmp_path):
    plan = make_plan("megatron")
    silent, printer = watch_of(tmp_path, "n1", plan), watch_of(tmp_path, "n2", plan)
    assert (silent.printer, printer.printer) == ("n2", "n2")
    assert run_poll(silent, poll())["done"] is False
    run_poll(printer, poll([step(FINAL)], completed=True))
    answer = run_poll(silent, poll(), now=T0 + 30)
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, False, "completed")
    assert answer["msg"] == "n1: the job's printing node n2 completed"


def test_megatron_silent_node_never_hangs_but_meets_the_deadline(tmp_path):
    watch = watch_of(tmp_path, "n1", make_plan("megatron"))
    assert run_poll(watch, poll(), now=T0 + LIMITS.startup_timeout + 1)["done"] is False
    answer = run_poll(watch, poll(), now=T0 + LIMITS.deadline + 1)
    assert (answer["failed"], answer["reason"]) == (True, "deadline")


# -- failures and abort.json ----------------------------------------------------------------------

def test_a_failure_signature_fails_the_node_and_writes_the_cause_to_abort_json(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n2"), poll([step(3)], [error("crash", "  Segmentation fault  ")]))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, True, "error")
    assert answer["msg"] == "n2: crash failure in the training log (line 57): Segmentation fault"
    assert answer["errors"][0]["class"] == "crash"
    abort = read_abort(tmp_path)
    assert (abort["host"], abort["reason"], abort["msg"], abort["secondary"]) == (
        "n2", "error", answer["msg"], False)
    state = _run_watch.read_json(_run_watch.state_path(str(tmp_path), "n2"))
    assert (state["done"], state["failed"], state["reason"]) == (True, True, "error")


def test_the_root_cause_is_named_before_the_lost_peer_it_caused(tmp_path):
    errors = [error("network", "NCCL WARN Connection closed by remote peer", 40, consequence=True), error("gpu", "HIP error", 41)]
    answer = run_poll(watch_of(tmp_path, "n1"), poll(errors=errors))
    assert answer["msg"] == "n1: gpu failure in the training log (line 41): HIP error"
    assert read_abort(tmp_path)["secondary"] is False


def test_a_non_finite_value_is_a_failure(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(2), step(3, loss=math.nan)]))
    assert (answer["failed"], answer["reason"]) == (True, "error")
    assert answer["msg"].startswith("n1: nan failure: non-finite value at step 3")
    assert read_abort(tmp_path)["host"] == "n1"


def test_other_nodes_see_the_abort_and_stop_naming_the_failed_node(tmp_path):
    run_poll(watch_of(tmp_path, "n2"), poll(errors=[error("memory", "HIP out of memory")]))
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(4)]), now=T0 + 12)
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, False, "aborted")
    assert answer["stopped_by"] == "n2"
    assert answer["msg"].startswith("n1: stopped because n2 failed: n2: memory failure")
    state = _run_watch.read_json(_run_watch.state_path(str(tmp_path), "n1"))
    assert (state["stopped_by"], state["last_step"]) == ("n2", 4)
    assert read_abort(tmp_path)["host"] == "n2"


def test_a_finished_node_keeps_its_answer_on_later_polls(tmp_path):
    run_poll(watch_of(tmp_path, "n2"), poll(errors=[error("crash", "Segmentation fault")]))
    run_poll(watch_of(tmp_path, "n1"), poll())
    state = _run_direct.load_state(str(tmp_path), "n1", T0)
    answer = _run_direct.answer(state, FINAL, T0 + 99)
    assert (answer["done"], answer["reason"], answer["stopped_by"]) == (True, "aborted", "n2")


def test_a_real_cause_replaces_a_lost_peer_symptom_in_abort_json(tmp_path):
    peer_lost = run_poll(watch_of(tmp_path, "n1"), poll(errors=[error("coordination", "Barrier timed out", consequence=True)]))
    assert (peer_lost["failed"], read_abort(tmp_path)["secondary"]) == (True, True)
    abort_seen = read_abort(tmp_path)
    cause = run_poll(watch_of(tmp_path, "n2"), poll(errors=[error("gpu", "GPU Hang")]), abort=abort_seen)
    assert (cause["failed"], cause["reason"]) == (True, "error")
    assert "stopped_by" not in cause
    abort = read_abort(tmp_path)
    assert (abort["host"], abort["secondary"], abort["msg"]) == ("n2", False, cause["msg"])


def test_a_symptom_or_a_second_cause_does_not_replace_the_first_cause(tmp_path):
    run = str(tmp_path)
    first = _run_direct.claim_abort(run, "n1", "error", "n1: gpu failure", secondary=False)
    assert _run_direct.claim_abort(run, "n2", "error", "n2: network failure", secondary=True) == first
    assert _run_direct.claim_abort(run, "n3", "exit", "n3: exited 1", secondary=False) == first
    assert read_abort(tmp_path)["host"] == "n1"


def test_unreachable_node_fails_and_claims_the_abort(tmp_path):
    run = str(tmp_path)
    state = _run_direct.load_state(run, "n1", T0)
    msg = _run_direct.record_unreachable(run, state, "ssh: connect to host n1 port 22: No route to host")
    assert msg == "n1: unreachable during the run: ssh: connect to host n1 port 22: No route to host"
    saved = _run_watch.read_json(_run_watch.state_path(run, "n1"))
    assert (saved["done"], saved["failed"], saved["reason"]) == (True, True, "unreachable")
    assert (read_abort(tmp_path)["reason"], read_abort(tmp_path)["secondary"]) == ("unreachable", False)


# -- exit codes -----------------------------------------------------------------------------------

def test_a_non_zero_exit_fails_the_node(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(3)], exit_code=137))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, True, "exit")
    assert answer["msg"] == "n1: the training process exited with status 137 at step 3"
    assert read_abort(tmp_path)["reason"] == "exit"


def test_exit_zero_before_the_final_step_fails_a_printing_node(tmp_path):
    """Megatron-LM exits 0 after some failures: a clean exit must not pass without the final step."""
    watch = watch_of(tmp_path, "n2", make_plan("megatron"))
    answer = run_poll(watch, poll([step(5)], exit_code=0))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, True, "exit")
    assert answer["msg"] == "n2: the training process exited with status 0 before the final step 9 (last step 5)"


def test_exit_zero_after_the_final_step_is_a_completion(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(FINAL)], completed=True, exit_code=0))
    assert (answer["failed"], answer["reason"]) == (False, "completed")


def ended(status="exited", exit_code=137, oom_killed=False):
    return {"name": "train", "status": status, "exit_code": exit_code, "oom_killed": oom_killed,
            "ended": status != "running"}


def test_a_container_that_ended_without_an_exit_status_fails_at_once(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([step(3)], container=ended(oom_killed=True)))
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, True, "exit")
    assert answer["msg"] == ("n1: the training container train exited with status 137 (killed: out of memory) "
                             "at step 3, before the launch script recorded an exit status")
    assert read_abort(tmp_path)["reason"] == "exit"


def test_a_removed_container_fails_at_once(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), poll([], container=ended("missing", None)))
    assert answer["failed"] and "the training container train was removed at step None" in answer["msg"]


def test_the_exit_status_decides_when_the_launcher_wrote_it_and_a_running_container_decides_nothing(tmp_path):
    done = run_poll(watch_of(tmp_path, "n1"), poll([step(FINAL)], exit_code=0, container=ended(exit_code=0)))
    assert (done["failed"], done["reason"]) == (False, "completed")
    running = run_poll(watch_of(tmp_path, "n2"), poll([step(2)], container=ended("running", None)))
    assert (running["done"], running["failed"]) == (False, False)


# -- timeouts -------------------------------------------------------------------------------------

def test_no_new_step_for_the_hang_timeout_is_a_hang(tmp_path):
    watch = watch_of(tmp_path, "n1")
    run_poll(watch, poll([step(1)]), now=T0 + 100)
    assert run_poll(watch, poll([step(1)]), now=T0 + 100 + LIMITS.hang_timeout)["done"] is False
    answer = run_poll(watch, poll([step(1)]), now=T0 + 100 + LIMITS.hang_timeout + 1)
    assert (answer["failed"], answer["reason"]) == (True, "hang")
    assert answer["msg"] == "n1: hang: no new step for 61 s after step 1 (timeout 60 s)"
    assert read_abort(tmp_path)["reason"] == "hang"


def test_before_the_first_step_the_startup_timeout_applies(tmp_path):
    watch = watch_of(tmp_path, "n1")
    assert run_poll(watch, poll(), now=T0 + LIMITS.startup_timeout)["done"] is False
    answer = run_poll(watch, poll(), now=T0 + LIMITS.startup_timeout + 5)
    assert (answer["failed"], answer["reason"]) == (True, "hang")
    assert answer["msg"] == "n1: hang: no new step for 305 s before the first step (timeout 300 s)"


def test_the_deadline_fails_a_node_that_still_progresses(tmp_path):
    watch = watch_of(tmp_path, "n1", limits=Limits(hang_timeout=60.0, startup_timeout=60.0, deadline=100.0))
    assert run_poll(watch, poll([step(1)]), now=T0 + 100)["done"] is False
    answer = run_poll(watch, poll([step(2)]), now=T0 + 101)
    assert (answer["failed"], answer["reason"]) == (True, "deadline")
    assert answer["msg"] == "n1: the overall deadline of 100 s passed at step 2 of 9"


# -- a missing log --------------------------------------------------------------------------------

MISSING = {"failed": True, "msg": "[Errno 2] No such file or directory: '/r/training.log'"}


def test_a_missing_log_is_waited_for_during_the_grace_period(tmp_path):
    watch = watch_of(tmp_path, "n1")
    answer = run_poll(watch, dict(MISSING), now=T0 + _run_records.LOG_GRACE_S - 1)
    assert (answer["done"], answer["reason"]) == (False, "running")
    assert _run_watch.read_json(_run_watch.state_path(str(tmp_path), "n1"))["polls"] == 0
    assert not (tmp_path / "abort.json").exists()


def test_a_log_still_missing_after_the_grace_period_is_a_failure(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), dict(MISSING), now=T0 + _run_records.LOG_GRACE_S)
    assert (answer["done"], answer["failed"], answer["reason"]) == (True, True, "error")
    assert answer["msg"] == ("n1: reading the training log /r/training.log failed: "
                             "[Errno 2] No such file or directory: '/r/training.log'")
    assert read_abort(tmp_path)["host"] == "n1"


def test_a_log_that_vanishes_after_it_was_read_is_a_failure_at_once(tmp_path):
    watch = watch_of(tmp_path, "n1")
    run_poll(watch, poll([step(0)]), now=T0 + 5)
    answer = run_poll(watch, dict(MISSING), now=T0 + 6)
    assert (answer["failed"], answer["reason"]) == (True, "error")


def test_another_read_failure_is_not_given_a_grace_period(tmp_path):
    answer = run_poll(watch_of(tmp_path, "n1"), {"failed": True, "msg": "Permission denied"}, now=T0 + 1)
    assert (answer["failed"], answer["reason"]) == (True, "error")


# -- merging and progress -------------------------------------------------------------------------

def test_merge_keeps_only_new_steps_and_the_latest_offsets(tmp_path):
    state = _run_records.new_state("n1", T0)
    _run_direct.merge_poll(state, poll([step(0), step(1)], offset=100, lineno=10), T0 + 5)
    _run_direct.merge_poll(state, poll([step(1), step(2)], [error("crash", "boom")], offset=250, lineno=22,
                                       summary={"tokens_per_sec_per_gpu": 901.0}), T0 + 9)
    _run_direct.merge_poll(state, poll([], offset=260, lineno=23, simulated=True), T0 + 20)
    assert [s["step"] for s in state["steps"]] == [0, 1, 2]
    assert (state["last_step"], state["last_progress_at"], state["polls"]) == (2, T0 + 9, 3)
    assert (state["offset"], state["lineno"], state["simulated"]) == (260, 23, True)
    assert state["summary"] == {"tokens_per_sec_per_gpu": 901.0}
    assert [e["text"] for e in state["errors"]] == ["boom"]


def test_progress_reports_step_throughput_loss_and_eta():
    state = _run_records.new_state("n1", T0)
    _run_direct.merge_poll(state, poll([step(0), step(1), step(2), step(3)]), T0 + 40)
    progress = _run_records.progress_of(state, FINAL, T0 + 45)
    # 40 s for steps 0..3 -> 10 s per step, 6 steps left.
    assert progress == {"step": 3, "final_step": 9, "tokens_per_sec": 903.0, "loss": 9.7, "eta_s": 60.0,
                        "elapsed_s": 45.0}


def test_progress_before_two_steps_has_no_eta_and_throughput_falls_back():
    state = _run_records.new_state("n1", T0)
    assert _run_records.progress_of(state, FINAL, T0 + 1.26) == {
        "step": None, "final_step": 9, "tokens_per_sec": None, "loss": None, "eta_s": None, "elapsed_s": 1.3}
    _run_direct.merge_poll(state, poll([{"step": 0, "loss": 11.0, "tokens_per_gpu": 512.5}]), T0 + 3)
    progress = _run_records.progress_of(state, FINAL, T0 + 3)
    assert (progress["tokens_per_sec"], progress["eta_s"]) == (512.5, None)


def test_eta_is_never_negative_past_the_final_step():
    state = _run_records.new_state("n1", T0)
    _run_direct.merge_poll(state, poll([step(8), step(12)]), T0 + 10)
    assert _run_records.progress_of(state, FINAL, T0 + 10)["eta_s"] == 0.0


def test_answer_shows_the_first_five_errors():
    state = _run_records.new_state("n1", T0)
    state["errors"] = [error("crash", str(index)) for index in range(7)]
    assert [e["text"] for e in _run_direct.answer(state, FINAL, T0)["errors"]] == ["0", "1", "2", "3", "4"]


# -- state files ----------------------------------------------------------------------------------

def test_state_round_trips_through_its_file_without_leftovers(tmp_path):
    run = str(tmp_path)
    assert _run_direct.load_state(run, "n1", T0) == _run_records.new_state("n1", T0)
    state = _run_records.new_state("n1", T0)
    _run_direct.merge_poll(state, poll([step(0, loss=math.inf)], [error("gpu", "HIP error")]), T0 + 4)
    _run_direct.save_state(run, state)
    state["polls"] = 5
    _run_direct.save_state(run, state)
    loaded = _run_direct.load_state(run, "n1", T0 + 999)
    assert loaded["polls"] == 5 and loaded["started_at"] == T0
    assert math.isinf(loaded["steps"][0]["loss"])
    assert {k: v for k, v in loaded.items() if k != "steps"} == {k: v for k, v in state.items() if k != "steps"}
    assert os.listdir(tmp_path) == ["n1.json"]


def test_read_json_of_a_missing_file_is_none(tmp_path):
    assert _run_watch.read_json(str(tmp_path / "nothing.json")) is None


# -- the plan and training_log's arguments --------------------------------------------------------

def real_plan(name, **options):
    config = load_config_file(os.path.join(REPO, "configs", name))
    hosts = [Host("n1", "10.0.0.1"), Host("n2", "10.0.0.2")]
    return plan_run(config, hosts, PlanOptions(config_path="/c/" + name, overrides=NETWORK, run_id="r1",
                                               iterations=12, **options))


@pytest.mark.parametrize("form", ["full", "compact"])
def test_megatron_log_args_carry_seq_length_world_size_and_the_plans_warmup(tmp_path, form):
    full = real_plan("megatron/mi3xx_megatron_llama_distributed.json", model="llama3_1_8b", gpu_arch="mi300x")
    plan = json.loads(json.dumps(compact_plan(full))) if form == "compact" else full
    node = full["nodes"]["n1"]
    watch = watch_of(tmp_path, "n1", plan)
    args = _run_direct.log_args(watch, _run_records.new_state("n1", T0), 2000, [])
    assert args == {"path": node["log_path"], "framework": "megatron", "offset": 0, "lineno": 0, "final_step": 12,
                    "max_steps": 2000, "exit_code_path": node["exit_code_path"],
                    "container": node["container"]["name"], "docker_host": "/var/run/docker.sock",
                    "seq_length": int(node["container"]["env"]["SEQ_LENGTH"]), "world_size": 16,
                    "warmup_steps": full["warmup_steps"]}
    assert watch.printer == "n2"


def test_primus_log_args_ask_for_megatron_lines_with_their_sizes(tmp_path):
    """Primus prints Megatron-LM's lines: the direct look and the per-node watch read them as such."""
    plan = compact_plan(real_plan("megatron/mi3xx_megatron_llama_distributed.json", model="llama3_1_8b",
                                  gpu_arch="mi300x", framework="primus"))
    args = _run_direct.log_args(watch_of(tmp_path, "n1", plan), _run_records.new_state("n1", T0), 50, [])
    assert args["framework"] == "megatron"
    assert args["world_size"] == 16 and args["seq_length"] > 0


def test_maxtext_log_args_have_no_megatron_sizes_and_pass_patterns_and_offsets(tmp_path):
    plan = compact_plan(real_plan("jax/mi300x_distributed_llama3_1_70b.json"))
    state = dict(_run_records.new_state("n2", T0), offset=4096, lineno=77)
    patterns = [{"regex": "boom", "class": "crash"}]
    args = _run_direct.log_args(watch_of(tmp_path, "n2", plan), state, 50, patterns)
    assert (args["framework"], args["offset"], args["lineno"], args["final_step"]) == ("maxtext", 4096, 77, 11)
    assert (args["max_steps"], args["patterns"]) == (50, patterns)
    assert "seq_length" not in args and "world_size" not in args


def test_megatron_sizes_are_left_out_when_the_plan_lacks_them(tmp_path):
    plan = make_plan("megatron")
    plan["nodes"]["n1"]["container"] = {"env": {"SEQ_LENGTH": "<unset>"}}
    del plan["nodes"]["n1"]["gpus"]
    assert _run_records.megatron_sizes(plan["nodes"]["n2"]) == {"seq_length": 8192, "world_size": 16}
    assert _run_records.megatron_sizes(plan["nodes"]["n1"]) == {}


def test_a_plan_without_a_usable_final_step_is_refused_with_its_path(tmp_path):
    plan = make_plan()
    plan["final_step"] = "last"
    with pytest.raises(ConfigError, match=r"plan\.final_step: expected an integer, found 'last'"):
        watch_of(tmp_path, "n1", plan)


def test_a_look_that_never_answered_is_the_node_unreachable():
    timed_out = {"failed": True, "msg": "The task timed out after 40 seconds.\nmore"}
    assert _run_direct.look_that_never_answered(timed_out)
    assert _run_direct.look_that_never_answered({"unreachable": True, "msg": "ssh: connect to host: timed out"})
    assert not _run_direct.look_that_never_answered({"skipped": True})
    assert not _run_direct.look_that_never_answered({"failed": False, "reason": "running", "msg": "reachable"})
    assert _run_direct.unanswered("n2", timed_out) == {
        "unreachable": True, "failed": True, "reason": "unreachable",
        "msg": "n2: unreachable over SSH: The task timed out after 40 seconds."}


def test_a_look_the_task_timeout_stopped_says_so():
    # As ansible-core 2.19 registers a task its `timeout` stopped (failed_when does not apply to it).
    stopped = {"changed": False, "failed": True, "msg": "Task failed: Timed out after 40 second(s).",
               "timedout": {"frame": "Configure `DISPLAY_TRACEBACK` to see a traceback on timeout errors.",
                            "period": 40}}
    assert _run_direct.look_that_never_answered(stopped)
    assert _run_direct.unanswered("n2", stopped)["msg"] == "n2: no answer over SSH within 40 s (the look's timeout)"


def test_each_node_carries_its_log_block_computed_once_by_its_stack():
    """The run asks no stack question: format, final step, warm-up and the parser's sizes are the plan's."""
    megatron = real_plan("megatron/mi3xx_megatron_llama_distributed.json", model="llama3_1_8b", gpu_arch="mi300x")
    assert megatron["nodes"]["n1"]["log"] == {"format": "megatron", "final_step": 12, "warmup_steps": 2,
                                              "seq_length": 8192, "world_size": 16}
    maxtext = real_plan("jax/mi300x_distributed_llama3_1_70b.json")
    assert maxtext["nodes"]["n2"]["log"] == {"format": "maxtext", "final_step": 11, "warmup_steps": 3}
    assert compact_plan(maxtext)["node_shared"]["log"] == maxtext["nodes"]["n2"]["log"]


def test_a_node_without_its_log_block_is_a_named_error(tmp_path):
    plan = make_plan()
    del plan["nodes"]["n1"]["log"]
    with pytest.raises(ConfigError, match=r"plan\.nodes\.n1\.log: expected the node's log block"):
        _run_direct.log_args(watch_of(tmp_path, "n1", plan), _run_records.new_state("n1", T0), 1, [])
