"""A small deterministic workload for the duration-estimator tests (users repeat experiments
under varying names), independent of the synthetic generator, plus sanity tests of it."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.traces.model import Trace

ORIGIN = datetime(2020, 9, 1)


def toy_trace(n: int = 3000, days: float = 10.0, seed: int = 0, users: int = 25) -> Trace:
    """Jobs from ``users`` users, each with 4 experiment templates (name stem, GPUs, typical
    duration); names vary by run/seed/lr; durations log-normal (σ=0.4) around the template."""
    rng = np.random.default_rng(seed)
    stems = ["resnet", "bert_ft", "gpt_pretrain", "yolo_det", "vit_cls", "rl_agent", "diffusion", "asr"]
    templates = []
    for u in range(users):
        for _ in range(4):
            templates.append((f"u{u:02d}", str(rng.choice(stems)), int(rng.choice([1, 1, 2, 4, 8])),
                              float(rng.uniform(3.0, 11.0)), f"vc{u % 5}"))
    submit = np.sort(rng.uniform(0, days * 86400.0, n))
    jobs = []
    for i, t in enumerate(submit):
        user, stem, gpus, mu, vc = templates[int(rng.integers(len(templates)))]
        name = f"{stem}_lr{rng.choice(['1e-3', '3e-4'])}_run{int(rng.integers(100))}"
        dur = float(np.round(np.exp(mu + rng.normal(0, 0.4))))
        jobs.append(Job(f"j{i}", vc, gpus, float(t), dur, user=user, name=name, cpus=4 * gpus))
    return Trace(jobs, origin=ORIGIN, name="toy")


def test_toy_trace_is_deterministic_and_sorted() -> None:
    a, b = toy_trace(200, seed=3), toy_trace(200, seed=3)
    assert [(j.name, true_duration(j)) for j in a.jobs] == [(j.name, true_duration(j)) for j in b.jobs]
    assert all(x.submit_time <= y.submit_time for x, y in zip(a.jobs, a.jobs[1:]))
