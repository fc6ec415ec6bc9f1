# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A role's variables read by its action plugin from the host's variables (the task's option ``settings_from``).

A task's arguments are Jinja expressions compiled again in every node's worker (ansible-core keeps no compiled
template across the forks): a role task that passed each of its variables as ``"{{ role_x }}"`` paid one compile
per variable per node. Read here, a variable left at a literal default costs nothing, and one that is a template
is rendered once."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ansible.errors import AnsibleValueOmittedError


def role_vars(templar: Any, task_vars: Mapping[str, Any], role: str, names: Iterable[str]) -> dict[str, Any]:
    """``{name: value}`` of the role's variables ``<role>_<name>`` that are set, rendered; one that renders to
    ``omit`` is left out."""
    values = {}
    for name in names:
        key = "%s_%s" % (role, name)
        if key not in task_vars:
            continue
        try:
            values[name] = templar.template(task_vars[key])
        except AnsibleValueOmittedError:
            continue
    return values
