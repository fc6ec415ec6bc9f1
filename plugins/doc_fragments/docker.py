# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations


class ModuleDocFragment:
    """The Docker daemon on the node: the one endpoint option of the modules that talk to it for the launcher."""

    DOCUMENTATION = r"""
options:
  docker_host:
    description:
      - The node's Docker daemon, a unix socket as C(unix:///path) or a path (community.docker's C(docker_host)).
      - The collection's C(training_docker_host) sets it for the roles.
    type: str
    default: unix:///var/run/docker.sock
"""
