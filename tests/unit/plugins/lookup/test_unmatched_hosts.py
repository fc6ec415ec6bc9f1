"""The lookup unmatched_hosts: each part of a host pattern matched alone, with Ansible's own matching."""
import pytest
from ansible.parsing.dataloader import DataLoader

from ansible_collections.clusterval.training.plugins.lookup.unmatched_hosts import LookupModule

GROUPS = {"all": ["node1", "node2", "node3", "node4", "gpu-a"], "ungrouped": [],
          "training_nodes": ["node1", "node2", "node3", "node4"], "rack1": ["node1", "node2"], "spare": []}


def unmatched(pattern):
    lookup = LookupModule(loader=DataLoader())
    return lookup.run([pattern], variables={"groups": GROUPS})


@pytest.mark.parametrize("pattern", ["training_nodes", "node1:node2", "node1,node2", "rack1:&training_nodes",
                                     "training_nodes:!node3", "node*", "~node[0-9]+", "training_nodes[0:1]",
                                     "all", "localhost"])
def test_every_part_that_names_hosts_passes(pattern):
    assert unmatched(pattern) == []


def test_a_misspelt_host_is_named_with_what_it_may_have_meant():
    [problem] = unmatched("node1:node9")
    assert problem.startswith("node9 matches no host or group of the inventory (did you mean node")


def test_a_misspelt_exclusion_is_named_too_since_it_would_grow_the_run():
    [problem] = unmatched("training_nodes:!ndoe3")
    assert problem.startswith("ndoe3 matches no host or group of the inventory (did you mean node3,")


def test_a_wildcard_or_regex_that_matches_nothing_is_named():
    assert unmatched("gpu-b*:~^rack9$") == [
        "gpu-b* matches no host or group of the inventory (did you mean gpu-a?)",
        "~^rack9$ matches no host or group of the inventory (did you mean rack1?)"]


def test_an_empty_group_is_said_to_be_empty():
    assert unmatched("rack1:spare") == ["spare is a group of the inventory with no hosts"]
