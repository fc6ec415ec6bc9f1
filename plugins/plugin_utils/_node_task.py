# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What keeps an action that runs once per node cheap for the controller.

A task's arguments are Jinja expressions compiled again in every node's worker (ansible-core keeps no compiled
template across the forks): a role task that passed each of its variables as ``"{{ role_x }}"`` paid one compile
per variable per node. Read here (the task's option ``settings_from``), a variable left at a literal default costs
nothing, and one that is a template is rendered once.

A module's result echoes its arguments (``invocation``). The controller copies every result several times
(the worker's queue, the strategy, each callback, the host's variables): for a call that wrote the node's files,
the echo of their contents was most of that copying."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ansible.errors import AnsibleValueOmittedError


def role_vars(templar: Any, task_vars: Mapping[str, Any], role: str, names: Iterable[str],
              fallbacks: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{name: value}`` of the role's variables ``<role>_<name>`` that are set, rendered; one that renders to
    ``omit`` is left out. A name in ``fallbacks`` whose role variable is not set takes the variable named there
    (the collection's ``training_*`` setting that the role defaults to), when that one is set."""
    values = {}
    for name in names:
        key = "%s_%s" % (role, name)
        if key not in task_vars:
            key = (fallbacks or {}).get(name, "")
            if key not in task_vars:
                continue
        try:
            values[name] = templar.template(task_vars[key])
        except AnsibleValueOmittedError:
            continue
    return values


def without_invocation(answer: dict[str, Any]) -> dict[str, Any]:
    """The module's answer without the echo of its arguments."""
    answer.pop("invocation", None)
    return answer
