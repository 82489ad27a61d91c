"""DRB mapping, the Eq. 2-5 utility, the policies and the speed model."""

from __future__ import annotations

import pytest

from dlsched.topology.drb import drb_map
from dlsched.topology.effects import bits, interference_factor, placement_factor, spread_penalty
from dlsched.topology.graph import machine_graph
from dlsched.topology.jobgraph import JobProfile, batch_class, comm_graph
from dlsched.topology.placer import BestFitPlacer, FCFSPlacer, TopoAwarePlacer
from dlsched.topology.state import ClusterState
from dlsched.topology.utility import best_pair_sum, utility

MINSKY = machine_graph("minsky")
DGX1 = machine_graph("dgx1")


def job(jid: str, gpus: int, batch: int = 1, model: str = "alexnet", min_u: float = 0.5) -> JobProfile:
    return JobProfile(jid, model, batch, gpus, 60.0, min_u)


def test_comm_graph_is_all_to_all_with_batch_weight():
    g = comm_graph(job("a", 4, batch=1))
    assert len(g.edges) == 6 and {w for *_, w in g.edges} == {4}
    assert {w for *_, w in comm_graph(job("b", 3, batch=128)).edges} == {1}
    assert [batch_class(b) for b in (1, 2, 4, 8, 16, 32, 64)] == [0, 0, 1, 1, 2, 2, 3]


def test_two_gpu_job_on_minsky_gets_an_nvlink_pair():
    mask = drb_map(job("a", 2), 0, MINSKY, 0b1111)
    assert bits(mask) == [0, 1]
    # with GPU0 busy the only NVLink pair left is 2-3
    assert bits(drb_map(job("a", 2), 0, MINSKY, 0b1110)) == [2, 3]


@pytest.mark.parametrize("free", [0xFF, 0xFE, 0xF7 & 0xFF])
def test_four_gpu_job_on_dgx1_lands_in_one_cube_face(free):
    mask = drb_map(job("a", 4), 0, DGX1, free)
    assert set(bits(mask)) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert mask & ~free == 0


def test_best_pair_sums():
    assert best_pair_sum(MINSKY, 2) == 1 and best_pair_sum(MINSKY, 4) == 2 + 4 * 42
    assert best_pair_sum(DGX1, 4) == 6


def test_utility_hand_computed_split_pair():
    # tiny AlexNet, 2 GPUs across the Minsky sockets, machine otherwise idle:
    # C = t_best / t = 1/42, I = 1, F = 1 socket needed / 2 spanned
    parts = utility(job("a", 2), ((0, 0b0101),), [MINSKY], [])
    assert parts.comm == pytest.approx(1 / 42)
    assert parts.interference == 1.0 and parts.fragmentation == 0.5
    assert parts.utility == pytest.approx((1 / 42 + 1 + 0.5) / 3)


def test_utility_hand_computed_interference():
    st = ClusterState([DGX1])
    st.allocate(job("x", 2), ((0, 0b0011),))
    # the new tiny 2-GPU job on the same socket: both slowed by 30 % (Fig. 6) -> I = 1/1.3
    parts = utility(job("y", 2), ((0, 0b1100),), st.graphs, st.co_runners([0]))
    assert parts.interference == pytest.approx(1 / 1.3)
    assert parts.utility == pytest.approx((1 + 1 / 1.3 + 1) / 3)
    # two single-GPU jobs on one socket: 5 % each (assumption documented in effects)
    st = ClusterState([MINSKY])
    st.allocate(job("x", 1), ((0, 0b0010),))
    parts = utility(job("y", 1), ((0, 0b0001),), st.graphs, st.co_runners([0]))
    assert parts.interference == pytest.approx(1 / 1.05)


def _nonuniform_minsky() -> ClusterState:
    st = ClusterState([MINSKY])
    st.allocate(job("job2", 1), ((0, 0b0010),))
    st.allocate(job("job1", 1, batch=4, model="googlenet"), ((0, 0b0100),))
    return st


def test_topo_aware_p_postpones_a_cross_socket_pair():
    st = _nonuniform_minsky()
    p = job("job3", 2, batch=4)
    d = TopoAwarePlacer(postpone=True).decide(st, p)
    assert d.postponed and not d.placed and d.utility < p.min_utility
    d2 = TopoAwarePlacer(postpone=False).decide(st, p)
    assert d2.placed and bits(d2.placement[0][1]) == [0, 3]
    # once a socket frees up, TOPO-AWARE-P places the job on the NVLink pair
    st.release("job2")
    d3 = TopoAwarePlacer(postpone=True).decide(st, p)
    assert d3.placed and bits(d3.placement[0][1]) == [0, 1] and d3.utility == pytest.approx(1.0)


def test_topo_aware_avoids_interference_and_prefers_fuller_machines():
    st = ClusterState([MINSKY, MINSKY])
    st.allocate(job("a", 1), ((0, 0b0001),))
    d = TopoAwarePlacer().decide(st, job("b", 1))
    assert d.placement == ((0, 0b0100),)       # same machine (fuller), other socket (no interference)


def test_baselines():
    st = ClusterState([MINSKY, MINSKY])
    st.allocate(job("a", 1), ((1, 0b0001),))
    assert FCFSPlacer().decide(st, job("b", 2)).placement == ((0, 0b0011),)
    # BF: fullest machine, then fullest socket first -- which splits the pair across sockets
    assert BestFitPlacer().decide(st, job("b", 2)).placement == ((1, 0b0110),)
    assert BestFitPlacer().decide(st, job("c", 1)).placement == ((1, 0b0010),)   # fullest socket first
    assert TopoAwarePlacer().decide(st, job("d", 4)).placement == ((0, 0b1111),)


def test_multi_node_fallback():
    st = ClusterState([MINSKY, MINSKY])
    p = JobProfile("big", "alexnet", 64, 6, 60.0, 0.1, single_node=False)
    d = TopoAwarePlacer().decide(st, p)
    assert d.placed and sum(mask.bit_count() for _, mask in d.placement) == 6
    assert not TopoAwarePlacer().decide(st, job("big2", 6)).placed   # single-node by default


def test_speed_model_figures():
    assert spread_penalty("alexnet", 2) == pytest.approx(1.30)
    assert spread_penalty("alexnet", 1, nvlink=False) == pytest.approx(1.24)
    assert spread_penalty("alexnet", 4) == pytest.approx(1.25)
    assert spread_penalty("alexnet", 16) == spread_penalty("alexnet", 128) == 1.0
    assert spread_penalty("googlenet", 1) < 1.1
    p = job("a", 2, batch=2)
    assert placement_factor(p, ((0, 0b0011),), [MINSKY]) == 1.0
    assert placement_factor(p, ((0, 0b0101),), [MINSKY]) == pytest.approx(1.30)
    tiny, big = job("t", 2, 1), job("b", 2, 128)
    assert interference_factor(tiny, [tiny]) == pytest.approx(1.30)
    assert interference_factor(tiny, [big]) == pytest.approx(1.24)
    assert interference_factor(big, [tiny]) < 1.01
    assert interference_factor(tiny, [tiny] * 5) == pytest.approx(1.60)   # capped
