"""Numeric features of a job and of a pair, as the pair models read them.

Per job: GPU utilisation, memory-controller utilisation, peak memory (MiB), log2 batch size,
AMP and log10 isolated throughput (samples/s) - Co-scheML's "single-job metrics" as far as the
profile sets measure them. Unknown values stay NaN (Gavel has no utilisation or memory); the
forest handles missing values natively. A pair row is job features, partner features and the
cumulative utilisation (Horus's variable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import JobProfile

JOB_FEATURES = ("gpu_util", "mem_util", "gpu_mem_mib", "log2_batch", "amp", "log10_speed")
PAIR_FEATURES = tuple(f"{side}_{f}" for side in ("job", "partner") for f in JOB_FEATURES) + ("sum_gpu_util",)


def job_features(p: JobProfile) -> list[float]:
    """The :data:`JOB_FEATURES` of one profile."""
    return [p.gpu_util, p.mem_util, p.gpu_mem_mib,
            math.log2(p.batch_size) if p.batch_size > 0 else math.nan, float(p.amp),
            math.log10(p.speed) if p.speed > 0 else math.nan]


def pair_matrix(a: Sequence[JobProfile], b: Sequence[JobProfile]) -> np.ndarray:
    """One :data:`PAIR_FEATURES` row per (job, partner)."""
    cache: dict[int, list[float]] = {}

    def feats(p: JobProfile) -> list[float]:
        if id(p) not in cache:
            cache[id(p)] = job_features(p)
        return cache[id(p)]

    rows = [feats(x) + feats(y) + [x.gpu_util + y.gpu_util] for x, y in zip(a, b)]
    return np.asarray(rows, dtype=float).reshape(len(rows), len(PAIR_FEATURES))
