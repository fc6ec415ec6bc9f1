# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""One base for the collection's actions, on the controller: the task's arguments validated with one API, the
collection's error base (``_errors.ClustervalError``) turned into a failed result, and the planning helpers that
the actions which plan share (training_plan, training_arch, compare_plan, compare_report). No action imports
another."""
from __future__ import annotations

import getpass
import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.clusterval.training.plugins.module_utils._config import check_overrides, merge_overrides
from ansible_collections.clusterval.training.plugins.module_utils._config_path import config_file
from ansible_collections.clusterval.training.plugins.module_utils._errors import ClustervalError, ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan_context import Host

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    yaml = None

# The collection's root (plugins/plugin_utils/ is two levels below it): its configs/ are the fallback of a
# relative training_config.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_comparison(path):
    # Imported here: the actions that run on every node do not load the comparison and the stacks it reads.
    from ansible_collections.clusterval.training.plugins.module_utils import _compare  # pylint: disable=import-outside-toplevel
    if yaml is None:
        raise AnsibleActionFail("compare_plan: PyYAML is needed on the controller")
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(path, "a readable comparison file (YAML)", str(exc)) from None
    return _compare.load(document, path)


def validated(spec, args, name, where=""):
    """``args`` checked against the argument spec ``spec``, with its defaults: the one validation of the actions'
    arguments; an invalid one fails the task naming it (and ``where`` it came from)."""
    validation = ArgumentSpecValidator(spec).validate(args)
    if validation.error_messages:
        raise AnsibleActionFail("%s: %s%s" % (name, "; ".join(validation.error_messages), where))
    return validation.validated_parameters


def failed(result, name, exc: ClustervalError):
    """The task's failed result for one of the collection's errors: its message, and a ConfigError's problems."""
    result.update(failed=True, msg="%s: %s" % (name, exc))
    if isinstance(exc, ConfigError):
        result["problems"] = [problem._asdict() for problem in exc.problems]
    return result


class CollectionAction(ActionBase):
    """The base of every action of the collection (a unit test checks it). It runs on the controller only; an
    action that runs a module on the task's host says so (``_requires_connection = True``)."""
    TRANSFERS_FILES = False
    _requires_connection = False

    def _validated(self, spec, name):
        """The task's arguments, validated (``validated``)."""
        return validated(spec, self._task.args, name)


class PlanningAction(CollectionAction):
    """An action that plans: the config file, the overrides, the hosts and their user, as training_plan sees them."""

    @staticmethod
    def _overrides(args):
        """training_overrides_extra deep-merged over training_overrides (each checked, named in errors)."""
        return merge_overrides(check_overrides(args["overrides"], "training_overrides"),
                               check_overrides(args["overrides_extra"], "training_overrides_extra"))

    def _config_path(self, path):
        """The config file and where it was found (config_candidates)."""
        basedir = self._loader.get_basedir() if self._loader else None
        return config_file(path, os.getcwd(), basedir, COLLECTION_ROOT)

    def _hosts(self, args, task_vars):
        names = args["hosts"]
        if names is None:
            names = task_vars.get("ansible_play_hosts_all") or task_vars.get("ansible_play_batch") or []
        hostvars = task_vars.get("hostvars", {})
        hosts = []
        for name in names:
            known = hostvars.get(name) if name in hostvars else None
            address = known.get("ansible_host", name) if known is not None else name
            # the host's GPU vendor from the inventory (or -e training_gpu_vendor=...); the planner checks it
            vendor = known.get("training_gpu_vendor") if known is not None else None
            hosts.append(Host(str(name), str(address), str(vendor) if vendor else None))
        return hosts

    def _remote_user(self, hosts, task_vars):
        hostvars = task_vars.get("hostvars", {})
        if hosts and hosts[0].name in hostvars:
            first = hostvars[hosts[0].name]
            for key in ("ansible_user", "ansible_ssh_user", "ansible_remote_user"):
                value = first.get(key)
                if isinstance(value, str) and value and "{{" not in value:
                    return value
        remote_user = getattr(self._play_context, "remote_user", None)
        return remote_user or getpass.getuser()
