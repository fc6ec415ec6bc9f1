# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.launcher: training_launcher's value -> its row (_launchers)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._launchers import launcher as launcher_row


def launcher(name):
    try:
        return launcher_row(name).as_dict()
    except ConfigError as exc:
        raise AnsibleFilterError(exc.message) from None


class FilterModule:
    def filters(self):
        return {"launcher": launcher}
