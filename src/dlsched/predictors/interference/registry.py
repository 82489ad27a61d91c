"""Interference models by name (``dlsched interference evaluate`` and policies pick them here)."""

from __future__ import annotations

from collections.abc import Callable

from dlsched.predictors.interference.base import ConstantSlowdown, InterferenceModel
from dlsched.predictors.interference.horus_curve import HorusCurve
from dlsched.predictors.interference.lookup import PairLookup
from dlsched.predictors.interference.pair_forest import PairForest

MODELS: dict[str, Callable[[], InterferenceModel]] = {
    "constant-1": lambda: ConstantSlowdown(1.0),
    "constant-2": lambda: ConstantSlowdown(2.0),
    "horus-curve": HorusCurve,
    "pair-forest": PairForest,
    "lookup": PairLookup,
}


def make_model(name: str) -> InterferenceModel:
    """A fresh, unfitted model; ``KeyError`` lists the known names."""
    if name not in MODELS:
        raise KeyError(f"unknown interference model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name]()
