"""Horus carries the placements that failed from one pass to the next (until room is gained):
the decisions must be those of passes that start from nothing, on congested seeded runs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.metrics.delivered import DeliveredUtilisation
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.sched.policies.horus import FailedFits
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.observe import ObservedCorrection


def _jobs(seed: int, n: int = 400) -> list[Job]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 40.0)
        gpus = rng.choices([1, 2, 4, 8, 16], [0.6, 0.15, 0.15, 0.07, 0.03])[0]
        j = Job(f"j{i}", "all", gpus, t, rng.lognormvariate(7.0, 1.0), gpu_util=rng.uniform(10, 100),
                gpu_mem_mib=rng.uniform(500, 16000))
        j.pred_gpu_util = rng.uniform(10, 100)
        j.pred_gpu_mem_mib = rng.choice([float("nan"), rng.uniform(500, 16000), rng.uniform(500, 16000)])
        out.append(j)
    return out


def _run(name: str, cap: int, carry: bool, seed: int, observe: float | None, **options) -> list[tuple]:
    policy = make_policy(name, share=cap > 1, **options)
    policy.carry_failures = carry
    cluster = ClusterSpec.from_vc_sizes({"all": 4}, 8, gpu_type("V100"))
    observers = (DeliveredUtilisation(),) + ((ObservedCorrection(observe),) if observe is not None else ())
    sim = Simulator(cluster, policy, SimConfig(max_jobs_per_gpu=cap),
                    speed_model=TimeSlicedSpeed() if cap > 1 else None, observers=observers)
    res = sim.run(_jobs(seed))
    return sorted((j.job_id, j.start_time, j.end_time) for j in res.jobs)


@pytest.mark.parametrize(("name", "cap", "observe", "options"), [
    ("horus", 2, None, {}),
    ("horus", 1, None, {}),
    ("horus", 3, 0.0, {"beta": 4}),          # corrections at every start: room gained mid-pass
    ("horus-f", 2, 0.0, {"k": 3, "rounds": 2}),
])
def test_carried_failures_change_no_decision(name, cap, observe, options):
    for seed in (0, 1):
        assert _run(name, cap, True, seed, observe, **options) == _run(name, cap, False, seed, observe, **options)


def test_failed_fits_answers_as_a_scan_of_every_failure():
    rng = random.Random(3)
    failed, seen = FailedFits(), []
    for _ in range(200):
        g, m = rng.choice([1, 2, 4, 8]), rng.uniform(0, 100)
        if rng.random() < 0.3:
            failed.add(g, m)
            seen.append((g, m))
        assert (m >= failed.limit(g)) == any(g >= g0 and m >= m0 for g0, m0 in seen)
        top = rng.choice([0, 3, 8, 12])
        assert np.array_equal(failed.limits(top)[:top + 1], [failed.limit(k) for k in range(top + 1)], equal_nan=True)
