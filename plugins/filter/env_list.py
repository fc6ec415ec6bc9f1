# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.env_list: dict of environment variables -> list of NAME=value."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError
from ansible_collections.clusterval.training.plugins.module_utils._plan import checked_env


def env_list(env, sort=False):
    if not isinstance(env, dict):
        raise AnsibleFilterError("env_list: expected a dict of variable names to values, found %s"
                                 % type(env).__name__)
    names = sorted(env) if sort else list(env)
    try:
        return ["%s=%s" % checked_env(name, env[name], "env.%s" % name) for name in names]
    except ConfigError as exc:
        raise AnsibleFilterError("env_list: %s" % exc.message) from None


class FilterModule:
    def filters(self):
        return {"env_list": env_list}
