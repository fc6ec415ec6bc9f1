# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Where a relative ``training_config`` is found: the working directory, the playbook's directory, then the
collection's own ``configs/`` (so ``configs/jax/...json`` or ``jax/...json`` works from an installed
collection). The plan says which file was used."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, show

CONFIGS = "configs"


def config_candidates(path: str, cwd: str, basedir: Optional[str], collection_root: Optional[str]
                      ) -> List[Tuple[str, str]]:
    """(file, where) in the order they are tried."""
    if os.path.isabs(path):
        return [(path, "the absolute path given")]
    candidates = [(os.path.join(cwd, path), "the working directory")]
    if basedir and os.path.abspath(basedir) != os.path.abspath(cwd):
        candidates.append((os.path.join(basedir, path), "the playbook's directory"))
    if collection_root:
        configs = os.path.join(collection_root, CONFIGS)
        first = path.split(os.sep, 1)[0]
        inside = os.path.join(collection_root, path) if first == CONFIGS else os.path.join(configs, path)
        candidates.append((inside, "the collection's configs/ (%s)" % configs))
    return candidates


def config_file(path: str, cwd: str, basedir: Optional[str], collection_root: Optional[str]) -> Tuple[str, str]:
    """The config file to read and where it was found; ConfigError naming every place tried when none has it."""
    candidates = config_candidates(path, cwd, basedir, collection_root)
    for candidate, where in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate), "found %s %s" % ("as" if os.path.isabs(path) else "in", where)
    raise ConfigError("training_config", "a config file (looked for %s)"
                      % "; ".join(os.path.abspath(candidate) for candidate, dummy in candidates), show(path))
