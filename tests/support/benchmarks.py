"""The benchmarks' shared modules, for tests that check them without a control plane."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_benchmark(name: str):
    """``benchmarks/<name>.py``, imported as the benchmarks import each other (by module name,
    with ``support.*`` from tests/)."""
    import importlib

    for path in (ROOT / "benchmarks", ROOT / "tests"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    return importlib.import_module(name)


def k8s_phases():
    """``benchmarks/k8s_phases.py``."""
    return load_benchmark("k8s_phases")
