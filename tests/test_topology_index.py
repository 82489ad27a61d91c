"""The incremental per-node index stays equal to a from-scratch rebuild, whatever the kernel does."""

from __future__ import annotations

import random

import pytest

from dlsched.core.cluster import ClusterSpec, NodeSpec
from dlsched.core.job import Job, JobState
from dlsched.core.topology import preset_topology
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.registry import make_placer, make_policy
from dlsched.sched.indexes import make_view
from dlsched.topology.index import TopologyIndex
from dlsched.topology.mapping import TopologyMapper

MODELS = ("alexnet", "caffenet", "googlenet", "resnet50")


def _random_placement(rng: random.Random, state: ClusterState, gpus: int):
    """A random exclusive placement of ``gpus`` GPUs on open nodes (None when there is no room)."""
    free = {n: [g for g in range(state.node_gpus[n]) if not state.node_mask[n] >> g & 1]
            for n in range(len(state.node_ids)) if state.is_open(n)}
    if sum(len(v) for v in free.values()) < gpus:
        return None
    out, left = [], gpus
    for node in rng.sample(sorted(free), len(free)):
        if not free[node] or not left:
            continue
        take = rng.sample(free[node], min(left, len(free[node]), rng.randint(1, left)))
        out.append((node, sum(1 << g for g in take)))
        left -= len(take)
    return tuple(out) if not left else None


@pytest.mark.parametrize("seed", range(4))
def test_index_equals_rebuild_after_random_transitions(seed):
    rng = random.Random(seed)
    cluster = ClusterSpec.from_vc_sizes({"v": 5}, 8, topology="dgx1")
    state = ClusterState(cluster, new_queue=ArrivalQueue)
    index = TopologyIndex()
    index.attach(state)
    state.add_observer(index)
    mapper = TopologyMapper(index)
    running: list[Job] = []
    now = 0.0
    for step in range(300):
        now += 1.0
        roll = rng.random()
        if roll < 0.55 or not running:
            gpus = rng.choice((1, 1, 2, 4, 8, 12))
            job = Job(f"j{step}", "v", gpus, now, 10.0, model_name=rng.choice(MODELS),
                      batch_size=rng.choice((1, 4, 16, 64)))
            placement = _random_placement(rng, state, gpus)
            if placement is None:
                continue
            state.submit(job, now)
            state.start(job, placement, now)
            running.append(job)
        elif roll < 0.85:
            state.finish(running.pop(rng.randrange(len(running))), now)
        elif roll < 0.93:
            state.preempt(running.pop(rng.randrange(len(running))), now)
        else:
            node = rng.randrange(len(state.node_ids))
            if state.node_cordoned[node]:
                state.uncordon(node, now)
            else:
                state.cordon(node, now)
        if step % 7 == 0:  # use the caches in between, so stale entries would show
            for node in range(len(state.node_ids)):
                mapper.node_bound(node)
        assert index.snapshot() == TopologyIndex.rebuilt(state).snapshot(), f"step {step}"


def test_index_follows_added_nodes_and_power():
    cluster = ClusterSpec.from_vc_sizes({"v": 2}, 8, topology="dgx1")
    state = ClusterState(cluster, new_queue=ArrivalQueue)
    index = TopologyIndex()
    index.attach(state)
    state.add_observer(index)
    before = index.signature(0)
    state.power_off(1, 1.0)
    assert index.signature(1)[1] == 0   # no free GPUs while off
    node = state.add_node(NodeSpec("v-extra", "v", 4, topology=preset_topology("minsky", 4)), 2.0)
    job = Job("j", "v", 2, 2.0, 5.0, model_name="alexnet", batch_size=1)
    state.submit(job, 2.0)
    state.start(job, ((node, 0b0011),), 2.0)
    assert index.snapshot() == TopologyIndex.rebuilt(state).snapshot()
    assert index.signature(0) == before and index.graphs[node].name == "minsky"


def test_placer_index_matches_rebuild_inside_the_engine():
    """The plug-in's index, fed by the engine, equals a rebuild before every start."""
    from dlsched.sim import SimConfig, Simulator

    jobs = [Job(f"j{i}", "v", [1, 2, 4, 8, 12][i % 5], float(i // 3), 20.0 + i % 11, model_name=MODELS[i % 4],
                batch_size=[1, 8, 64][i % 3]) for i in range(80)]
    policy = make_policy("fifo", "topo-aware-p", backfill=True)
    plugin = policy.placer.scorers[0][0]
    checks = []

    class Check:  # between transitions (a start is announced before the kernel books it)
        def started(self, job, vc, now):
            checks.append(plugin.index.snapshot() == TopologyIndex.rebuilt(plugin.index.state).snapshot())

    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 3}, 8, topology="dgx1"), policy,
                    SimConfig(check_invariants=True), observers=(Check(),))
    sim.run(jobs)
    assert checks and all(checks)
    assert all(j.state is JobState.FINISHED for j in jobs)


def test_placer_is_attached_by_the_driver_and_refuses_to_place_unattached():
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 2}, 8, topology="dgx1"), new_queue=ArrivalQueue)
    placer = make_placer("topo-aware")
    first = Job("a", "v", 4, 0.0, 1.0, model_name="alexnet", batch_size=1)
    state.submit(first, 0.0)
    with pytest.raises(RuntimeError, match="placement topo-aware: not attached"):
        placer.place(SchedulingView(state, oracle=False), state.vcs[0], first)  # no driver attached it
    view = make_view(state, placer)
    fit = placer.place(view, state.vcs[0], first)
    state.start(first, fit.placement, 0.0)
    plugin = placer.scorers[0][0]
    assert plugin.index.snapshot() == TopologyIndex.rebuilt(state).snapshot()
