"""A clone without the project's shared folder beside it runs every test: no test reads ../shared.

The tests' data lives in tests/fixtures/ (each folder says where it came from); this scans every test source for
a path into the shared folder next to the repository.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
# "../shared", os.path.join(REPO, "..", "shared"), os.path.join(REPO, os.pardir, "shared"),
# Path(...).parent / "shared", Path(...).parents[3] / "shared"
SHARED_PATH = re.compile(r"""\.\./shared\b|(?:["']\.\.["']|os\.pardir)\s*,\s*["']shared["']|"""
                         r"""\.parents?(?:\[\d+\])?\s*/\s*["']shared["']""")


def reads_of_shared(text: str) -> list[str]:
    return [match.group(0) for match in SHARED_PATH.finditer(text)]


@pytest.mark.parametrize("source", [
    'REAL_LOGS = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "real-logs"))',
    'os.path.join(REPO, os.pardir, "shared")',
    'Path(__file__).resolve().parents[4] / "shared" / "fixtures"',
    'open("../shared/fixtures/real-logs/megatron_real.txt")',
])
def test_a_read_of_the_shared_folder_is_seen(source):
    assert reads_of_shared(source)


def test_no_test_reads_the_shared_folder_beside_the_repository():
    this = Path(__file__).resolve()
    found = {str(path.relative_to(TESTS)): reads_of_shared(path.read_text(encoding="utf-8"))
             for path in sorted(TESTS.rglob("*.py")) if path.resolve() != this}
    assert {path: reads for path, reads in found.items() if reads} == {}, \
        "copy what the test reads into tests/fixtures/ (with its source) and read it there"
