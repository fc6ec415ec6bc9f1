# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The launchers, one row each, and the one list of names that ``training_launcher`` is checked against.

A launcher is what starts the run's containers on the nodes, follows them and removes them: Docker over SSH
(``_launch_docker`` on the controller, ``_docker.Engine`` on each node) or one Slurm job from a login host
(``_launch_slurm``, ``_slurm_step`` on each node, whose containers go through the same ``_docker.Engine``). The run,
its lease, its status streams and its verdict are the same under both; the playbook asks the row, never the
launcher's name, which roles run (filter ``clusterval.training.launcher``). Adding a launcher is its module and
its row here.
"""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional

from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, show

SSH = "ssh"
SLURM = "slurm"
DEFAULT = SSH


class Launcher(NamedTuple):
    name: str                   # training_launcher's value
    module: str                 # its module in plugins/module_utils/
    label: str
    login_group: Optional[str]  # the inventory group whose first host runs its commands; None: each node over SSH

    @property
    def over_ssh(self) -> bool:
        """Each node is reached over SSH: preflight, the fabric gate, the shipment, the container, the watch of
        the train role and the teardown role run on the nodes; else the launcher's role runs on the login host."""
        return self.login_group is None

    def as_dict(self) -> Dict[str, Any]:
        return dict(self._asdict(), over_ssh=self.over_ssh)


LAUNCHERS: Dict[str, Launcher] = {
    SSH: Launcher(SSH, "_launch_docker", "Docker over SSH on every node", None),
    SLURM: Launcher(SLURM, "_launch_slurm", "one Slurm job from a login host", "slurm_login"),
}
NAMES = tuple(LAUNCHERS)


def launcher(name: Any) -> Launcher:
    """The row of ``training_launcher``; any other value is an error naming the launchers."""
    if isinstance(name, str) and name in LAUNCHERS:
        return LAUNCHERS[name]
    raise ConfigError("training_launcher", "one of %s" % ", ".join(NAMES), show(name))
