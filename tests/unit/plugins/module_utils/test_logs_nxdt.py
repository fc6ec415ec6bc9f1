"""NxDT's progress bar read live: tqdm's \\r-separated updates, s/it and it/s, rank 0 only, Neuron failures."""
import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _logs
from ansible_collections.clusterval.training.plugins.module_utils._stacks import NXDT, STACKS


def update(done, total, rate, step, loss=7.5):
    """One update of NxDT's bar as tqdm writes it to a file: a carriage return, then the bar."""
    return ("\rEpoch 0:  %d%%|#         | %d/%d [00:%02d<00:10, %s, loss=%.3g, v_num=1, reduced_train_loss=%.3f, "
            "lr=1.5e-6, parameter_norm=1.95e+3, global_step=%.3f, consumed_samples=%.1f, throughput=%.3g, "
            "throughput_peak=12.4, gradient_norm=8.600]"
            % (done * 100 // total, done, total, done, rate, loss, loss, step, (step + 1) * 1024.0, 12.0))


def parse(path, parser, result=None):
    return _logs.parse_log(str(path), offset=result.offset if result else 0,
                           lineno=result.lineno if result else 0, parser=parser)


class TestLiveBar:
    def test_updates_are_read_before_the_bar_ends(self, tmp_path):
        log = tmp_path / "training.log"
        parser = _logs.LogParser("nxdt")
        log.write_text("2025-01-01 00:00:00.000100:  741  INFO ||NEURON_CACHE||: Compile cache path: "
                       "/var/tmp/neuron-compile-cache\n" + update(1, 5, "5.00s/it", 0))
        first = parse(log, parser)
        assert first.steps_total == 0  # the newest update may still be written: held back
        with open(log, "a") as handle:
            handle.write(update(2, 5, "5.00s/it", 1) + update(3, 5, "4.00s/it", 2))
        second = parse(log, parser, first)
        assert [step["step"] for step in second.steps] == [0, 1]
        assert second.steps[-1]["seconds"] == 5.0 and second.steps[-1]["loss"] == 7.5
        with open(log, "a") as handle:
            handle.write(update(4, 5, "4.00s/it", 3) + update(5, 5, "4.00s/it", 4) + "\n")
        third = parse(log, parser, second)
        assert [step["step"] for step in third.steps] == [2, 3, 4] and third.offset == log.stat().st_size
        assert third.lineno == second.lineno + 1  # one line in the file, five updates on it

    def test_iterations_per_second(self):
        result = _logs.parse_text(update(3, 62, " 0.02it/s", 1), "nxdt")
        assert result.steps[-1]["seconds"] == pytest.approx(50.0)

    def test_a_long_bar_line_is_not_skipped(self):
        text = "".join(update(i + 1, 2000, "1.00s/it", i) for i in range(2000)) + "\n"
        assert len(text) > _logs.MAX_LINE
        result = _logs.parse_text(text, "nxdt")
        assert result.last_step == 1999 and result.skipped_long_lines == 0

    def test_repeated_updates_of_one_step_are_one_step(self):
        updates = [update(3, 91, "321.89s/it", 1), update(3, 91, "321.89s/it", 2, 4.47),
                   update(4, 91, "320.22s/it", 2, 4.47)]
        text = "".join(updates) + "\n"
        result = _logs.parse_text(text, "nxdt")
        assert [step["step"] for step in result.steps] == [1, 2] and result.steps[-1]["seconds"] == 320.22

    def test_crlf_lines_still_parse(self):
        result = _logs.parse_text(update(1, 2, "1.00s/it", 0)[1:] + "\r\n" + update(2, 2, "1.00s/it", 1)[1:] + "\r\n",
                                  "nxdt")
        assert result.last_step == 1 and result.lineno == 2

    def test_auto_detects_the_bar(self):
        assert _logs.parse_text(update(1, 2, "1.00s/it", 0), "auto").framework == "nxdt"


class TestWhoPrints:
    def test_only_the_first_node(self):
        stack = STACKS[NXDT]
        assert [stack.prints_steps(rank, 3) for rank in range(3)] == [True, False, False]

    def test_last_step_counts_from_zero(self):
        assert STACKS[NXDT].final_step(30) == 29


@pytest.mark.parametrize("line, name, failure_class", [
    ("2023-Sep-24 10:00:00.0000  1234:1234 ERROR  TDRV:tdrv_get_dev_info                       "
     "No neuron device available", "neuron_no_device", "gpu"),
    ("2022-Mar-29 07:07:29.0082    11:11    ERROR   NRT:nrt_init                                Unable to "
     "determine Neuron Driver version. Please check aws-neuron-dkms package is installed.", "neuron_driver", "gpu"),
    ("2024-May-21 16:08:34.244955 58100:58100 ERROR  TDRV:tdrv_init_mla_phase1                    Could not "
     "open the nd3", "neuron_device_open", "gpu"),
    ("2024-Jun-01 13:16:27.706192   273:485   ERROR   NRT:nrt_load_collectives                    Unsupported "
     "topology. Supported number of Neuron Cores is 1, 2, 8, 16 or a multiple of 32.", "neuron_topology", "crash"),
    ("  (0) INTERNAL: Nrt::Load failed on NeuronCores 0-0(2): nrt_load status=1, error message=\"Non specific "
     "failure\".", "neuron_load_failed", "gpu"),
    ("2023-Jul-07 13:56:06.0950 1358943:1359077 [0] nccl_net_ofi_init:1415 CCOM WARN NET/OFI aws-ofi-nccl "
     "initialization failed", "neuron_efa_init", "network"),
])
def test_neuron_failure_lines(line, name, failure_class):
    errors = _logs.parse_text(line, "nxdt").errors
    assert [(error["pattern"], error["class"]) for error in errors] == [(name, failure_class)]


@pytest.mark.parametrize("line", [
    "2024-Oct-21 20:15:03.169020  7340:7340   INFO   NRT:nrt_init                                Neuron Runtime "
    "2.22.14.0 built on Sep  4 2024",
    "2024-05-08 00:46:45.000120:  185  INFO ||NEURON_CC_WRAPPER||: Using a cached neff at /var/tmp/neuron-compile-"
    "cache/neuronxcc-2.13.72.0+78a426937/MODULE_50a122f44c378e1567a4+ede6753c/model.neff. Exiting with a "
    "successfully compiled graph.",
])
def test_healthy_neuron_lines(line):
    assert _logs.parse_text(line, "nxdt").errors == []
