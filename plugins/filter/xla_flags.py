# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.xla_flags: dict of XLA flags -> XLA_FLAGS string."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._xla import render_xla_flags


def xla_flags(flags, strict=False):
    try:
        rendered, warnings = render_xla_flags(flags, "xla_flags")
    except ConfigError as exc:
        raise AnsibleFilterError("xla_flags: %s" % exc.message) from None
    if strict and warnings:
        raise AnsibleFilterError("xla_flags: " + "; ".join(warnings))
    return rendered


class FilterModule:
    def filters(self):
        return {"xla_flags": xla_flags}
