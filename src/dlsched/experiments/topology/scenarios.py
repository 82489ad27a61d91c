"""Workloads of the paper's evaluation (Sec. 5): the Table-1 prototype and the simulated scenarios.

Run times are not given in the paper. Prototype solo times are calibrated on Fig. 8: Job 0
(AlexNet, batch 1, 1 GPU, 4000 iterations) finishes at about the 70th second; Job 3 completes
about 120 s after arrival under TOPO-AWARE-P. Scenario solo times grow with the batch class
as in Sec. 3.2's breakdown (compute ~1 s at tiny to ~66 s at big per 40 iterations while
communication stays ~2 s), compressed so the load stays "heavy" but drains; see
``SOLO_BY_CLASS``.
"""

from __future__ import annotations

import numpy as np

from dlsched.topology.jobgraph import BatchClass, JobProfile

# Table 1 (A=AlexNet, C=CaffeRef, G=GoogLeNet) plus our calibrated solo times.
PROTOTYPE_TABLE = (
    # id,   model,       batch, gpus, min_utility, arrival, solo_time
    ("job0", "alexnet", 1, 1, 0.3, 0.51, 68.0),
    ("job1", "googlenet", 4, 1, 0.3, 15.03, 75.0),
    ("job2", "alexnet", 1, 1, 0.3, 24.36, 68.0),
    ("job3", "alexnet", 4, 2, 0.5, 25.33, 50.0),
    ("job4", "alexnet", 1, 2, 0.5, 29.33, 60.0),
    ("job5", "caffenet", 1, 2, 0.5, 29.89, 60.0),
)


def prototype_jobs() -> list[JobProfile]:
    """The six jobs of Table 1 (one Minsky machine, Sec. 5.2)."""
    return [JobProfile(j, m, b, g, solo, mu, arr) for j, m, b, g, mu, arr, solo in PROTOTYPE_TABLE]


SOLO_BY_CLASS = {BatchClass.TINY: 70.0, BatchClass.SMALL: 100.0, BatchClass.MEDIUM: 200.0, BatchClass.BIG: 400.0}
MODEL_TIME = {"alexnet": 1.0, "caffenet": 1.0, "googlenet": 1.3}
CLASS_BATCHES = {BatchClass.TINY: (1, 2), BatchClass.SMALL: (4, 8), BatchClass.MEDIUM: (16, 32),
                 BatchClass.BIG: (64, 128)}
GPU_CHOICES = (1, 2, 4)
GPU_PROBS = (0.4, 0.4, 0.2)
MODELS_BY_INDEX = ("alexnet", "caffenet", "googlenet")


def generate_jobs(n: int, rate_per_min: float = 10.0, seed: int = 0, slo_slowdown: float = 1.2) -> list[JobProfile]:
    """Sec. 5.3: Poisson arrivals (rate per minute), batch class ~ Binomial(3, 0.5)
    (0 tiny .. 3 big), model ~ Binomial(2, 0.5) (AlexNet, CaffeRef, GoogLeNet).

    GPU counts are not given in the paper ("some needing a single GPU, some needing more than
    two"); we draw 1/2/4 GPUs with probabilities 0.4/0.4/0.2. Minimum utility follows Table 1:
    0.3 for single-GPU jobs, 0.5 for multi-GPU jobs.
    """
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(60.0 / rate_per_min, size=n)
    arrivals = np.cumsum(gaps)
    classes = rng.binomial(3, 0.5, size=n)
    models = rng.binomial(2, 0.5, size=n)
    gpus = rng.choice(GPU_CHOICES, size=n, p=GPU_PROBS)
    pick = rng.integers(0, 2, size=n)
    out = []
    for i in range(n):
        bc = BatchClass(int(classes[i]))
        model = MODELS_BY_INDEX[int(models[i])]
        g = int(gpus[i])
        solo = SOLO_BY_CLASS[bc] * MODEL_TIME[model] * float(rng.uniform(0.8, 1.2))
        out.append(JobProfile(f"j{i:05d}", model, CLASS_BATCHES[bc][int(pick[i])], g, round(solo, 2),
                              0.3 if g == 1 else 0.5, round(float(arrivals[i]), 3), slo_slowdown))
    return out
