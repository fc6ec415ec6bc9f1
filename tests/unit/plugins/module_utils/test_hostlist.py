from __future__ import annotations

from ansible_collections.clusterval.training.plugins.module_utils._hostlist import (
    compact_hosts, names_with_more, natural_key)


def test_ranges_of_zero_padded_names():
    hosts = ["node%03d" % i for i in range(1, 41)] + ["node077"]
    assert compact_hosts(reversed(hosts)) == "node[001-040,077]"


def test_unpadded_numbers_of_different_lengths_are_one_group():
    assert compact_hosts(["node10", "node9", "node11", "node2"]) == "node[2,9-11]"


def test_a_single_host_and_names_without_a_number():
    assert compact_hosts(["node3"]) == "node3"
    assert compact_hosts(["login", "node1", "node2"]) == "login, node[1-2]"


def test_text_after_the_number_and_several_groups():
    hosts = ["gpu-a01.dc1", "gpu-a02.dc1", "gpu-b07.dc2", "gpu-a03.dc1"]
    assert compact_hosts(hosts) == "gpu-a[01-03].dc1, gpu-b07.dc2"


def test_padded_group_takes_numbers_of_its_width_without_a_leading_zero():
    assert compact_hosts(["node%03d" % i for i in range(95, 106)]) == "node[095-105]"


def test_duplicates_count_once():
    assert compact_hosts(["node1", "node1", "node2"]) == "node[1-2]"


def test_long_lists_are_cut_with_the_count_of_the_rest():
    hosts = ["node%03d" % i for i in range(1, 513, 2)]
    text = compact_hosts(hosts, 40)
    assert len(text) <= 40 and text.startswith("node[001,003,")
    shown = text[text.index("[") + 1:text.index("]")].split(",")
    assert text.endswith(" (+%d more)" % (256 - len(shown)))


def test_the_first_group_shows_even_when_longer_than_the_limit():
    assert compact_hosts(["a-very-long-host-name-1"], 5) == "a-very-long-host-name-1"
    assert compact_hosts(["a-very-long-host-name-1", "other"], 5) == "a-very-long-host-name-1 (+1 more)"


def test_names_with_more_keeps_the_order():
    assert names_with_more(["node7", "node1", "node9"]) == "node7, node1 (+1 more)"
    assert names_with_more(["node7"]) == "node7"


def test_natural_order():
    assert sorted(["node10", "node9", "node1"], key=natural_key) == ["node1", "node9", "node10"]
