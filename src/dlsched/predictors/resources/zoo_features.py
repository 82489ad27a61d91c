"""Graph features of every zoo model at one batch, shipped as package data.

Exporting the large zoo models (GPT-2 large: minutes of CPU, GBs of memory) is too slow for the
test suite, yet the memory floor must hold for every one of them. ``data/zoo_graph_features.json``
holds what ``graph_source.graph_features(name, ZOO_FEATURES_BATCH)`` returns for each zoo model, as
our own exporter and analysis produce it. Regenerate it after a change to the zoo or the graph
analysis with ``python scripts/zoo_graph_features.py`` (``--refresh`` re-exports; a test compares a
live export of the small models with it)."""

from __future__ import annotations

import json
from pathlib import Path

SHIPPED_ZOO_FEATURES = Path(__file__).resolve().parent / "data" / "zoo_graph_features.json"
#: the batch the shipped features are taken at
ZOO_FEATURES_BATCH = 8


def load_zoo_features(path: Path = SHIPPED_ZOO_FEATURES) -> dict[str, dict[str, float]]:
    """Zoo name -> feature dict (floats, ``batch`` included) at :data:`ZOO_FEATURES_BATCH`."""
    doc = json.loads(path.read_text())
    if int(doc["batch"]) != ZOO_FEATURES_BATCH:
        raise ValueError(f"{path}: features at batch {doc['batch']}, expected {ZOO_FEATURES_BATCH}")
    return {name: {k: float(v) for k, v in feats.items()} for name, feats in doc["features"].items()}


def write_zoo_features(features: dict[str, dict[str, float]], zoo_version: int,
                       path: Path = SHIPPED_ZOO_FEATURES) -> Path:
    """Write the table, keys sorted so a regeneration diffs line by line."""
    doc = {"batch": ZOO_FEATURES_BATCH, "zoo_version": zoo_version,
           "regenerate": "python scripts/zoo_graph_features.py",
           "features": {n: {k: float(v) for k, v in sorted(f.items())} for n, f in sorted(features.items())}}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
