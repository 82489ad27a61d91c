"""Latency of one TOPO-AWARE placement decision on a large cluster (Sec. 5.5.3 reports ~3 s).

The decision is the placement plug-in of the main pipeline on a kernel
:class:`~dlsched.kernel.state.ClusterState` it observes (its incremental index follows every
start and finish). The cluster is first filled to ``occupancy`` with random jobs placed by the
plug-in itself; then each timed decision is followed by the start it chose and the finish of a
random running job, so node signatures keep changing and caches are exercised realistically.
"""

from __future__ import annotations

import time

import numpy as np

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.experiments.topology.scenarios import CLASS_BATCHES, GPU_CHOICES, GPU_PROBS, MODELS_BY_INDEX
from dlsched.kernel.decisions import Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.registry import make_placer
from dlsched.topology.graph import PRESET_GPUS
from dlsched.topology.jobgraph import BatchClass


def _random_job(rng: np.random.Generator, i: int, now: float) -> Job:
    bc = BatchClass(int(rng.binomial(3, 0.5)))
    gpus = int(rng.choice(GPU_CHOICES, p=GPU_PROBS))
    return Job(f"b{i}", "all", gpus, now, 100.0, model_name=MODELS_BY_INDEX[int(rng.binomial(2, 0.5))],
               batch_size=CLASS_BATCHES[bc][int(rng.integers(0, 2))], min_utility=0.5)


def bench_placement(machines: int = 1000, decisions: int = 500, preset: str = "dgx1",
                    occupancy: float = 0.7, postpone: bool = False, seed: int = 0) -> dict:
    if preset not in PRESET_GPUS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESET_GPUS)}")
    if machines < 1 or decisions < 1 or not 0.0 <= occupancy < 1.0:
        raise ValueError("--machines and --decisions must be >= 1 and --occupancy in [0, 1)")
    rng = np.random.default_rng(seed)
    cluster = ClusterSpec.from_vc_sizes({"all": machines}, PRESET_GPUS[preset], topology=preset)
    state = ClusterState(cluster, new_queue=ArrivalQueue)
    placer = make_placer("topo-aware-p" if postpone else "topo-aware")
    for plugin in placer.observers:
        plugin.attach(state)
        state.add_observer(plugin)
    view = SchedulingView(state, oracle=False)
    vc = state.vcs[0]
    running: list[Job] = []
    now = 0.0
    i = 0

    def decide() -> tuple[Job, object, float]:
        nonlocal i, now
        now += 1.0
        view.now = now
        job = _random_job(rng, i, now)
        i += 1
        state.submit(job, now)
        t = time.perf_counter()
        fit = placer.place(view, vc, job)
        took = time.perf_counter() - t
        if fit.status is Status.FITS:
            state.start(job, fit.placement, now)
            running.append(job)
        return job, fit, took   # a job that does not fit just stays queued: nothing schedules it

    t0 = time.perf_counter()
    while state.busy_gpus < occupancy * state.total_gpus and i < 100 * machines:
        decide()
    fill_s = time.perf_counter() - t0
    lat = []
    for _ in range(decisions):
        lat.append(decide()[2] * 1000.0)
        if running:
            state.finish(running.pop(int(rng.integers(0, len(running)))), now)
    arr = np.array(lat)
    return {
        "machines": machines, "preset": preset, "gpus": state.total_gpus, "decisions": decisions,
        "occupancy": occupancy, "policy": placer.name,
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "mean_ms": round(float(arr.mean()), 3),
        "max_ms": round(float(arr.max()), 3),
        "fill_jobs": len(running), "fill_s": round(fill_s, 2),
    }
