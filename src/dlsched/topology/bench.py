"""Latency of one TOPO-AWARE placement decision on a large cluster (Sec. 5.5.3 reports ~3 s).

The cluster is first filled to ``occupancy`` with random jobs placed by the placer itself;
then each timed decision is followed by the placement it chose and the release of a random
running job, so machine signatures keep changing and caches are exercised realistically.
"""

from __future__ import annotations

import time

import numpy as np

from dlsched.topology.graph import machine_graph
from dlsched.topology.jobgraph import BatchClass, JobProfile
from dlsched.topology.placer import TopoAwarePlacer
from dlsched.topology.scenarios import CLASS_BATCHES, GPU_CHOICES, GPU_PROBS, MODELS_BY_INDEX
from dlsched.topology.state import ClusterState


def _random_job(rng: np.random.Generator, i: int) -> JobProfile:
    bc = BatchClass(int(rng.binomial(3, 0.5)))
    return JobProfile(f"b{i}", MODELS_BY_INDEX[int(rng.binomial(2, 0.5))], CLASS_BATCHES[bc][int(rng.integers(0, 2))],
                      int(rng.choice(GPU_CHOICES, p=GPU_PROBS)), 100.0, 0.5)


def bench_placement(machines: int = 1000, decisions: int = 500, preset: str = "dgx1",
                    occupancy: float = 0.7, postpone: bool = False, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    mg = machine_graph(preset)
    state = ClusterState([mg] * machines)
    placer = TopoAwarePlacer(postpone=postpone)
    total = machines * mg.gpus
    running: list[str] = []
    i = 0
    t0 = time.perf_counter()
    free_total = total
    while free_total > (1 - occupancy) * total:
        p = _random_job(rng, i)
        i += 1
        d = placer.decide(state, p)
        if d.placement is not None:
            state.allocate(p, d.placement)
            running.append(p.job_id)
            free_total -= p.gpus
    fill_s = time.perf_counter() - t0
    lat = []
    for _ in range(decisions):
        p = _random_job(rng, i)
        i += 1
        t = time.perf_counter()
        d = placer.decide(state, p)
        lat.append((time.perf_counter() - t) * 1000.0)
        if d.placement is not None:
            state.allocate(p, d.placement)
            running.append(p.job_id)
        if running:
            state.release(running.pop(int(rng.integers(0, len(running)))))
    arr = np.array(lat)
    return {
        "machines": machines, "preset": preset, "gpus": total, "decisions": decisions,
        "occupancy": occupancy, "policy": placer.name,
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "mean_ms": round(float(arr.mean()), 3),
        "max_ms": round(float(arr.max()), 3),
        "fill_jobs": len(running), "fill_s": round(fill_s, 2),
    }
