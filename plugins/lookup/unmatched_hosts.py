# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Lookup clusterval.training.unmatched_hosts: the parts of a host pattern that match no host of the inventory."""
from __future__ import annotations

DOCUMENTATION = r"""
name: unmatched_hosts
version_added: 0.2.0
short_description: The parts of a host pattern that match no host of the inventory
description:
  - Splits a host pattern as Ansible does (V(node1:node2), V(gpu,!node3), V(&rack1), V(node*), V(~node[0-9]+),
    V(gpus[0:3])) and matches each part alone against the inventory, with Ansible's own matching.
  - Returns one line per part that matches no host, with the inventory names it may have meant. Ansible itself
    only warns about such a part and runs on the hosts the others match, so a misspelt host shrinks a run
    (V(node1:node9) trains on node1 alone) and a misspelt exclusion grows it (V(all:!ndoe3) keeps node3 in).
  - The playbooks refuse a pattern with any such part before a node is touched.
options:
  _terms:
    description: The host pattern (the value of C(training_hosts)).
    type: str
    required: true
notes:
  - Reads the inventory through the C(groups) variable, as P(ansible.builtin.inventory_hostnames#lookup) does.
author:
  - clusterval.training contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Every part of training_hosts names a host of the inventory
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "training_hosts: {{ problems | join('; ') }}"
  vars:
    problems: "{{ query('clusterval.training.unmatched_hosts', training_hosts | default('training_nodes')) }}"
"""

RETURN = r"""
_raw:
  description:
    - One line per part of the pattern that matches no host, for example
      C(node9 matches no host or group of the inventory (did you mean node1, node2?)). Empty when every part matches.
  type: list
  elements: str
"""

import difflib

from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager, split_host_pattern
from ansible.plugins.lookup import LookupBase

SUGGESTIONS = 3


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        groups = (variables or {}).get("groups", {})
        manager = self._inventory(groups)
        names = sorted(set(groups) | {host for hosts in groups.values() for host in hosts})
        problems = []
        for pattern in terms:
            for part in split_host_pattern(pattern):
                name = part.lstrip("!&")
                if name and not self._matches(manager, name):
                    problems.append(self._problem(name, names, groups))
        return problems

    def _inventory(self, groups):
        manager = InventoryManager(self._loader, parse=False)
        for group, hosts in groups.items():
            manager.add_group(group)
            for host in hosts:
                manager.add_host(host, group=group)
        return manager

    @staticmethod
    def _matches(manager, name):
        try:
            return bool(manager.get_hosts(pattern=name))
        except AnsibleError:
            return False

    @staticmethod
    def _problem(name, names, groups):
        if name in groups:
            return "%s is a group of the inventory with no hosts" % name
        close = difflib.get_close_matches(name, names, n=SUGGESTIONS, cutoff=0.5)
        hint = " (did you mean %s?)" % ", ".join(close) if close else ""
        return "%s matches no host or group of the inventory%s" % (name, hint)
