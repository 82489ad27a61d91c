"""A table of measured pair slowdowns, with a fitted model for the pairs it has not seen.

Exact on every measured pair (mean of repeated measurements), so an oracle policy can use it and
the simulator's truth can be built on it. Keys are job configurations (:attr:`JobProfile.key`) and
the GPU type; a pair measured on an unrecorded GPU type (``""``, Lucid) answers for every type
that has no measurement of its own. Infeasible pairs answer ``inf``: never co-locate them.
Unseen pairs go to ``fallback`` (a copy, fitted on the same pairs; default :class:`HorusCurve`).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import InterferenceModel, JobProfile, PairObservation
from dlsched.predictors.interference.combine import combine_pairwise
from dlsched.predictors.interference.horus_curve import HorusCurve
from dlsched.predictors.interference.pairwise import PairwiseModel, pair_predictions

Key = tuple[str, tuple[str, int, bool], tuple[str, int, bool]]


class PairLookup(PairwiseModel):
    """Measured slowdowns where known, ``fallback`` elsewhere."""

    name = "lookup"

    def __init__(self, fallback: InterferenceModel | None = None) -> None:
        self.fallback = fallback

    def fit(self, pairs: Sequence[PairObservation]) -> PairLookup:
        sums: dict[Key, list[float]] = defaultdict(list)
        for p in pairs:
            sa, sb = (p.slowdown_a, p.slowdown_b) if p.feasible else (np.inf, np.inf)
            sums[(p.gpu_type, p.a.key, p.b.key)].append(sa)
            if p.a.key != p.b.key:
                sums[(p.gpu_type, p.b.key, p.a.key)].append(sb)
            else:
                sums[(p.gpu_type, p.a.key, p.b.key)].append(sb)
        self.table_: dict[Key, float] = {k: float(np.mean(v)) for k, v in sums.items()}
        self.fallback_ = copy.deepcopy(self.fallback) if self.fallback is not None else HorusCurve()
        self.fallback_.fit(pairs)
        return self

    def measured(self, a: JobProfile, b: JobProfile, gpu_type: str = "") -> float | None:
        """The measured slowdown of ``a`` next to ``b``, or None when the pair was not measured."""
        hit = self.table_.get((gpu_type, a.key, b.key))
        return self.table_.get(("", a.key, b.key)) if hit is None else hit

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        """Scalar fast path: measured pairs from the table, the others from the fallback."""
        return combine_pairwise(m if (m := self.measured(a, o, gpu_type)) is not None
                                else self.fallback_.slowdown(a, [o], gpu_type) for o in others)

    def pair_slowdowns(self, a: Sequence[JobProfile], b: Sequence[JobProfile],
                       gpu_types: Sequence[str]) -> np.ndarray:
        out = np.array([np.nan if (m := self.measured(x, y, g)) is None else m
                        for x, y, g in zip(a, b, gpu_types)], dtype=float)
        miss = np.flatnonzero(np.isnan(out))
        if len(miss):
            out[miss] = pair_predictions(self.fallback_, [a[i] for i in miss], [b[i] for i in miss],
                                         [gpu_types[i] for i in miss])
        return out
