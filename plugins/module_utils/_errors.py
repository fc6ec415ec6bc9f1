# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Input errors that name the JSON path, the expected and the found value."""
from __future__ import annotations

import re
from typing import Any, Iterable, List, NamedTuple, Sequence

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class Problem(NamedTuple):
    path: str
    expected: str
    found: str

    def describe(self) -> str:
        return "%s: expected %s, found %s" % (self.path, self.expected, self.found)


class ClustervalError(Exception):
    """The collection's own errors, their base: an action turns one into a failed result with its message
    (``plugins/plugin_utils/_action.failed``), never a traceback."""


class ConfigError(ClustervalError):
    """One or several problems in a training config, its overrides or the plan arguments.

    `found` is shown as given when it is a string (callers describe it, quoting values with `show`).
    """

    def __init__(self, path: str, expected: str = "", found: Any = None,
                 problems: Sequence[Problem] = ()) -> None:
        described = found if isinstance(found, str) else show(found)
        self.problems: List[Problem] = list(problems) or [Problem(path, expected, described)]
        super().__init__(self.message)

    @classmethod
    def many(cls, problems: Iterable[Problem]) -> "ConfigError":
        collected = list(problems)
        first = collected[0]
        return cls(first.path, problems=collected)

    @property
    def path(self) -> str:
        return self.problems[0].path

    @property
    def message(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0].describe()
        lines = ["%d problems:" % len(self.problems)]
        lines.extend("  - " + problem.describe() for problem in self.problems)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.message


def show(value: Any) -> str:
    """A short, unambiguous rendering of a found value for error messages."""
    if isinstance(value, str) and value.startswith("<") and value.endswith(">") and " " not in value:
        return value
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def join_path(parent: str, key: Any) -> str:
    """Extends a JSON path; keys that are not plain words are written as ["key"]."""
    if isinstance(key, int):
        return "%s[%d]" % (parent, key)
    if _PLAIN_KEY.match(str(key)):
        return "%s.%s" % (parent, key) if parent else str(key)
    return '%s["%s"]' % (parent, key)
