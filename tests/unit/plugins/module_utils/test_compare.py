import os
import re

import pytest
import yaml

from ansible_collections.clusterval.training.plugins.module_utils import _compare
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

from real_logs import repo_excerpts

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))
COMPARISON = os.path.join(REPO, "configs", "comparison", "llama3_8b_nvidia_vs_amd.yml")
SEED = os.path.join(REPO, "tests", "fixtures", "seeds", "004_nvidia_vs_amd.md")
MA = "megatron_args_real.txt"


def document():
    with open(COMPARISON, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def comparison():
    return _compare.load(document())


def seed_rows():
    """(section, parameter, nvidia, amd, kind) of every row of the seed's four tables."""
    rows, section, kind = [], None, None
    with open(SEED, encoding="utf-8") as handle:
        for line in handle:
            heading = re.match(r"^## \d+\. (.*) \((apple-to-apple|best-vs-best)\)", line)
            if heading:
                section = heading.group(1)
                kind = "apple_to_apple" if heading.group(2) == "apple-to-apple" else "best_vs_best"
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if section and line.startswith("|") and len(cells) == 3 and cells[0] != "Parameter" \
                    and not set(cells[0]) <= {"-"}:
                rows.append((section, cells[0], cells[1], cells[2], kind))
    return rows


class TestAgainstSeed004:
    def test_every_seed_row_is_in_the_file_with_its_values_and_kind(self):
        expected = seed_rows()
        assert len(expected) == 44
        got = [(r.section, r.parameter, r.text["nvidia"], r.text["amd"], r.kind) for r in comparison().rows]
        assert got == expected

    def test_the_launch_values_carry_the_seed_values(self):
        args = {side: _compare.side_arguments(comparison(), side) for side in _compare.SIDES}
        for side in _compare.SIDES:
            a = args[side]
            assert (a["seed"], a["micro_batch_size"], a["seq_length"], a["global_batch_size"]) == (42, 2, 2048, 64)
            assert (a["lr"], a["lr_decay_style"], a["min_lr"], a["lr_warmup_iters"], a["train_iters"]) == \
                (3e-4, "cosine", 0.0, 50, 500)
            assert (a["weight_decay"], a["adam_beta1"], a["adam_beta2"], a["init_method_std"]) == (0.1, 0.9, 0.95, 0.02)
            assert (a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], a["split"]) == (1, 1, "100,0,0")
            assert a["bf16"] is True and a["use_distributed_optimizer"] is True
            assert (a["sequence_parallel"], a["overlap_grad_reduce"], a["overlap_param_gather"]) == (False,) * 3
            assert a["recompute_granularity"] is None and a["save"] is None and a["fp8"] is None
        assert "enable_primus_turbo" not in args["nvidia"]
        assert args["amd"]["enable_primus_turbo"] is True and args["amd"]["use_turbo_attention"] is True
        assert _compare.side_env(comparison(), "nvidia") == {"NVTE_FUSED_ATTN": "1", "NVTE_FLASH_ATTN": "1"}
        assert _compare.side_env(comparison(), "amd") == {}

    def test_kinds_and_the_seeds_own_contradiction_is_noted(self):
        rows = {r.parameter: r for r in comparison().rows}
        assert rows["use_turbo_attention"].kind == "best_vs_best" and rows["Seed"].kind == "apple_to_apple"
        assert rows["gradient_accumulation"].text == {"nvidia": "8", "amd": "8"}
        assert "contradicts" in rows["gradient_accumulation"].note


class TestLoad:
    def test_a_bad_kind_names_its_path(self):
        doc = document()
        doc["rows"][3]["kind"] = "sort_of"
        with pytest.raises(ConfigError, match=r"comparison\.rows\[3\]\.kind: expected one of apple_to_apple"):
            _compare.load(doc)

    def test_an_unknown_argument_is_refused(self):
        doc = document()
        doc["rows"][0]["set"] = {"sead": 42}
        with pytest.raises(ConfigError, match=r"rows\[0\]\.set\.sead"):
            _compare.load(doc)


class TestRenderedLaunch:
    def rendered(self, amd_overrides=None):
        comp = comparison()
        nvidia = _compare.side_arguments(comp, "nvidia", iterations=12)
        amd = _compare.side_arguments(comp, "amd", iterations=12, overrides=amd_overrides)
        from ansible_collections.clusterval.training.plugins.module_utils import _stack_megatron
        argv = _stack_megatron.render_argv(nvidia, "x")
        return comp, {"nvidia": _stack_megatron.parse_argv(argv), "amd": dict(amd)}

    def test_same_table_renders_no_mismatch(self):
        comp, rendered = self.rendered()
        assert _compare.check_launch(comp, rendered, {"nvidia": 8, "amd": 8}) == []

    def test_mbs_4_on_one_side_is_named_with_both_values(self):
        comp, rendered = self.rendered({"micro_batch_size": 4})
        found = _compare.check_launch(comp, rendered, {"nvidia": 8, "amd": 8})
        assert [(m.parameter, m.argument, m.nvidia, m.amd) for m in found] == [
            ("Micro Batch Size (MBS)", "micro_batch_size", 2, 4),
            ("Gradient Accumulation (GA)", "gradient_accumulation", 4, 2),
            ("gradient_accumulation", "gradient_accumulation", 4, 2)]
        assert found[0].describe() == ("micro_batch_size (Micro Batch Size (MBS)): NVIDIA 2, AMD 4, in the "
                                       "rendered launch")

    def test_data_parallel_size_other_than_the_tables_is_refused(self):
        comp, rendered = self.rendered()
        found = _compare.check_launch(comp, rendered, {"nvidia": 16, "amd": 16})
        assert [(m.argument, m.nvidia, m.amd) for m in found if m.argument == "data_parallel_size"] == [
            ("data_parallel_size", 16, 16)]

    def test_a_best_vs_best_difference_is_not_refused(self):
        comp, rendered = self.rendered({"use_flash_attn": False})
        assert _compare.check_launch(comp, rendered, {"nvidia": 8, "amd": 8}) == []


