"""The AWX pieces under extensions/awx: the train survey and the Hugging Face token credential type."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from awx_rules import answer_errors, credential_type_errors, inject, survey_spec_errors
from conftest import REPO

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file, select_model_params

SURVEY = REPO / "extensions" / "awx" / "survey_train.json"
CREDENTIAL_TYPE = REPO / "extensions" / "awx" / "credential_type_hf_token.json"
TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def questions() -> dict:
    return {question["variable"]: question for question in load(SURVEY)["spec"]}


# --- the survey ---

def test_awx_accepts_the_survey_and_applies_its_defaults():
    assert survey_spec_errors(load(SURVEY)) == []


def test_every_survey_variable_is_one_the_train_playbook_reads():
    """A typo in a variable name would be an answer nobody reads."""
    playbook = (REPO / "playbooks" / "train.yml").read_text()
    role_options = set()
    for specs in REPO.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(specs.read_text())["argument_specs"].values():
            role_options.update(entry.get("options", {}))
    for variable in questions():
        assert variable in role_options or variable in playbook, variable


def test_no_optional_text_question():
    """AWX passes a blank optional text answer as "" (or null): the playbooks would take it for a value."""
    for question in questions().values():
        if question["type"] in ("text", "textarea"):
            assert question["required"] and question["min"] >= 1, question["variable"]
            assert answer_errors(question, "") != []


def test_optional_numbers_have_no_default_so_the_roles_defaults_apply():
    for question in questions().values():
        if not question["required"]:
            assert question["type"] in ("integer", "float") and "default" not in question, question["variable"]


def test_the_survey_defaults_select_a_model_of_the_default_config():
    """The GPU arch is detected by default (playbooks/gpu_arch.yml): on MI300X nodes, the config's mi300x."""
    defaults = questions()
    assert defaults["training_gpu_arch"]["default"] == "auto"
    config = load_config_file(str(REPO / defaults["training_config"]["default"]))
    selection = select_model_params(config, defaults["training_model"]["default"], "mi300x", nhosts=2)
    assert (selection.model, selection.gpu_arch) == ("llama3_1_8b", "mi300x")


def test_the_survey_offers_a_runs_directory_outside_the_project():
    runs = questions()["training_runs_dir"]
    assert runs["required"] and runs["default"].startswith("/") and not runs["default"].startswith("/runner")


def test_the_survey_timeouts_admit_the_roles_defaults():
    defaults = yaml.safe_load((REPO / "roles" / "train" / "defaults" / "main.yml").read_text())
    for variable in ("train_startup_timeout", "train_hang_timeout"):
        assert answer_errors(questions()[variable], defaults[variable]) == []


@pytest.mark.parametrize("change, error", [
    (lambda s: s.pop("description"), "description: expected str"),
    (lambda s: s["spec"].clear(), "spec: no question"),
    (lambda s: s["spec"][0].pop("required"), "spec[0].required: expected bool"),
    (lambda s: s["spec"][1].update(variable="training_config"), "spec[1].variable: training_config asked twice"),
    (lambda s: s["spec"][0].update(type="path"), "spec[0].type: path is not one of"),
    (lambda s: s["spec"][3].update(default="30"), "spec[3].default: '30' does not answer a question of type integer"),
    (lambda s: s["spec"][3].update(default=0), "spec[3].default: 0 is below 1"),
    (lambda s: s["spec"][0].update(max="10"), "spec[0].max: expected an integer or null"),
    (lambda s: s["spec"][0].update(max=10), "is longer than 10"),
    (lambda s: s["spec"][2].update(type="multiplechoice"), "spec[2].choices: required for multiplechoice"),
    (lambda s: s["spec"][2].update(type="multiplechoice", choices=["mi325", "mi355"]),
     "spec[2].default: auto is not a choice"),
])
def test_the_checker_refuses_what_awx_refuses(change, error):
    spec = load(SURVEY)
    change(spec)
    assert any(error in found for found in survey_spec_errors(spec)), survey_spec_errors(spec)


# --- the credential type ---

def test_awx_accepts_the_credential_type():
    assert credential_type_errors(load(CREDENTIAL_TYPE)) == []


def test_the_token_is_a_secret_input():
    fields = load(CREDENTIAL_TYPE)["inputs"]["fields"]
    assert [(field["id"], field.get("secret")) for field in fields] == [("hf_token", True)]


def test_the_injected_file_holds_the_token_and_the_extra_vars_only_its_path(tmp_path):
    injected = inject(load(CREDENTIAL_TYPE), {"hf_token": " %s\n" % TOKEN}, str(tmp_path))
    assert len(injected.files) == 1
    in_container, here = next(iter(injected.files.items()))
    assert Path(here).read_text() == TOKEN  # pasted blanks trimmed, no newline added
    assert stat.S_IMODE(os.stat(here).st_mode) == 0o600
    assert in_container.startswith("/runner/env/")

    assert injected.env == {}
    option, extra_vars_file = injected.args
    assert option == "-e"
    text = Path(extra_vars_file[1:]).read_text()
    assert yaml.safe_load(text) == {"training_hf_token_controller_file": in_container}
    assert TOKEN not in text


@pytest.mark.parametrize("change, error", [
    (lambda t: t.update(kind="ssh"), "kind: custom credential types are cloud or net"),
    (lambda t: t["inputs"]["fields"][0].update(id="tower"), "is not a usable name"),
    (lambda t: t["inputs"]["fields"][0].pop("label"), "inputs.fields[0].label: required"),
    (lambda t: t["inputs"]["fields"][0].update(type="boolean"), "inputs.fields[0].secret: only for strings"),
    (lambda t: t["injectors"]["file"].update({"template.hf_token": "{{ token }}"}), "uses an undefined field"),
    (lambda t: t["injectors"]["extra_vars"].update(x="{{ tower.filename.other }}"), "uses an undefined field"),
    (lambda t: t["injectors"].update(env={"ANSIBLE_CONFIG": "x"}), "ANSIBLE_* is not allowed"),
    (lambda t: t["injectors"]["file"].update(template="{{ hf_token }}"), "several files need the template.<name>"),
])
def test_the_checker_refuses_what_awx_refuses_in_a_credential_type(change, error):
    credential_type = load(CREDENTIAL_TYPE)
    change(credential_type)
    assert any(error in found for found in credential_type_errors(credential_type)), \
        credential_type_errors(credential_type)
