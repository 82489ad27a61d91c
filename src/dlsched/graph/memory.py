"""Horus Eq. 2 memory estimate, the fallback when no trained memory predictor is available.

GMem = (B*A + P) + B*G + delta, with A = activation bytes per sample, G = gradient bytes per
sample (taken equal to A: one gradient per saved activation), P = parameter bytes and delta the
framework/CUDA-context overhead (1000 MiB, as in the GPUMemNet comparison).  Known to be a poor
predictor; it is a baseline, not a model."""

from __future__ import annotations

from collections.abc import Mapping

HORUS_DELTA_MIB = 1000.0


def horus_memory_mib(features: Mapping[str, float], delta_mib: float = HORUS_DELTA_MIB) -> float:
    """Eq. 2 of the Horus paper in MiB, from a :meth:`GraphAnalysis.features` dict."""
    act = features["activation_bytes"]  # = B * A
    grads = act  # = B * G
    return (act + features["param_bytes"] + grads) / 2**20 + delta_mib
