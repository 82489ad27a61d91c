"""Graph features for profiled jobs, through ``dlsched.graph`` (ONNX analysis + model zoo).

Kept separate so the rest of the package works (and is tested) without ONNX: anything that
maps (model name, batch, optional ONNX path) to a feature dict can stand in as a resolver.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

Resolver = Callable[[str, int, str], dict[str, float]]


class FeatureError(RuntimeError):
    """Graph features for a model could not be produced (no zoo entry, bad ONNX, ...)."""


def _zoo_name(model: str) -> str:
    """Profile-table model name (Lucid/Gavel) or zoo name -> zoo name, via the zoo's mapping."""
    from dlsched.graph import zoo

    try:
        return str(zoo.zoo_name_for(model))
    except KeyError as exc:
        raise FeatureError(str(exc.args[0]) if exc.args else f"model {model!r} is not in the graph zoo") from None


@lru_cache(maxsize=256)
def _analysis(model: str, onnx: str) -> Any:
    try:
        from dlsched.graph import analyze
    except ImportError as exc:  # graph extra not installed
        raise FeatureError(f"graph features need dlsched.graph and onnx ({exc})") from None
    try:
        if onnx:
            return analyze(onnx)
        from dlsched.graph.zoo import build_model

        return analyze(build_model(_zoo_name(model)))
    except FeatureError:
        raise
    except Exception as exc:  # noqa: BLE001 - GraphError, torch export failures, missing files
        raise FeatureError(f"{onnx or model}: cannot analyse graph ({type(exc).__name__}: {exc})") from None


def graph_features(model: str, batch: int, onnx: str = "") -> dict[str, float]:
    """Feature dict of ``model`` (zoo name or ONNX path) at ``batch``; ``batch`` is added."""
    feats = dict(_analysis(model, onnx).features(int(batch)))
    feats["batch"] = float(batch)
    return feats


def seq_features(model: str, batch: int, seq: int, onnx: str = "") -> dict[str, float]:
    """:func:`graph_features` at a sequence length (models with a sequence dimension)."""
    feats = dict(_analysis(model, onnx).features(int(batch), int(seq)))
    feats["batch"] = float(batch)
    return feats


def analysis_for_ref(ref: str) -> Any:
    """GraphAnalysis for a job reference: a path to an ``.onnx`` file or a zoo model name."""
    if ref.lower().endswith(".onnx"):
        return _analysis("", ref)
    return _analysis(ref, "")
