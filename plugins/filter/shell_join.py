# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter clusterval.training.shell_join: argv list -> one shell-quoted command line."""
from __future__ import annotations

import shlex

from ansible.errors import AnsibleFilterError


def shell_join(argv):
    if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("shell_join: expected a list of arguments, found %s" % type(argv).__name__)
    words = []
    for index, arg in enumerate(argv):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise AnsibleFilterError("shell_join: argument %d: expected a string or number, found %s"
                                     % (index, type(arg).__name__))
        if "\0" in str(arg):
            raise AnsibleFilterError("shell_join: argument %d contains NUL" % index)
        words.append(shlex.quote(str(arg)))
    return " ".join(words)


class FilterModule:
    def filters(self):
        return {"shell_join": shell_join}
