"""Placement stages: the per-node pipeline agrees with the exact bucket fast paths, weighted scorers
combine, filters and permits produce their status codes, and the registry resolves names."""

from __future__ import annotations

import random

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel import ClusterState, Fit, SchedulingView, Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.registry import (
    FAILURE_MODELS,
    PLACERS,
    SPEED_MODELS,
    make_failure_model,
    make_placer,
    make_speed_model,
)
from dlsched.sched.framework import PlacementPipeline
from dlsched.sched.placers.best_fit import BestFitPlacer
from dlsched.sched.placers.first_fit import FirstFitPlacer
from dlsched.sched.placers.spread import SpreadPlacer


def random_state(rng: random.Random, nodes: int = 6, gpus: int = 8):
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": nodes}, gpus), new_queue=ArrivalQueue)
    for node in range(nodes):
        used = rng.randrange(gpus + 1)
        mask = sum(1 << g for g in rng.sample(range(gpus), used))
        if mask:
            job = Job(f"f{node}", "v", used, 0, 1)
            state.submit(job, 0)
            state.start(job, ((node, mask),), 0)
    return state, state.vcs[0], SchedulingView(state, oracle=False)


class NoFast:
    """A scorer seen through the per-node stages only (its fast path hidden)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name

    def score(self, view, vc, job, node):
        return self.inner.score(view, vc, job, node)


@pytest.mark.parametrize("scorer", [BestFitPlacer, FirstFitPlacer, SpreadPlacer])
def test_per_node_stages_choose_the_same_node_as_the_fast_path(scorer):
    rng = random.Random(7)
    for _ in range(200):
        state, vc, view = random_state(rng)
        job = Job("j", "v", rng.randint(1, 8), 0, 1)
        fast = scorer().fast_place(view, vc, job)
        slow = PlacementPipeline([(NoFast(scorer()), 1.0)]).place(view, vc, job)
        assert fast.status == slow.status
        if fast.fits and len(fast.placement) == 1:
            assert slow.placement == fast.placement
        elif fast.fits:  # spanning nodes: same GPU count, only free GPUs (order may differ for first-fit)
            assert sum(m.bit_count() for _, m in slow.placement) == job.gpus
            assert all(m & state.node_mask[n] == 0 for n, m in slow.placement)


def test_weighted_scorers_combine():
    # node 0: 3 free, node 1: 8 free, node 2: 2 free
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 3}, 8), new_queue=ArrivalQueue)
    for node, used in ((0, 5), (2, 6)):
        job = Job(f"f{node}", "v", used, 0, 1)
        state.submit(job, 0)
        state.start(job, ((node, (1 << used) - 1),), 0)
    vc, view = state.vcs[0], SchedulingView(state, oracle=False)
    job = Job("j", "v", 2, 0, 1)
    assert make_placer("best-fit").place(view, vc, job).placement[0][0] == 2
    assert make_placer("spread").place(view, vc, job).placement[0][0] == 1
    # per node 0/1/2: best-fit scores 0.875/0.25/1, spread 0.375/1/0.25 -> 3:1 picks node 2, 1:3 node 1
    assert make_placer("best-fit:3,spread:1").place(view, vc, job).placement[0][0] == 2
    assert make_placer("best-fit:1,spread:3").place(view, vc, job).placement[0][0] == 1
    assert make_placer("best-fit:1,spread:3").name == "best-fit+spread:3"


def test_filters_give_reasons_and_permits_postpone():
    state, vc, view = random_state(random.Random(1), nodes=3)

    class NoNode:
        name = "no-node"

        def filter(self, view, vc, job, node):
            return "reserved for maintenance"

    fit = PlacementPipeline([(BestFitPlacer(), 1.0)], filters=[NoNode()]).place(view, vc, Job("j", "v", 1, 0, 1))
    assert fit.status is Status.UNSCHEDULABLE and "reserved for maintenance" in fit.reason

    class Wait:
        name = "wait"

        def score(self, view, vc, job, node):
            return 0.5

        def permit(self, view, vc, job, fit):
            return Fit(Status.POSTPONE, fit.placement, "utility too low", fit.score)

    fit = PlacementPipeline([(Wait(), 1.0)]).place(view, vc, Job("j", "v", 1, 0, 1))
    assert fit.status is Status.POSTPONE and fit.placement is not None and fit.reason == "utility too low"


def test_wide_jobs_span_nodes_through_the_stages():
    state, vc, view = random_state(random.Random(3), nodes=4)
    need = min(vc.free, 12)
    fit = PlacementPipeline([(NoFast(BestFitPlacer()), 1.0)]).place(view, vc, Job("w", "v", need, 0, 1))
    if need > 8:
        assert fit.fits and sum(m.bit_count() for _, m in fit.placement) == need
        for node, mask in fit.placement:
            assert mask & state.node_mask[node] == 0


def test_registry_names_and_errors():
    assert set(PLACERS) >= {"consolidate", "best-fit", "first-fit", "spread", "topo-aware", "topo-aware-p"}
    assert make_speed_model("none", ClusterSpec.from_vc_sizes({"v": 1})) is None
    assert make_speed_model("time-sliced", ClusterSpec.from_vc_sizes({"v": 1})).scope == "gpu"
    assert make_failure_model("oom", delay=5).delay == 5
    assert "oom" in FAILURE_MODELS and "time-sliced" in SPEED_MODELS
    for bad, match in (("nope", "unknown placement"), ("best-fit:x", "must be a number"),
                       ("best-fit:0", "must be > 0")):
        with pytest.raises(ValueError, match=match):
            make_placer(bad)
    with pytest.raises(ValueError, match="unknown speed model"):
        make_speed_model("warp", ClusterSpec.from_vc_sizes({"v": 1}))


def test_registry_imports_a_policy_only_when_it_is_used() -> None:
    import subprocess
    import sys

    code = ("import sys; from dlsched.registry import POLICIES, PLACERS, make_policy; "
            "assert 'horus' in POLICIES and 'topo-aware' in PLACERS and len(list(POLICIES)) == len(POLICIES); "
            "make_policy('fifo'); "
            "print(sorted(m for m in sys.modules if m.startswith(('dlsched.sched.policies.horus', 'dlsched.sched.pairing_base', "
            "'dlsched.sched.placers.topo', 'dlsched.sched.policies.fifo')))); "
            "print(POLICIES['horus'].__name__, 'dlsched.sched.policies.horus' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["['dlsched.sched.policies.fifo']", "HorusPolicy True"]
