# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of training_container: the node's container spec and files from the plan, then one module
call on the node. With O(pull), the image is pulled first (community.docker.docker_image, retried, at most
O(pull_throttle) nodes at once), in the same task. In check mode it prints what would run on the node: the
container and the plan's launch."""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible import constants as C
from ansible.utils.display import Display

from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION
from ansible_collections.clusterval.training.plugins.module_utils._launch_docker import container_spec, node_files
from ansible_collections.clusterval.training.plugins.module_utils._console import human_stdout
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view
from ansible_collections.clusterval.training.plugins.plugin_utils._action import CollectionAction, validated
from ansible_collections.clusterval.training.plugins.plugin_utils._node_task import role_vars, without_invocation
from ansible_collections.clusterval.training.plugins.plugin_utils._throttle import slot

PULL_MODULE = "community.docker.docker_image"

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    **ENDPOINT_OPTION,
    spec_overrides=dict(type="dict", default={}),
    command=dict(type="list", elements="str", default=[]),
    extra_volumes=dict(type="list", elements="str", default=[]),
    hf_token_file=dict(type="str"),
    hf_token_present=dict(type="bool", default=True),
    stop_timeout=dict(type="int", default=10),
    timeout=dict(type="float", default=60.0),
    plan_files=dict(type="bool", default=True),
    directories=dict(type="list", elements="path", default=[]),
    files=dict(type="list", elements="dict", default=[]),
    owner=dict(type="str"),
    pull=dict(type="bool", default=False),
    pull_retries=dict(type="int", default=3),
    pull_delay=dict(type="float", default=10.0),
    pull_throttle=dict(type="int", default=16),
    settings_from=dict(type="str"),
    job=dict(type="dict", default={}),
)
# The options that job may give, from the role that built what the container runs.
JOB_OPTIONS = ("command", "extra_volumes", "directories", "files", "stop_timeout")
# The collection's settings that the role's unset variables stand for.
COLLECTION_SETTINGS = {"docker_host": "training_docker_host", "spec_overrides": "training_container_spec_overrides"}


class ActionModule(CollectionAction):
    # Runs the module on the task's host.
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._arguments(task_vars)
        if "msg" in args:
            result.update(failed=True, msg="training_container: %s" % args["msg"])
            return result
        plan = args["plan"] or (task_vars.get("ansible_facts") or {}).get("training_plan")
        host = task_vars.get("inventory_hostname")
        try:
            if not isinstance(plan, dict):
                raise ConfigError("plan", "the plan from clusterval.training.training_plan", "none")
            spec = container_spec(plan, host, args["spec_overrides"], args["command"], args["extra_volumes"],
                                  args["hf_token_file"], args["hf_token_present"])
            files = node_files(plan, host) if args["plan_files"] else {"directories": [], "files": []}
        except (ConfigError, KeyError, TypeError) as exc:
            result.update(failed=True, msg="training_container: %s" % getattr(exc, "message", exc))
            return result
        prepared = self._prepare(args, spec["image"], str(plan.get("run_id") or "run"), task_vars)
        if prepared.get("failed") or prepared.get("unreachable"):
            result.update(prepared)
            return result
        owner = args["owner"] or plan.get("remote_user") or self._templar.template(task_vars.get("ansible_user"))
        module_args = {"docker_host": args["docker_host"], "spec": spec, "stop_timeout": args["stop_timeout"],
                       "timeout": args["timeout"], "owner": owner,
                       "directories": files["directories"] + args["directories"],
                       "files": files["files"] + args["files"]}
        result.update(without_invocation(self._execute_module(module_name="clusterval.training.training_container",
                                                              module_args=module_args, task_vars=task_vars)))
        result.update(container=spec, **prepared)
        if self._task.check_mode:
            result["launch"] = node_view(plan, host).get("launch")
            if human_stdout(str(C.DEFAULT_STDOUT_CALLBACK)):
                Display().display("%s would run (check mode): %s" % (host, json.dumps(
                    {"container": spec, "launch": result["launch"]}, indent=4, sort_keys=True)))
        return result

    def _arguments(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        """The task's arguments over the role's variables (settings_from), validated; {msg} for a job of other keys."""
        given = dict(self._task.args)
        role = given.get("settings_from")
        if role:
            given = dict(role_vars(self._templar, task_vars, str(role), ARGUMENT_SPEC, COLLECTION_SETTINGS), **given)
        where = " (the options, or the role's variables %s_<option>)" % role if role else ""
        job = given.pop("job", None) or {}
        if not isinstance(job, dict) or set(job) - set(JOB_OPTIONS):
            return {"msg": "job: expected a dict of %s, found %s%s" % (
                ", ".join(JOB_OPTIONS), ", ".join(sorted(job)) if isinstance(job, dict) else type(job).__name__, where)}
        return validated(ARGUMENT_SPEC, dict(given, **job), "training_container", where)

    def _prepare(self, args: dict[str, Any], image: str, run_id: str, task_vars: dict[str, Any]) -> dict[str, Any]:
        """The image pulled where it is missing: the failed pull's answer, else {}."""
        if args["pull"] and not self._task.check_mode:
            pulled = self._pull(args, image, run_id, task_vars)
            if pulled.get("failed") or pulled.get("unreachable"):
                return dict(pulled, msg="pulling %s: %s" % (image, pulled.get("msg", "failed")))
        return {}

    def _pull(self, args: dict[str, Any], image: str, run_id: str, task_vars: dict[str, Any]) -> dict[str, Any]:
        """The image pulled on the node (a registry's hiccup retried), by at most pull_throttle nodes at once."""
        module_args = {"docker_host": args["docker_host"], "name": image, "source": "pull", "force_source": False}
        slots = os.path.join(C.DEFAULT_LOCAL_TMP, "clusterval-pull-%s" % run_id)
        attempts = max(1, args["pull_retries"] + 1)
        for attempt in range(attempts):
            with slot(slots, args["pull_throttle"]):
                answer = self._execute_module(module_name=PULL_MODULE, module_args=module_args, task_vars=task_vars)
            if not answer.get("failed") or answer.get("unreachable") or attempt + 1 == attempts:
                return answer
            time.sleep(args["pull_delay"])
        return answer
