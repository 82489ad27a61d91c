"""The benchmarks' shared modules, for tests that check them without a control plane."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def k8s_phases():
    """``benchmarks/k8s_phases.py``, imported as the benchmarks import it (it reads ``support.*``)."""
    for path in (ROOT / "benchmarks", ROOT / "tests"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    import k8s_phases

    return k8s_phases


def load_benchmark(name: str):
    """``benchmarks/<name>.py``, imported as the benchmarks import each other (by module name)."""
    import importlib

    k8s_phases()   # the same sys.path entries
    return importlib.import_module(name)
