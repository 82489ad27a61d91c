"""Model zoo: ONNX graphs of the architectures in the Lucid and Gavel profiles, exported on CPU
with random weights and cached on disk.

    from dlsched.graph.zoo import build_model, ZOO_NAMES, zoo_name_for
    onnx_bytes = build_model("resnet50")            # graph bytes (weights in a side file)
    build_model(zoo_name_for("ResNet-18 (batch size 32)"))

Exporting needs torch (and transformers for BERT/GPT-2); reading a cached entry does not."""

from __future__ import annotations

import importlib
from pathlib import Path

from dlsched.graph.zoo.cache import ZOO_VERSION, cache_dir, entry_path, save_with_external_data
from dlsched.graph.zoo.registry import GAVEL_MODELS, LUCID_MODELS, ZOO, ZOO_NAMES, ZooEntry, zoo_name_for

__all__ = ["GAVEL_MODELS", "LUCID_MODELS", "ZOO", "ZOO_NAMES", "ZOO_VERSION", "build_model", "cache_dir",
           "export_model", "model_path", "zoo_name_for"]


def export_model(name: str) -> bytes:
    """Export zoo model ``name`` now (no cache); returns self-contained ONNX bytes."""
    entry = _entry(name)
    mod_name, fn_name = entry.builder.split(":")
    builder = getattr(importlib.import_module(mod_name), fn_name)
    if mod_name.endswith(".hf"):
        return builder()
    import torch

    from dlsched.graph.export import export_torch_module

    torch.manual_seed(0)
    module, inputs = builder()
    return export_torch_module(module, inputs, input_names=list(entry.input_names),
                               seq_axes=list(entry.seq_axes) or None, default_seq=entry.default_seq)


def model_path(name: str, *, refresh: bool = False) -> Path:
    """Path of the cached graph file (built on first use); load with ``onnx.load`` for weights."""
    _entry(name)  # validate the name first
    path = entry_path(name)
    if refresh or not path.is_file():
        save_with_external_data(export_model(name), path)
    return path


def build_model(name: str, *, refresh: bool = False) -> bytes:
    """ONNX bytes of zoo model ``name`` (graph only; large weights live in the cache side file)."""
    return model_path(name, refresh=refresh).read_bytes()


def _entry(name: str) -> ZooEntry:
    if name not in ZOO:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(ZOO_NAMES)}")
    return ZOO[name]
