"""Fold assignment, in code so that the numbers stay comparable over time.

Every protocol groups by architecture (``JobProfile.model``): all batch sizes and AMP variants of
a model sit in the same fold, and a pair is in a test fold when *either* of its models is held
out (training keeps only pairs of two other models). Folds are leave-one-group-out over sorted
names, so there is nothing random to seed. Infeasible pairs never enter a test fold (they have no
slowdown); they stay in training for the models that use them (the lookup table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlsched.predictors.interference.base import PairObservation


@dataclass(frozen=True)
class Fold:
    """One train/test split; ``name`` says what is held out."""

    name: str
    train: list[PairObservation]
    test: list[PairObservation]


def _models(pairs: Sequence[PairObservation]) -> list[str]:
    return sorted({p.a.model for p in pairs} | {p.b.model for p in pairs})


def leave_one_model_out(pairs: Sequence[PairObservation], prefix: str = "") -> list[Fold]:
    """One fold per architecture: test = feasible pairs that involve it, train = pairs that don't."""
    folds = []
    for model in _models(pairs):
        held = [p for p in pairs if model in (p.a.model, p.b.model)]
        train = [p for p in pairs if model not in (p.a.model, p.b.model)]
        test = [p for p in held if p.feasible]
        if test and train:
            folds.append(Fold(f"{prefix}{model}", train, test))
    return folds


def leave_one_model_out_per_gpu(pairs: Sequence[PairObservation]) -> list[Fold]:
    """Leave-one-architecture-out within each GPU type (Gavel): fold ``gpu/model``."""
    folds = []
    for gpu in sorted({p.gpu_type for p in pairs}):
        folds += leave_one_model_out([p for p in pairs if p.gpu_type == gpu], prefix=f"{gpu}/")
    return folds


def leave_one_gpu_out(pairs: Sequence[PairObservation]) -> list[Fold]:
    """Train on every other GPU type, test on the feasible pairs of the held-out one."""
    gpus = sorted({p.gpu_type for p in pairs})
    return [Fold(gpu, [p for p in pairs if p.gpu_type != gpu], [p for p in pairs if p.gpu_type == gpu and p.feasible])
            for gpu in gpus if len(gpus) > 1]


def transfer(train: Sequence[PairObservation], test: Sequence[PairObservation], models: Sequence[str]) -> list[Fold]:
    """Fit on one profile set, test per GPU type on the pairs of another between ``models``
    (EVALUATION.md's end-to-end check: Lucid -> Gavel's ResNet-18/50, Transformer, LM)."""
    keep = [p for p in test if p.feasible and p.a.model in models and p.b.model in models]
    return [Fold(f"{gpu}", list(train), [p for p in keep if p.gpu_type == gpu])
            for gpu in sorted({p.gpu_type for p in keep})]
