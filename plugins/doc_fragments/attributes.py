# Copyright: clusterval.training contributors
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations


class ModuleDocFragment:
    """What every module of the collection shares: no diff, idempotent, the authors."""

    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: none
  idempotent:
    support: full
author:
  - clusterval.training contributors
"""
