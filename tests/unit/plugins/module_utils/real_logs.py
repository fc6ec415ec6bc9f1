"""The real log excerpts of tests/fixtures/real-logs (SOURCES.md there says where each came from)."""
from __future__ import annotations

import os
import re
from typing import Dict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SYNTHETIC_LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
REAL_LOGS = os.path.join(REPO, "tests", "fixtures", "real-logs")
_EXCERPT = re.compile(r"^=== \[([A-Z]{2}-\d+)\] ===$.*?^--- BEGIN VERBATIM ---\n(.*?)^--- END VERBATIM ---$",
                      re.M | re.S)


def excerpts(name: str) -> Dict[str, str]:
    """Excerpt id (MX-05, ...) -> its verbatim text, header and notes left out."""
    with open(os.path.join(REAL_LOGS, name), encoding="utf-8") as handle:
        return {m.group(1): m.group(2) for m in _EXCERPT.finditer(handle.read())}


# the name the tests of the fixtures first kept in this repository use
repo_excerpts = excerpts
