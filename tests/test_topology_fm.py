"""Fiduccia-Mattheyses bisection on small hand-checked graphs."""

from __future__ import annotations

from dlsched.topology.drb import bisection_tree
from dlsched.topology.effects import bits
from dlsched.topology.fm import cut_size, fm_bisect
from dlsched.topology.graph import machine_graph

TRIANGLES = [(0, 1, 1), (1, 2, 1), (0, 2, 1), (3, 4, 1), (4, 5, 1), (3, 5, 1), (2, 3, 1)]


def test_two_triangles_from_a_bad_start():
    res = fm_bisect(6, TRIANGLES, initial=[0, 1, 0, 1, 0, 1])
    assert cut_size(TRIANGLES, [0, 1, 0, 1, 0, 1]) == 5
    assert res.cut == 1 and res.weights == (3, 3)
    assert {v for v in range(6) if res.side[v] == 0} in ({0, 1, 2}, {3, 4, 5})


def test_weighted_cycle_keeps_heavy_edges():
    edges = [(0, 1, 5), (1, 2, 1), (2, 3, 5), (3, 0, 1)]
    res = fm_bisect(4, edges, initial=[0, 1, 0, 1])
    assert res.cut == 2 and res.weights == (2, 2)
    assert res.side[0] == res.side[1] and res.side[2] == res.side[3]


def test_balance_counts_only_weighted_vertices():
    # a star centre of weight 0 joined to 4 leaves: balance is over the leaves only
    edges = [(0, i, 1) for i in range(1, 5)]
    res = fm_bisect(5, edges, vweight=[0, 1, 1, 1, 1])
    assert res.weights == (2, 2) and res.cut == 2


def test_odd_total_allows_one_off():
    edges = [(0, 1, 3), (1, 2, 1)]
    res = fm_bisect(3, edges)
    assert sorted(res.weights) == [1, 2] and res.cut == 1


def test_machine_bisections_follow_sockets():
    t = bisection_tree(machine_graph("dgx1"), 0xFF)
    assert [bits(c.mask) for c in t.children] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    t = bisection_tree(machine_graph("minsky"), 0xF)
    assert [bits(c.mask) for c in t.children] == [[0, 1], [2, 3]]
    t = bisection_tree(machine_graph("pcie"), 0xFF)
    assert [bits(c.mask) for c in t.children[0].children] == [[0, 1], [2, 3]]   # PCIe switch pairs
