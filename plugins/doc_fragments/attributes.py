# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations


class ModuleDocFragment:
    """What every module of the collection shares: the attributes' meanings, no diff, idempotent, the authors.

    A module sets each attribute's C(support) and says what is particular to it in C(details);
    C(description) is the attribute's general meaning and comes from here.
    """

    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying the target;
      if not supported, the action is skipped.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in
      diff mode.
    support: none
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates
        no change.
      - This assumes that the system controlled or queried by the module has not changed in a relevant way.
    support: full
  action_group:
    description: Use C(group/clusterval.training.training) in C(module_defaults) to set defaults for this
      module.
    support: full
    membership:
      - clusterval.training.training
author:
  - clusterval.training contributors (!UNKNOWN)
"""

    # For the modules that are done by an action plugin of the same name, on the controller.
    ACTION = r"""
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed
      on the controller.
    support: full
"""
