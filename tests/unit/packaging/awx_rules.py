"""AWX's rules for what this collection hands it, written from AWX's source (ansible/awx, 2024):

- survey specs: ``JobTemplateSurveySpec._validate_spec_data`` (awx/api/views) checks a spec when it is
  saved; ``SurveyJobTemplateMixin._survey_element_validation`` (awx/main/models/mixins.py) checks every
  answer at launch, the defaults included (a default that fails it is silently not applied);
- credential types: ``CredentialTypeInputField`` and ``CredentialTypeInjectorField`` (awx/main/fields.py)
  check inputs and injectors when they are saved; ``CredentialType.inject_credential``
  (awx/main/models/credential.py) renders the injectors for a job.

Our own checker, not AWX's code: each function returns the list of what AWX would refuse.
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
from typing import Any, Dict, List, Mapping, Tuple

import yaml
from jinja2 import StrictUndefined, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": (float, int)}
QUESTION_FIELDS = {"type": str, "question_name": str, "variable": str, "required": bool}
NAME = re.compile(r"^[a-zA-Z_]+[a-zA-Z0-9_]*$")
FILE_INJECTOR = re.compile(r"^template(\.[a-zA-Z_]+[a-zA-Z0-9_]*)?$")
EXTRA_VAR = re.compile(r"^[a-zA-Z_{}]+[a-zA-Z0-9_{}]*$")
INPUT_KEYS = {"type", "format", "choices", "id", "label", "help_text", "multiline", "secret", "ask_at_runtime",
              "default"}
CONTAINER_ROOT = "/runner"  # where AWX mounts a job's private data directory in the execution environment


def survey_spec_errors(spec: Mapping[str, Any]) -> List[str]:
    """What AWX refuses when the spec is saved, and defaults it would not apply at launch."""
    errors = ["%s: expected %s" % (key, kind.__name__) for key, kind in
              (("name", str), ("description", str), ("spec", list)) if not isinstance(spec.get(key), kind)]
    if errors:
        return errors
    if not spec["spec"]:
        return ["spec: no question"]
    seen = set()
    for index, question in enumerate(spec["spec"]):
        where = "spec[%d]" % index
        if not isinstance(question, dict):
            errors.append("%s: expected an object" % where)
            continue
        wrong = ["%s.%s: expected %s" % (where, key, kind.__name__) for key, kind in QUESTION_FIELDS.items()
                 if not isinstance(question.get(key), kind)]
        if wrong:
            errors.extend(wrong)
            continue
        if question["variable"] in seen:
            errors.append("%s.variable: %s asked twice" % (where, question["variable"]))
        seen.add(question["variable"])
        errors.extend("%s.%s" % (where, error) for error in question_errors(question))
    return errors


def question_errors(question: Mapping[str, Any]) -> List[str]:
    kind = question["type"]
    if kind not in SURVEY_TYPES:
        return ["type: %s is not one of %s" % (kind, ", ".join(SURVEY_TYPES))]
    errors = ["%s: expected an integer or null" % key for key in ("min", "max")
              if key in question and question[key] is not None and not isinstance(question[key], int)]
    default = question.get("default")
    if "default" in question and default != "" and not isinstance(default, SURVEY_TYPES[kind]):
        errors.append("default: %r does not answer a question of type %s" % (default, kind))
    if kind in ("multiplechoice", "multiselect"):
        errors.extend(choice_errors(question))
    if isinstance(default, str) and default.startswith("$encrypted$"):
        errors.append("default: $encrypted$ is reserved")
    if not errors and default is not None:
        errors.extend("default: %s" % error for error in answer_errors(question, default))
    return errors


def choice_errors(question: Mapping[str, Any]) -> List[str]:
    if "choices" not in question:
        return ["choices: required for %s" % question["type"]]
    choices = choice_list(question["choices"])
    default = question.get("default")
    defaults = choice_list(default) if isinstance(default, str) else list(default or [])
    errors = []
    if question["type"] == "multiplechoice" and len(defaults) > 1:
        errors.append("default: one choice at most")
    errors.extend("default: %s is not a choice" % item for item in defaults if item not in choices)
    return errors


def choice_list(choices: Any) -> List[str]:
    if isinstance(choices, str):
        return [line for line in choices.splitlines() if line.strip()]
    return list(choices)


def answer_errors(question: Mapping[str, Any], answer: Any) -> List[str]:
    """What AWX refuses in an answer at launch (a default included)."""
    kind, low, high = question["type"], question.get("min"), question.get("max")
    low = None if low in ("", None) else low
    high = None if high in ("", None) else high
    if kind in ("text", "textarea", "password"):
        if not isinstance(answer, str):
            return ["%r is not a string" % (answer,)]
        size = len(answer)
        return (["%r is shorter than %d" % (answer, low)] if low is not None and size < low else []) + \
            (["%r is longer than %d" % (answer, high)] if high is not None and size > high else [])
    if kind in ("integer", "float"):
        if type(answer) not in ((int,) if kind == "integer" else (int, float)):  # pylint: disable=unidiomatic-typecheck
            return ["%r is not an %s" % (answer, kind)]
        return (["%r is below %s" % (answer, low)] if low is not None and answer < low else []) + \
            (["%r is above %s" % (answer, high)] if high is not None and answer > high else [])
    choices = choice_list(question["choices"])
    answers = answer if kind == "multiselect" else [answer]
    return ["%r is not a choice" % (item,) for item in answers if item not in choices]


def credential_type_errors(credential_type: Mapping[str, Any]) -> List[str]:
    """What AWX refuses when a custom credential type is saved through its API."""
    errors = []
    if credential_type.get("kind") not in ("cloud", "net"):
        errors.append("kind: custom credential types are cloud or net")
    if not isinstance(credential_type.get("name"), str) or not credential_type["name"]:
        errors.append("name: required")
    inputs = credential_type.get("inputs", {})
    errors.extend(input_errors(inputs))
    if not errors:
        errors.extend(injector_errors(credential_type.get("injectors", {}), inputs))
    return errors


def input_errors(inputs: Mapping[str, Any]) -> List[str]:
    errors = ["inputs.%s: not allowed" % key for key in inputs if key not in ("fields", "required")]
    ids = set()
    for index, field in enumerate(inputs.get("fields", [])):
        where = "inputs.fields[%d]" % index
        errors.extend("%s.%s: not allowed" % (where, key) for key in field if key not in INPUT_KEYS)
        errors.extend("%s.%s: required" % (where, key) for key in ("id", "label") if key not in field)
        field_id, kind = field.get("id", ""), field.get("type", "string")
        if not NAME.match(field_id) or field_id == "tower":
            errors.append("%s.id: %r is not a usable name" % (where, field_id))
        if field_id in ids:
            errors.append("%s.id: %s twice" % (where, field_id))
        ids.add(field_id)
        if kind not in ("string", "boolean"):
            errors.append("%s.type: %s is not string or boolean" % (where, kind))
        errors.extend("%s.%s: only for strings" % (where, key) for key in ("choices", "multiline", "format", "secret")
                      if key in field and kind != "string")
    errors.extend("inputs.required: %s is no field" % name for name in inputs.get("required", []) if name not in ids)
    return errors


def injector_errors(injectors: Mapping[str, Any], inputs: Mapping[str, Any]) -> List[str]:
    errors = ["injectors.%s: not allowed" % key for key in injectors if key not in ("file", "env", "extra_vars")]
    files = injectors.get("file", {})
    errors.extend("injectors.file.%s: not a template name" % key for key in files if not FILE_INJECTOR.match(key))
    if "template" in files and len(files) > 1:
        errors.append("injectors.file: several files need the template.<name> form")
    errors.extend("injectors.env.%s: ANSIBLE_* is not allowed" % key for key in injectors.get("env", {})
                  if key.startswith("ANSIBLE_"))
    errors.extend("injectors.extra_vars.%s: not a variable name" % key for key in injectors.get("extra_vars", {})
                  if not EXTRA_VAR.match(key))
    namespace = validation_namespace(inputs, files)
    environment = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    for where, template in injector_templates(injectors):
        try:
            environment.from_string(template).render(namespace)
        except UndefinedError as exc:
            errors.append("injectors.%s: uses an undefined field (%s)" % (where, exc))
    return errors


def validation_namespace(inputs: Mapping[str, Any], files: Mapping[str, str]) -> Dict[str, Any]:
    """What AWX renders the templates with when it checks them: every field, and the file names it will write."""
    namespace: Dict[str, Any] = {field["id"]: "EXAMPLE" for field in inputs.get("fields", [])}
    labels = [key.split(".", 1)[1] for key in files if "." in key]
    tower = {"filename": "EXAMPLE_FILENAME" if "template" in files else {label: "EXAMPLE_FILENAME" for label in labels}}
    namespace["tower"] = tower
    return namespace


def injector_templates(injectors: Mapping[str, Any]) -> List[Tuple[str, str]]:
    found = [("file.%s" % key, value) for key, value in injectors.get("file", {}).items()]
    found += [("env.%s" % key, value) for key, value in injectors.get("env", {}).items()]

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                found.append(("%s (key)" % prefix, key))
                walk("%s.%s" % (prefix, key), value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk("%s[%d]" % (prefix, index), value)
        else:
            found.append((prefix, node))

    walk("extra_vars", injectors.get("extra_vars", {}))
    return found


class Injected:
    """What a job gets from a credential: the files AWX wrote, its environment, its `-e @file` arguments
    (paths here; AWX gives the execution environment's, under /runner)."""

    def __init__(self) -> None:
        self.files: Dict[str, str] = {}   # path in the execution environment -> path here
        self.env: Dict[str, str] = {}
        self.args: List[str] = []


def inject(credential_type: Mapping[str, Any], values: Mapping[str, Any], private_data_dir: str) -> Injected:
    """Render a credential's injectors for a job as AWX does, into `private_data_dir` (its layout: env/...)."""
    injected = Injected()
    environment = ImmutableSandboxedEnvironment()
    namespace: Dict[str, Any] = {key: value for key, value in values.items() if value != ""}
    filenames: Dict[str, str] = {}
    env_dir = os.path.join(private_data_dir, "env")
    os.makedirs(env_dir, exist_ok=True)
    for label, template in credential_type["injectors"].get("file", {}).items():
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(environment.from_string(template).render(**namespace))
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        in_container = os.path.join(CONTAINER_ROOT, os.path.relpath(path, private_data_dir))
        injected.files[in_container] = path
        filenames[label.split(".", 1)[1] if "." in label else ""] = in_container
    namespace["tower"] = {"filename": filenames.get("", filenames)}
    for name, template in credential_type["injectors"].get("env", {}).items():
        injected.env[name] = environment.from_string(template).render(**namespace)

    def render(node: Any) -> Any:
        if isinstance(node, dict):
            return {render(key): render(value) for key, value in node.items()}
        if isinstance(node, list):
            return [render(value) for value in node]
        return environment.from_string(node).render(**namespace)

    extra_vars = render(credential_type["injectors"].get("extra_vars", {}))
    if extra_vars:
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(yaml.safe_dump(extra_vars))
        os.chmod(path, stat.S_IRUSR)
        injected.args.extend(["-e", "@" + path])
    return injected