class TestArgumentDumps:
    def dumps(self):
        return _compare.parse_dump(repo_excerpts(MA)["MA-01"]), _compare.parse_dump(repo_excerpts(MA)["MA-02"])

    def test_real_dumps_parse_whole(self):
        first, second = self.dumps()
        assert len(first) == 354 and len(second) == 274
        assert first["micro_batch_size"] == "4" and first["lr"] == "0.00015" and first["split"] == "949,50,1"
        assert first["config_logger_dir"] == "" and first["data_path"] == "['my-gpt2_text_document']"
        assert first["tensor_model_parallel_size"] == "4" and first["use_distributed_optimizer"] == "False"

    def test_two_real_runs_of_the_same_command_agree_on_the_table(self):
        first, second = self.dumps()
        rows, mismatches = _compare.row_report(comparison(), {"nvidia": first, "amd": second})
        assert mismatches == []
        status = {r["parameter"]: r["status"] for r in rows}
        assert status["Micro Batch Size (MBS)"] == "match" and status["Weight Decay"] == "match"
        assert status["Gradient Accumulation (GA)"] == "match"   # 16 / (4 x 1) = 4 on both
        # the older Megatron-LM has no cross_entropy_loss_fusion: shown, not matched
        assert status["cross_entropy_loss_fusion"] == "best_vs_best"
        assert status["random_data_seed"] == "stated"
        by_name = {r["parameter"]: r for r in rows}
        assert by_name["Gradient Accumulation (GA)"]["dump"] == {"nvidia": "4", "amd": "4"}
        # a shortened run says so on its row; a row the dump spells otherwise (fp16 vs bf16) does not
        assert by_name["Train Iters"]["note"] == "both sides ran 200; the table says 500. "
        assert by_name["precision"]["note"] == "" and by_name["Seed"]["note"] == "both sides ran 1234; the table says 42. "

    def test_a_changed_value_is_flagged_naming_the_argument_and_both_values(self):
        first = _compare.parse_dump(repo_excerpts(MA)["MA-01"])
        # the same real dump as the AMD side's, its micro batch size changed to 8 (what a wrong launch prints)
        changed = _compare.parse_dump(repo_excerpts(MA)["MA-01"].replace(
            "  micro_batch_size ................................ 4",
            "  micro_batch_size ................................ 8"))
        rows, mismatches = _compare.row_report(comparison(), {"nvidia": first, "amd": changed})
        assert [m.describe() for m in mismatches] == [
            "micro_batch_size (Micro Batch Size (MBS)): NVIDIA 4, AMD 8, in the argument dump",
            "gradient_accumulation (Gradient Accumulation (GA)): NVIDIA 4, AMD 2, in the argument dump",
            "gradient_accumulation (gradient_accumulation): NVIDIA 4, AMD 2, in the argument dump"]
        assert {r["parameter"]: r["status"] for r in rows}["Micro Batch Size (MBS)"] == "mismatch"

    def test_a_missing_dump_leaves_rows_missing_not_matched(self):
        first, _second = self.dumps()
        rows, mismatches = _compare.row_report(comparison(), {"nvidia": first, "amd": None})
        assert mismatches == []
        assert {r["parameter"]: r["status"] for r in rows}["Seed"] == "missing"

    def test_prefixed_and_coloured_lines_still_parse(self):
        text = ("[rank0]: ------------------------ arguments ------------------------\n"
                "[rank0]:   micro_batch_size ................................ 2\n"
                "\x1b[32m  seed ............................................ 42\x1b[0m\n"
                "[rank0]: -------------------- end of arguments ---------------------\n")
        assert _compare.parse_dump(text) == {"micro_batch_size": "2", "seed": "42"}

    def test_values_compare_as_printed(self):
        assert _compare.same(0.0003, "0.0003") and _compare.same(3e-4, "3e-04")
        assert _compare.same(True, "True") and _compare.same(None, "None") and not _compare.same(2, "4")
        assert _compare.same("/data/bc_text_document", "['/data/bc_text_document']")


class TestLossAgreement:
    def test_agreeing_curves(self):
        result = _compare.loss_agreement({"nvidia": [(1, 10.0), (2, 9.0)], "amd": [(1, 10.1), (2, 9.05)]}, 0.02)
        assert result["agrees"] and result["compared_steps"] == 2 and result["worst"]["step"] == 1

    def test_a_gap_beyond_the_tolerance_names_the_steps(self):
        result = _compare.loss_agreement({"nvidia": [(1, 10.0), (2, 9.0), (3, 8.0)],
                                          "amd": [(1, 10.0), (2, 9.5), (3, float("nan"))]}, 0.02)
        assert not result["agrees"] and result["disagreeing_steps"] == [2, 3]
        assert "2 of 3 common steps" in result["text"] and "non-finite" in result["text"]

    def test_no_common_step_is_not_agreement(self):
        assert not _compare.loss_agreement({"nvidia": [(1, 1.0)], "amd": []}, 0.02)["agrees"]
