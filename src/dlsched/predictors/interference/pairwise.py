"""Shared plumbing of the models that predict a pair at a time: batched pair predictions for
evaluation and bulk scoring, and the 3+ rule (:func:`combine_pairwise`) for ``slowdown``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import JobProfile, PairObservation
from dlsched.predictors.interference.combine import combine_pairwise


class PairwiseModel:
    """Base class: subclasses implement ``fit`` and ``pair_slowdowns`` (raw, unfloored)."""

    name = "pairwise"

    def fit(self, pairs: Sequence[PairObservation]) -> PairwiseModel:
        raise NotImplementedError

    def pair_slowdowns(self, a: Sequence[JobProfile], b: Sequence[JobProfile],
                       gpu_types: Sequence[str]) -> np.ndarray:
        """Slowdown of ``a[i]`` next to ``b[i]`` on ``gpu_types[i]``, for many pairs at once
        (one forest call for all of them: use it when scoring many candidates)."""
        raise NotImplementedError

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        if not others:
            return 1.0
        raw = self.pair_slowdowns([a] * len(others), list(others), [gpu_type] * len(others))
        return combine_pairwise(raw)


def pair_predictions(model, a: Sequence[JobProfile], b: Sequence[JobProfile], gpu_types: Sequence[str]) -> np.ndarray:
    """What ``model.slowdown(a[i], [b[i]], gpu_types[i])`` answers, batched when the model can
    (any :class:`InterferenceModel` works; pair models are floored at 1 like ``slowdown``)."""
    if isinstance(model, PairwiseModel):
        return np.maximum(1.0, np.asarray(model.pair_slowdowns(a, b, gpu_types), dtype=float))
    return np.array([model.slowdown(x, [y], g) for x, y, g in zip(a, b, gpu_types)], dtype=float)


def training_sides(pairs: Sequence[PairObservation]) -> tuple[list[JobProfile], list[JobProfile], list[str], np.ndarray]:
    """Both sides of every feasible pair as (job, partner, gpu, slowdown) columns. A censored
    side (true slowdown at most the recorded one, which is 1) is used at its recorded value."""
    a: list[JobProfile] = []
    b: list[JobProfile] = []
    gpus: list[str] = []
    s: list[float] = []
    for p in pairs:
        if not p.feasible or not (np.isfinite(p.slowdown_a) and np.isfinite(p.slowdown_b)):
            continue
        a += [p.a, p.b]
        b += [p.b, p.a]
        gpus += [p.gpu_type, p.gpu_type]
        s += [p.slowdown_a, p.slowdown_b]
    return a, b, gpus, np.asarray(s, dtype=float)
