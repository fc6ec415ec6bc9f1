# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
name: training_console
type: stdout
short_description: Ansible's default screen output, without a "FAILED - RETRYING" line per training poll
version_added: 0.1.0
description:
  - The default stdout callback, except that the polls of M(clusterval.training.training_watch) (one loop
    item each, labelled with the progress line) print nothing here when the
    P(clusterval.training.training_report#callback) callback is enabled, which prints the training progress
    instead, at most one line per C(progress_interval). At hundreds of nodes a line per node per poll would
    drown the output.
  - A node's failed preflight (M(clusterval.training.training_probe)) shows its message only, since the
    probe printed every check's line above it.
  - Set with C(stdout_callback = clusterval.training.training_console) in C(ansible.cfg), as the
    collection's C(ansible.cfg) does. AWX and ansible-runner use their own stdout callback.
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout in configuration
"""

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as DefaultCallbackModule

from ansible_collections.clusterval.training.plugins.module_utils._console import REPORT_CALLBACK

WATCH_ACTIONS = frozenset(("clusterval.training.training_watch", "training_watch"))
PROBE_ACTIONS = frozenset(("clusterval.training.training_probe", "training_probe"))


def is_watch(result):
    task = getattr(result, "task", None) or getattr(result, "_task", None)
    return getattr(task, "action", None) in WATCH_ACTIONS


class CallbackModule(DefaultCallbackModule):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "clusterval.training.training_console"

    def v2_runner_retry(self, result):
        if not is_watch(result):
            super().v2_runner_retry(result)

    def v2_runner_item_on_ok(self, result):
        # Each poll of the watch is a loop item labelled with its progress line; the training_report callback,
        # when enabled, prints that line itself (at most one per progress_interval).
        if not (is_watch(result) and REPORT_CALLBACK in (C.CALLBACKS_ENABLED or [])):
            super().v2_runner_item_on_ok(result)

    def _clean_results(self, result, task_name):
        super()._clean_results(result, task_name)
        if task_name in PROBE_ACTIONS and result.get("failed") and "checks" in result:
            for key in [key for key in result if key not in ("changed", "failed", "msg")]:
                del result[key]
