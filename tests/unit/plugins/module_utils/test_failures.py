from __future__ import annotations

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _failures, _logs

from real_logs import excerpts

EXPECTED_CLASSES = {
    "ER-01": {"coordination", "timeout"}, "ER-02": {"gpu"}, "ER-03": {"gpu"}, "ER-04": {"coordination"},
    "ER-05": {"coordination"}, "ER-06": {"coordination"}, "ER-07": {"network", "timeout"},
    "ER-08": {"network"}, "ER-09": {"network"}, "ER-10": {"network"}, "ER-11": {"network"},
    "ER-12": {"network"}, "ER-13": {"gpu", "network"}, "ER-14": {"gpu"}, "ER-15": {"memory"}, "ER-16": {"memory"},
    "ER-17": {"memory"}, "ER-18": {"nan"}, "ER-19": {"nan"}, "ER-20": {"nan"}, "ER-21": {"gpu"},
    "ER-22": {"crash", "gpu"}, "ER-23": {"crash"}, "ER-24": {"coordination", "crash"},
}


def errors_of(text, patterns=None):
    return _logs.parse_text(text, patterns=patterns).errors


@pytest.mark.parametrize("excerpt", sorted(EXPECTED_CLASSES))
def test_every_real_error_excerpt_is_detected_with_its_classes(excerpt):
    errors = errors_of(excerpts("errors_real.txt")[excerpt])
    assert {e["class"] for e in errors} == EXPECTED_CLASSES[excerpt]


@pytest.mark.parametrize("excerpt,line,pattern", [
    ("ER-07", 1, "watchdog_timeout"), ("ER-13", 1, "unhandled_cuda_error"), ("ER-14", 4, "hip_illegal_state"),
    ("ER-15", 1, "hip_oom"), ("ER-20", 1, "exception"), ("ER-21", 2, "hw_exception"), ("ER-23", 1, "child_failed"),
])
def test_first_error_names_line_and_signature(excerpt, line, pattern):
    first = errors_of(excerpts("errors_real.txt")[excerpt])[0]
    assert (first["line"], first["lineno"], first["pattern"]) == (line, line, pattern)
    assert first["text"]


def test_exitcode_zero_is_not_a_crash():
    assert errors_of("  exitcode  : 0 (pid: 1)\n") == []
    assert [e["pattern"] for e in errors_of("  exitcode  : -11 (pid: 1)\n")] == ["exitcode"]


@pytest.mark.parametrize("line", [
    "2025-03-20 19:27:33.524086: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:8454] Unable to register "
    "cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
    "2025-03-20 19:27:34.279747: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",
    "Config param dropout_rate: nan",
    "Config param nan_check: True",
    "usmocpm2m-446-084:17:664 [2] NCCL INFO RCCL_MSCCL_ENABLE set by environment to 0.",
    "Distributed task shutdown result: OK",
    "WARNING:megatron.core.rerun_state_machine:Setting RerunStateMachine mode RerunMode.DISABLED",
])
def test_benign_lines_are_not_failures(line):
    assert errors_of(line + "\n") == []


@pytest.mark.parametrize("name,excerpt", [("maxtext_real.txt", "MX-%02d" % i) for i in range(1, 44)] +
                         [("megatron_real.txt", "MG-%02d" % i) for i in (1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12)] +
                         [("primus_real.txt", "PR-%02d" % i) for i in (1, 2, 3, 4, 5, 6, 7, 9, 10)] +
                         [("nxdt_real.txt", "NX-%02d" % i) for i in range(1, 8)])
def test_no_false_positive_in_healthy_real_output(name, excerpt):
    assert errors_of(excerpts(name)[excerpt]) == []


def test_user_patterns_extend_detection():
    patterns = [{"regex": r"ibv_devinfo: no HCAs? found", "class": "network"}]
    errors = errors_of("ok\nibv_devinfo: no HCA found\n", patterns)
    assert errors == [{"class": "network", "line": 2, "lineno": 2, "text": "ibv_devinfo: no HCA found",
                       "pattern": r"ibv_devinfo: no HCAs? found", "time": None, "first_seen": None, "step": None,
                       "consequence": False}]


@pytest.mark.parametrize("patterns,message", [
    ([{"class": "gpu"}], r"patterns\[0\]: expected a dict with a string 'regex'"),
    ([{"regex": "x", "class": "bogus"}], r"patterns\[0\]\.class: expected one of network, .*found 'bogus'"),
    ([{"regex": "(", "class": "gpu"}], r"patterns\[0\]\.regex: expected a valid regular expression, found '\('"),
])
def test_bad_user_patterns_are_refused_by_path(patterns, message):
    with pytest.raises(ValueError, match=message):
        _failures.compile_user_patterns(patterns)


def test_every_signature_has_a_known_class():
    assert {s.failure_class for s in _failures.BUILTIN_SIGNATURES} == set(_failures.CLASSES)


def test_every_signature_contains_a_prefilter_anchor():
    assert [s.name for s in _failures.BUILTIN_SIGNATURES if _failures.anchor_of(s.literal) is None] == []


# -- lines observed running real MaxText and JAX on CPU (tests/fixtures/real-logs/maxtext_cpu_observed.txt) --

from real_logs import repo_excerpts  # noqa: E402

OBSERVED = repo_excerpts("maxtext_cpu_observed.txt")


def test_real_maxtext_step_lines_parse_and_are_no_failure():
    result = _logs.parse_text(OBSERVED["MC-01"], "maxtext")
    assert [s["step"] for s in result.steps] == [0, 1, 2, 11]
    assert result.steps[-1]["loss"] == 6.07 and result.errors == []


def test_a_mesh_maxtext_refuses_has_its_assertion_error_as_the_cause_not_the_handled_import():
    errors = errors_of(OBSERVED["MC-02"])
    assert errors, "the traceback is a failure"
    assert all("transformer_engine" not in e["text"] for e in errors), errors
    assert errors[-1]["text"].startswith("AssertionError: Number of devices per slice 2 does not match"), errors


@pytest.mark.parametrize("excerpt", ["MC-03", "MC-04"])
def test_xla_refusing_an_unknown_flag_is_a_crash_cause(excerpt):
    errors = errors_of(OBSERVED[excerpt])
    assert [e["pattern"] for e in errors] == ["xla_unknown_flag"], errors
    assert not _failures.is_consequence("xla_unknown_flag")


@pytest.mark.parametrize("excerpt, pattern", [("MC-07", "libtpu_unknown_flag"), ("MC-08", "libtpu_illegal_value")])
def test_libtpu_refusing_its_init_args_is_a_crash_cause_naming_the_flag(excerpt, pattern):
    errors = errors_of(OBSERVED[excerpt])
    assert [e["pattern"] for e in errors] == [pattern], errors
    assert "'xla_" in errors[0]["text"] and not _failures.is_consequence(pattern)


def test_gloo_losing_its_peer_is_a_consequence():
    line = ("jax.errors.JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: [external/xla++third_party_ext+gloo/gloo/"
            "transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:13997")
    errors = errors_of(line + "\n")
    assert errors and errors[0]["pattern"] == "peer_closed" and _failures.is_consequence("peer_closed")


@pytest.mark.parametrize("excerpt", ["MC-05", "MC-06"])
def test_the_survivor_of_a_killed_peer_is_a_consequence_in_real_output(excerpt):
    errors = errors_of(OBSERVED[excerpt])
    assert [(e["pattern"], e["consequence"]) for e in errors] == [("peer_reset", True)], errors
