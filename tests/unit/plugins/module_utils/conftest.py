"""Every test gets its own node run index (never the user's ~/.cache)."""
import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _runlock


@pytest.fixture(autouse=True)
def run_index(tmp_path, monkeypatch):
    directory = tmp_path / "run-index"
    monkeypatch.setattr(_runlock, "RUN_INDEX_DIR", str(directory))
    return directory
