"""Load ONNX models from a path, bytes or ``ModelProto`` without reading external weight files.

Analysis only needs tensor shapes, so external data is never loaded: that keeps a 440 MB BERT
export cheap to read and lets the zoo cache keep weights in a side file."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from dlsched.graph.errors import GraphError

#: Oldest default-domain opset we accept (older ones changed Reshape/BatchNorm/pool semantics).
MIN_OPSET = 7
#: Newest opset the installed ``onnx`` knows how to infer shapes for.
MAX_OPSET = onnx.defs.onnx_opset_version()

ModelSource = str | os.PathLike | bytes | bytearray | memoryview | onnx.ModelProto


def load_model(src: ModelSource) -> tuple[onnx.ModelProto, str]:
    """Return ``(model, label)``; ``label`` names the source in error messages."""
    if isinstance(src, onnx.ModelProto):
        model, label = src, src.graph.name or "<ModelProto>"
    elif isinstance(src, (bytes, bytearray, memoryview)):
        label = "<bytes>"
        model = _parse(bytes(src), label)
    else:
        path = Path(src)
        label = str(path)
        if not path.is_file():
            raise GraphError(f"{label}: no such ONNX file")
        try:
            data = path.read_bytes()
        except OSError as exc:  # unreadable file
            raise GraphError(f"{label}: cannot read file ({exc})") from exc
        model = _parse(data, label)
    check_model(model, label)
    return model, label


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    if not data:
        raise GraphError(f"{label}: empty input, not an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise GraphError(f"{label}: corrupt or truncated ONNX protobuf ({exc})") from exc
    return model


def default_opset(model: onnx.ModelProto) -> int:
    """Opset version of the default (``ai.onnx``) domain, or 0 when absent."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 0


def check_model(model: onnx.ModelProto, label: str) -> None:
    """Cheap structural checks; protobuf happily parses many random byte strings."""
    if not model.opset_import or len(model.graph.node) == 0:
        raise GraphError(f"{label}: not an ONNX model (no opset_import or an empty graph)")
    opset = default_opset(model)
    if opset == 0:
        raise GraphError(f"{label}: the model imports no default-domain (ai.onnx) opset")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise GraphError(
            f"{label}: unsupported opset {opset} for domain ai.onnx "
            f"(supported {MIN_OPSET}..{MAX_OPSET} with onnx {onnx.__version__})"
        )
    if any(n.op_type == "" for n in model.graph.node):
        raise GraphError(f"{label}: a node has an empty op_type (corrupt model)")
