"""Safe save/load of predictors: JSON manifest + each model in its library's own text/JSON
format. Nothing is ever unpickled; pickle-family files are refused before they are opened.

Layout of a saved predictor directory::

    manifest.json        format, versions, training-data SHA-256, metrics, file hashes
    util.<suffix>        utilisation regressor (.json / .lgb.txt / .xgb.json)
    memory.json          memory estimator
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dlsched.predictors.resources.memory import MEMORY_REGISTRY
from dlsched.predictors.resources.regressors import REGISTRY, Regressor

FORMAT = "dlsched-predictor/1"
UNSAFE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".joblib")


class PredictorFormatError(ValueError):
    """A predictor file is unsafe (pickle family), missing, or does not match its manifest."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_files(paths: list[str | Path]) -> str:
    """One digest for a training set made of several files (order-independent)."""
    return hashlib.sha256("".join(sorted(sha256_file(p) for p in paths)).encode()).hexdigest()


def refuse_unsafe(path: str | Path) -> Path:
    """Raise for pickle-based formats (they can run arbitrary code when loaded)."""
    p = Path(path)
    if any(str(p).lower().endswith(s) for s in UNSAFE_SUFFIXES):
        raise PredictorFormatError(
            f"{p}: refusing to load a pickle-based file ({p.suffix}); dlsched loads only its "
            f"JSON manifest with JSON/LightGBM-text/XGBoost-JSON models. Re-train with `dlsched predictor train`.")
    return p


def _lookup(kind: str) -> type[Regressor]:
    cls = REGISTRY.get(kind) or MEMORY_REGISTRY.get(kind)
    if cls is None:
        raise PredictorFormatError(f"unknown model kind {kind!r} in manifest")
    return cls


def write_model(model: Regressor, out_dir: Path, stem: str) -> dict[str, Any]:
    """Write one model; returns its manifest entry (kind, params, file, sha256)."""
    name = stem + type(model).payload_suffix
    path = out_dir / name
    path.write_text(model.payload(), encoding="utf-8")
    return {"kind": type(model).kind, "params": model.get_params(), "file": name, "sha256": sha256_file(path)}


def read_model(entry: dict[str, Any], base: Path) -> Regressor:
    """Read one model after checking its file against the manifest hash."""
    path = refuse_unsafe(base / entry["file"])
    if not path.is_file():
        raise PredictorFormatError(f"{path}: model file listed in the manifest is missing")
    if sha256_file(path) != entry.get("sha256"):
        raise PredictorFormatError(f"{path}: SHA-256 does not match the manifest (file changed?)")
    return _lookup(entry["kind"]).restore(entry["params"], path.read_text(encoding="utf-8"))


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> Path:
    path = out_dir / "manifest.json"
    path.write_text(json.dumps({"format": FORMAT, **manifest}, indent=2, sort_keys=True), encoding="utf-8")
    return path


def read_manifest(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Manifest and its directory; ``path`` is the directory or the manifest file."""
    p = refuse_unsafe(path)
    if p.is_dir():
        p = p / "manifest.json"
    if not p.is_file():
        raise PredictorFormatError(f"{p}: no predictor manifest here")
    if p.suffix != ".json":
        raise PredictorFormatError(f"{p}: expected a JSON manifest (manifest.json)")
    try:
        manifest = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PredictorFormatError(f"{p}: not valid JSON ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise PredictorFormatError(f"{p}: format {manifest.get('format')!r} is not {FORMAT!r}")
    return manifest, p.parent
