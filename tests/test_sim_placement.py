"""Placers choose exactly the nodes and GPUs their rules say."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.registry import PLACERS, make_placer
from dlsched.sched.indexes import make_view


def occupied(free_per_node: list[int], per_node: int = 8):
    """A one-VC state whose nodes have the given free GPU counts."""
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": len(free_per_node)}, per_node), new_queue=ArrivalQueue)
    vc = state.vcs[0]
    for i, free in enumerate(free_per_node):
        used = per_node - free
        if used:
            filler = Job(f"fill{i}", "v", used, 0, 1)
            state.submit(filler, 0)
            state.start(filler, ((i, (1 << used) - 1),), 0)
    return state, vc, SchedulingView(state, oracle=False)


def nodes_of(placement):
    return [(node, mask.bit_count()) for node, mask in placement]


def placed(placer, view, vc, job):
    """The placement when the pipeline says FITS, else None."""
    fit = placer.place(view, vc, job)
    return fit.placement if fit.fits else None


def test_consolidate_best_fit_single_node():
    state, vc, view = occupied([8, 3, 2, 5])
    p = placed(make_placer("consolidate"), view, vc, Job("j", "v", 2, 0, 1))
    assert nodes_of(p) == [(2, 2)]
    assert p[0][1] == 0b11000000  # the node's free GPUs are 6 and 7
    p = placed(make_placer("consolidate"), view, vc, Job("j", "v", 4, 0, 1))
    assert nodes_of(p) == [(3, 4)]


def test_consolidate_whole_nodes_and_partial():
    state, vc, view = occupied([8, 3, 8, 8, 6])
    placer = make_placer("consolidate")
    assert nodes_of(placed(placer, view, vc, Job("j", "v", 16, 0, 1))) == [(0, 8), (2, 8)]
    # 10 GPUs: one whole node (lowest), remainder on the next node by most free: another whole node
    assert nodes_of(placed(placer, view, vc, Job("j", "v", 10, 0, 1))) == [(0, 8), (2, 2)]
    # 26 GPUs: three whole nodes + 2 on the fullest remaining (node 4 with 6 free)
    assert nodes_of(placed(placer, view, vc, Job("j", "v", 26, 0, 1))) == [(0, 8), (2, 8), (3, 8), (4, 2)]
    # 32 GPUs need four whole nodes: only three exist, although 33 GPUs are free
    assert placed(placer, view, vc, Job("j", "v", 32, 0, 1)) is None


def test_consolidate_partial_fails_like_the_reference():
    state, vc, view = occupied([8, 1, 1, 1])
    # 9 GPUs: one whole node, then the fullest remaining node has 1 free: fits
    assert nodes_of(placed(make_placer("consolidate"), view, vc, Job("j", "v", 9, 0, 1))) == [(0, 8), (1, 1)]
    state, vc, view = occupied([8, 1, 1, 1])
    # 10 GPUs: 11 free in total, but the remainder (2) fits no single node: wait
    assert placed(make_placer("consolidate"), view, vc, Job("j", "v", 10, 0, 1)) is None


def test_first_fit_best_fit_spread():
    state, vc, view = occupied([3, 8, 2, 5])
    job = Job("j", "v", 2, 0, 1)
    assert nodes_of(placed(make_placer("first-fit"), view, vc, job)) == [(0, 2)]
    assert nodes_of(placed(make_placer("best-fit"), view, vc, job)) == [(2, 2)]
    assert nodes_of(placed(make_placer("spread"), view, vc, job)) == [(1, 2)]
    wide = Job("w", "v", 12, 0, 1)
    assert nodes_of(placed(make_placer("first-fit"), view, vc, wide)) == [(0, 3), (1, 8), (2, 1)]
    assert nodes_of(placed(make_placer("best-fit"), view, vc, wide)) == [(1, 8), (0, 3), (2, 1)]
    assert nodes_of(placed(make_placer("spread"), view, vc, wide)) == [(1, 8), (3, 4)]


@pytest.mark.parametrize("name", sorted(PLACERS))
def test_every_placer_respects_capacity(name):
    state, vc, _ = occupied([1, 2, 0])
    placer = make_placer(name)
    view = make_view(state, placer)   # as a driver: its observer plug-ins attached, indexes made
    assert placed(placer, view, vc, Job("j", "v", 4, 0, 1)) is None
    p = placed(placer, view, vc, Job("j", "v", 3, 0, 1))
    if name in ("consolidate", "topo-aware", "topo-aware-p", "first-fit-node", "socket-best-fit"):
        assert p is None  # a job that fits one node is never split across nodes
        return
    assert p is not None and sum(m.bit_count() for _, m in p) == 3
    for node, mask in p:
        assert mask & state.node_mask[node] == 0


def test_unknown_placer():
    with pytest.raises(ValueError, match="unknown placement"):
        make_placer("nope")


def test_topology_aware_placers_plug_into_the_engine():
    from dlsched.core.topology import Link, dgx1
    from dlsched.registry import make_policy
    from dlsched.sim import SimConfig, Simulator

    state, vc, _ = occupied([8, 8])
    placer = make_placer("topo-aware")
    view = make_view(state, placer)
    p = placed(placer, view, vc, Job("four", "v", 4, 0, 1, model_name="alexnet", batch_size=1))
    assert len(p) == 1 and p[0][1] in (0x0F, 0xF0)  # one DGX-1 cube face: all pairs NVLink
    p = placed(placer, view, vc, Job("two", "v", 2, 0, 1, model_name="alexnet", batch_size=1))
    a, b = [g for g in range(8) if p[0][1] >> g & 1]
    assert dgx1().link(a, b) is Link.NVLINK
    jobs = [Job(f"j{i}", "v", [1, 2, 4, 8, 12][i % 5], float(i), 30.0 + i % 7, model_name="alexnet",
                batch_size=[1, 16, 64][i % 3]) for i in range(60)]
    from dlsched.models.topology import TopologySpeed

    cluster = ClusterSpec.from_vc_sizes({"v": 2}, topology="dgx1")
    for name in ("topo-aware", "topo-aware-p"):
        for backfill in (False, True):
            policy = make_policy("fifo", name, backfill=backfill)
            sim = Simulator(cluster, policy, SimConfig(check_invariants=True), speed_model=TopologySpeed(cluster))
            result = sim.run(jobs)
            assert policy.placer.scorers[0][0].index.state is sim.state   # the engine attached its index
            assert all(j.end_time >= j.start_time + true_duration(j) - 1e-9 for j in jobs)
            assert result.extra["avg_slowdown"] >= 1.0
