"""The predictor shipped inside the package (``data/default/``), trained only on permissively
licensed data (see ``data/default/manifest.json`` and docs/predictors.md)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from dlsched.predictors.resources.bundle import Predictor

DEFAULT_DIR = Path(__file__).resolve().parent / "data" / "default"


@lru_cache(maxsize=1)
def load_default() -> Predictor | None:
    """The shipped default predictor, or None when the package carries none (the library then
    works without predictions; train one with ``dlsched predictor train``)."""
    if not (DEFAULT_DIR / "manifest.json").is_file():
        return None
    return Predictor.load(DEFAULT_DIR)
