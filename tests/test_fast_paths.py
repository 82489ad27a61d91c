"""Every speed shortcut against its general path (dlsched.sim.reference): random small traces
(hypothesis) and a slice of the real Philly trace when ../shared is present, under every policy
and placement shape that takes a shortcut. Each job must get the same starts, placements, stops
and finish time either way."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.sched.framework import PlacementPipeline
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.reference import SHORTCUTS, reference_paths

# (policy, placement, max jobs per GPU, time-sliced speed model, policy options, jobs fit one node)
CONFIGS = [
    ("fifo", None, 1, False, {}, False),             # exclusive start/finish, inline Start
    ("fifo", None, 1, False, {}, True),              # + consolidate's fast_place
    ("fifo", "best-fit", 1, False, {}, False),
    ("fifo", "spread", 1, False, {}, False),
    ("sjf", "first-fit", 1, False, {}, False),
    ("fifo", "first-fit-node", 1, False, {"backfill": True}, True),
    ("srtf", None, 1, False, {}, False),             # preemptions through apply
    ("fifo", "best-fit:1,spread:0.5", 1, False, {}, False),  # the stages only: the kernel's shortcuts
    ("fifo", "consolidate", 2, True, {}, False),     # sharing: the load index
    ("horus", None, 1, False, {}, False),            # free_fit, carried failures
    ("horus", None, 2, True, {}, False),             # + load index, score_rows
    ("horus-f", None, 3, True, {"k": 3, "rounds": 2, "beta": 4}, False),
    ("ffd-util", None, 2, True, {}, False),
    ("obp", None, 2, True, {}, False),
]
IDS = [f"{c[0]}-{c[1] or 'own'}-x{c[2]}" + ("-one-node" if c[5] else "") for c in CONFIGS]

# Placers whose fast_place is not a shortcut of the stages for a job no single node can take:
# there fast_place *is* the placer's rule, and the stages' gang step (nodes with the most free
# GPUs first) answers differently. On jobs that fit one node they agree (the one-node configs).
OWN_WIDE_RULE = {
    "consolidate": "Helios's ConsolidateAllocate: whole free nodes plus the remainder on one node, or wait",
    "best-fit": "the largest free blocks first, then the tightest node for the remainder",
    "first-fit": "spans nodes in node order",
    "first-fit-node": "its own spanning order",
}


# Placers that also span a job that *would* fit one node when no single node has room for it at
# the time (first-fit in node order, best-fit largest blocks first): for them "wide" is any job of
# more than one GPU, since whether it spans depends on the occupancy when it starts. Hypothesis found
# the case: sjf + first-fit, an 8-GPU job on 8-GPU nodes spread 4 + 4 by node order vs most-free-first.
SPANS_WHEN_FULL = {"best-fit", "first-fit"}


def shortcuts_for(config: tuple, jobs: list[Job], cluster: ClusterSpec) -> tuple:
    placer = config[1] or "consolidate"
    widest = 1 if placer in SPANS_WHEN_FULL else min(n.gpus for n in cluster.nodes)
    wide = any(j.gpus > widest for j in jobs)
    if placer in OWN_WIDE_RULE and wide:
        return tuple(c for c in SHORTCUTS if c.name != "fast_place / free_fit")
    return SHORTCUTS


class Decisions:
    """A kernel observer writing down every start and stop with its placement (read before the
    kernel releases it)."""

    def __init__(self) -> None:
        self.log: list[tuple] = []

    def started(self, job: Job, vc, now: float) -> None:
        self.log.append(("start", job.job_id, now))

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self.log.append((why, job.job_id, now, tuple(job.placement or ())))


def simulate(jobs: list[Job], cluster: ClusterSpec, config: tuple, reference: bool) -> tuple:
    name, placement, cap, sliced, options, _ = config

    def run():
        policy = make_policy(name, placement, share=cap > 1, **options)
        seen = Decisions()
        sim = Simulator(cluster, policy, SimConfig(max_jobs_per_gpu=cap),
                        speed_model=TimeSlicedSpeed() if sliced else None, observers=(seen,))
        result = sim.run(jobs)
        per_job = sorted((j.job_id, j.start_time, j.end_time, j.preemptions, j.queue_delay) for j in result.jobs)
        return per_job, seen.log

    if not reference:
        return run()
    with reference_paths(shortcuts_for(config, jobs, cluster)):
        return run()


def assert_same(jobs: list[Job], cluster: ClusterSpec, config: tuple) -> None:
    fast = simulate(jobs, cluster, config, False)
    general = simulate(jobs, cluster, config, True)
    assert fast[0] == general[0]  # start, end (so JCT), preemptions, queueing delay per job
    assert fast[1] == general[1]  # every start and stop, in order, with its placement
    assert all(not math.isnan(end) and end >= 0 for _, _, end, _, _ in fast[0])


@st.composite
def scenes(draw, one_node: bool = False) -> tuple[list[Job], ClusterSpec]:
    per_node = draw(st.sampled_from([2, 4, 8]))
    vcs = {f"vc{i}": draw(st.integers(1, 3)) for i in range(draw(st.integers(1, 2)))}
    cluster = ClusterSpec.from_vc_sizes(vcs, per_node, gpu_type("V100"))
    jobs = []
    for i in range(draw(st.integers(1, 24))):
        vc = draw(st.sampled_from(sorted(vcs)))
        top = vcs[vc] * per_node
        top = min(top, per_node) if one_node else top
        gpus = draw(st.sampled_from([g for g in (1, 1, 2, 3, 4, 8, 16) if g <= top]))
        job = Job(f"j{i}", vc, gpus, float(draw(st.integers(0, 300))), float(draw(st.integers(1, 900))),
                  gpu_util=float(draw(st.integers(5, 100))), gpu_mem_mib=float(draw(st.integers(500, 16000))))
        job.pred_gpu_util = float(draw(st.integers(5, 100)))
        job.pred_gpu_mem_mib = draw(st.sampled_from([math.nan, 2000.0, 6000.0, 12000.0, 15000.0]))
        jobs.append(job)
    return jobs, cluster


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_shortcuts_decide_as_the_general_paths(config, data):
    jobs, cluster = data.draw(scenes(one_node=config[5]))
    assert_same(jobs, cluster, config)


def test_the_placers_own_wide_rules_differ_from_the_stages():
    """Why OWN_WIDE_RULE exists: 12 GPUs on three 8-GPU nodes, one idle and two with 3 free GPUs.
    Consolidate waits (no node holds the remaining 4); the stages span 8 + 3 + 1."""
    from dlsched.kernel.queues import ArrivalQueue
    from dlsched.kernel.state import ClusterState
    from dlsched.kernel.view import SchedulingView

    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 3}, 8), new_queue=ArrivalQueue)
    vc = state.vcs[0]
    for i, (gpus, node) in enumerate(((5, 1), (5, 2))):
        job = Job(f"busy{i}", "v", gpus, 0.0, 100.0)
        job.vc_state = vc
        state.submit(job, 0.0)
        state.start(job, ((node, (1 << gpus) - 1),), 0.0)
    wide = Job("wide", "v", 12, 0.0, 10.0)
    wide.vc_state = vc
    state.submit(wide, 0.0)
    view = SchedulingView(state, False)
    fast = make_policy("fifo").placer.place(view, vc, wide)
    with reference_paths():
        stages = make_policy("fifo").placer.place(view, vc, wide)
    assert not fast.fits and stages.fits
    assert stages.placement == ((0, 0xFF), (1, 0xE0), (2, 0x20))


def test_reference_paths_switch_every_shortcut_and_restore_it():
    before = [getattr(cut.target(), cut.attribute) for cut in SHORTCUTS]
    with reference_paths():
        assert [getattr(cut.target(), cut.attribute) for cut in SHORTCUTS] == [c.general for c in SHORTCUTS]
        plain = make_policy("fifo").placer
        assert "place" not in vars(plain)  # the stages, not consolidate's fast_place
    assert [getattr(cut.target(), cut.attribute) for cut in SHORTCUTS] == before
    placer = make_policy("fifo").placer
    assert vars(placer)["place"].__name__ == "fast_place"   # a trace's jobs: one call, no pod check
    placer.shape_pods()   # a driver with jobs of several pods: consolidate's fast_place behind the check
    entry = vars(placer)["place"]
    assert entry.fast.__name__ == "fast_place" and entry.pipeline is placer and placer.shapes_pods
    placer.shape_pods()   # idempotent
    assert vars(placer)["place"] is entry
    assert PlacementPipeline.use_index is True


@pytest.mark.slow
@pytest.mark.parametrize("config", [c for c in CONFIGS if c[0] in ("fifo", "sjf", "srtf", "horus") and not c[5]],
                         ids=[i for c, i in zip(CONFIGS, IDS) if c[0] in ("fifo", "sjf", "srtf", "horus") and not c[5]])
def test_shortcuts_on_a_real_trace_slice(philly_reference, config):
    """The first 1,500 Philly jobs of the reference window on their real VCs (predictions drawn
    with a fixed seed, so the sharing placements have something to weigh)."""
    trace, vc_nodes = philly_reference
    rng = random.Random(0)
    jobs = []
    for j in trace.jobs[:1500]:
        job = Job(j.job_id, j.vc, j.gpus, j.submit_time, j._duration, gpu_util=rng.uniform(5, 100),
                  gpu_mem_mib=rng.uniform(500, 16000))
        job.pred_gpu_util, job.pred_gpu_mem_mib = rng.uniform(5, 100), rng.choice([math.nan, rng.uniform(500, 16000)])
        jobs.append(job)
    cluster = ClusterSpec.from_vc_sizes({vc: n for vc, n in vc_nodes.items() if any(j.vc == vc for j in jobs)})
    assert_same(jobs, cluster, config)


# The vectorised gang ranking alone against node-by-node scoring: Horus's cost placement without
# sharing, with 2 and 3 jobs per GPU, and Horus-f; every other shortcut stays on, so the only
# difference between the two runs is how the gang stage scores its nodes.
GANG_CONFIGS = [c for c in CONFIGS if c[0] in ("horus", "horus-f")]
VECTOR_GANG = tuple(c for c in SHORTCUTS if c.name == "vector gang")


def _gang_calls(jobs: list[Job], cluster: ClusterSpec, config: tuple) -> int:
    """How many gang placements the run asks the vectorised ranking for (the test must reach it)."""
    calls = 0
    real = PlacementPipeline._ranked_rows

    def counted(self, view, vc, job):
        nonlocal calls
        calls += 1
        return real(self, view, vc, job)

    PlacementPipeline._ranked_rows = counted
    try:
        simulate(jobs, cluster, config, False)
    finally:
        PlacementPipeline._ranked_rows = real
    return calls


@pytest.mark.parametrize("config", GANG_CONFIGS, ids=[f"{c[0]}-x{c[2]}" for c in GANG_CONFIGS])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_vector_gang_ranks_as_node_by_node(config, data):
    jobs, cluster = data.draw(scenes())
    fast = simulate(jobs, cluster, config, False)
    with reference_paths(VECTOR_GANG):
        general = simulate(jobs, cluster, config, False)
    assert fast == general


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_vector_gang_is_reached_and_agrees_on_a_congested_scene(cap):
    """A seeded scene of wide jobs on fragmented 4-GPU nodes: many placements go through the gang
    stage, and every start and stop is the same either way. Without sharing there is no load
    index and the gang scores node by node (the vectorised ranking is never asked)."""
    rng = random.Random(7)
    cluster = ClusterSpec.from_vc_sizes({"v": 6}, 4, gpu_type("V100"))
    jobs = []
    for i in range(120):
        job = Job(f"j{i}", "v", rng.choice([1, 1, 3, 5, 6, 8]), float(i * 20), float(rng.randint(100, 900)),
                  gpu_util=float(rng.randint(5, 100)), gpu_mem_mib=float(rng.randint(500, 16000)))
        job.pred_gpu_util = float(rng.randint(5, 100))
        job.pred_gpu_mem_mib = rng.choice([math.nan, 2000.0, 6000.0, 12000.0])
        jobs.append(job)
    config = ("horus", None, cap, cap > 1, {}, False)
    calls = _gang_calls(jobs, cluster, config)
    assert calls > 20 if cap > 1 else calls == 0
    fast = simulate(jobs, cluster, config, False)
    with reference_paths(VECTOR_GANG):
        general = simulate(jobs, cluster, config, False)
    assert fast == general
