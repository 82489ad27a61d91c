"""On-disk cache of exported zoo models.

Layout: ``<dir>/<name>-v<ZOO_VERSION>.onnx`` holds the graph with every initializer over 1 KiB
stored as ONNX external data in ``<same>.onnx.data`` next to it.  The graph file is small, so
``analyze`` reads it in milliseconds; ``onnx.load(path)`` or onnxruntime still get a complete model.
Files are written to temporary names and renamed, the graph last, so a present graph file means a
complete entry even with concurrent builders."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

#: Bump when a zoo definition changes so stale cache entries are rebuilt.
ZOO_VERSION = 1
EXTERNAL_THRESHOLD = 1024  # bytes


def cache_dir() -> Path:
    """``$DLSCHED_CACHE`` if set, else ``$XDG_CACHE_HOME/dlsched/zoo`` (default ``~/.cache``)."""
    env = os.environ.get("DLSCHED_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlsched" / "zoo"


def entry_path(name: str) -> Path:
    return cache_dir() / f"{name}-v{ZOO_VERSION}.onnx"


def save_with_external_data(model_bytes: bytes, path: Path) -> bytes:
    """Split large initializers into ``path.onnx.data``; return the graph file's bytes."""
    model = onnx.load_model_from_string(model_bytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    data_name = path.name + ".data"
    tmp_data = path.with_name(f".{data_name}.{os.getpid()}.tmp")
    offset = 0
    with open(tmp_data, "wb") as fh:
        for t in model.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                continue
            arr = numpy_helper.to_array(t)
            raw = np.ascontiguousarray(arr).tobytes()
            if len(raw) <= EXTERNAL_THRESHOLD:
                continue
            pad = (-offset) % 64  # keep tensors aligned for mmap readers
            fh.write(b"\0" * pad)
            offset += pad
            fh.write(raw)
            for fld in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                t.ClearField(fld)
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset += len(raw)
    graph = model.SerializeToString()
    tmp_graph = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp_graph.write_bytes(graph)
    os.replace(tmp_data, path.with_name(data_name))
    os.replace(tmp_graph, path)
    return graph
