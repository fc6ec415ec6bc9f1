"""Access to the real log excerpts in <repo>/../shared/fixtures/real-logs (skipped when absent)."""
from __future__ import annotations

import os
import re
from typing import Dict

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
REAL_LOGS = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "real-logs"))
SYNTHETIC_LOGS = os.path.join(REPO, "tests", "fixtures", "logs")
REPO_REAL_LOGS = os.path.join(REPO, "tests", "fixtures", "real-logs")
_EXCERPT = re.compile(r"^=== \[([A-Z]{2}-\d+)\] ===$.*?^--- BEGIN VERBATIM ---\n(.*?)^--- END VERBATIM ---$",
                      re.M | re.S)


def real_log_path(name: str) -> str:
    path = os.path.join(REAL_LOGS, name)
    if not os.path.exists(path):
        pytest.skip("real log fixtures not found at %s" % REAL_LOGS)
    return path


def excerpts(name: str) -> Dict[str, str]:
    """Excerpt id (MX-05, ...) -> its verbatim text, header and notes left out."""
    with open(real_log_path(name), encoding="utf-8") as handle:
        return {m.group(1): m.group(2) for m in _EXCERPT.finditer(handle.read())}


def repo_excerpts(name: str) -> Dict[str, str]:
    """Excerpts of this repository's own real-log fixtures (tests/fixtures/real-logs, always present)."""
    with open(os.path.join(REPO_REAL_LOGS, name), encoding="utf-8") as handle:
        return {m.group(1): m.group(2) for m in _EXCERPT.finditer(handle.read())}
