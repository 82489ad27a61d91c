"""The contract every interference model follows, and the two trivial baselines.

A model answers one question: *how much slower does job ``a`` run when it shares a GPU with
``others``?* — a slowdown factor ``s >= 1`` (``s = 1 / normalised speed``). Policies ask it with
**predicted** profiles (what they may see); the simulator's ground-truth speed model answers the
same question from **measured** pair tables. Keeping one profile type for both lets a lookup
table of measurements double as an oracle policy's model and as the engine's truth.

Models are scikit-learn style estimators: hyper-parameters in ``__init__``, ``fit(pairs)`` learns
attributes ending in ``_``, ``slowdown`` is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dlsched.core.colocation import JobProfile, PairObservation
from dlsched.predictors.interference.combine import combine_pairwise

__all__ = ["ConstantSlowdown", "InterferenceModel", "JobProfile", "PairObservation"]


@runtime_checkable
class InterferenceModel(Protocol):
    """Predicts the slowdown of a job from its co-runners on one GPU."""

    name: str

    def fit(self, pairs: Sequence[PairObservation]) -> InterferenceModel:
        """Learn from measured pairs; returns ``self``."""
        ...

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        """Slowdown factor (>= 1) of ``a`` while ``others`` share its GPU (1.0 when alone)."""
        ...


class ConstantSlowdown:
    """Baseline: every co-located pair slows each job ``factor`` times (1 = no interference,
    2 = plain time slicing of two jobs). Alone, a job runs at full speed; three or more jobs
    combine by :func:`combine_pairwise` (``factor`` 2 with two co-runners gives 3)."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self.name = f"constant-{factor:g}"

    def fit(self, pairs: Sequence[PairObservation]) -> ConstantSlowdown:
        return self

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        return combine_pairwise([self.factor] * len(others))
