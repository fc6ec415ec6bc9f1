# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The cause line of a Python failure: the exception a traceback ends with, not its header.

Launchers prefix every line of a rank: torchrun ``[rank13]: `` or ``[default0]:``, Primus
``#[Primus] Error: ``, MPI ``[1,0]<stderr>:``. ``exception_line`` strips those and returns the
``SomethingError: message`` line (module path kept, as Python prints it), or None.
"""
from __future__ import annotations

import re
from typing import Optional

_PREFIX = re.compile(r"^(?:\s*(?:\[(?:rank|default)?\d+\]:|\[\d+,\d+\]<std(?:out|err)>:|#?\[Primus\] Error:|#))+\s*")
_EXCEPTION = re.compile(
    r"^((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Exhausted))(?::(?:\s.*)?)?$")
TRACEBACK_HEADER = "Traceback (most recent call last)"
# A traceback's own lines: frames, the code they quote, the chaining notes.
_FRAME = re.compile(r'^(?:File "|\s|During handling of|The above exception|\^|~|Traceback \(most recent)')


def without_prefix(text: str) -> str:
    return _PREFIX.sub("", text.rstrip(), count=1)


def exception_line(text: str) -> Optional[str]:
    """``jaxlib.xla_extension.XlaRuntimeError: INTERNAL: ...`` from any prefixed line, else None."""
    line = without_prefix(text)
    match = _EXCEPTION.match(line)
    return line if match else None


def is_traceback_header(text: str) -> bool:
    return TRACEBACK_HEADER in text


def inside_traceback(text: str) -> bool:
    """A frame, quoted code or chaining note of a traceback (after the launcher prefix)."""
    line = without_prefix(text)
    return not line or bool(_FRAME.match(line)) or bool(_FRAME.match(text))
