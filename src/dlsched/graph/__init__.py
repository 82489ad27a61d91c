"""Graph half of the Horus prediction engine: ONNX graph -> FLOPs, memory and op-count features.

    from dlsched.graph import analyze, GraphError
    a = analyze("resnet50.onnx")
    a.features(batch=64)          # flat dict, keys = FEATURE_NAMES

See docs/graph.md for the feature list and FLOP conventions."""

from __future__ import annotations

from dlsched.graph.analysis import GraphAnalysis, analyze
from dlsched.graph.errors import GraphError
from dlsched.graph.features import FEATURE_NAMES
from dlsched.graph.flops import TRAIN_STEP_FACTOR
from dlsched.graph.loader import load_model
from dlsched.graph.memory import horus_memory_mib

__all__ = [
           "FEATURE_NAMES",
           "TRAIN_STEP_FACTOR",
           "GraphAnalysis",
           "GraphError",
           "analyze",
           "horus_memory_mib",
           "load_model",
]
