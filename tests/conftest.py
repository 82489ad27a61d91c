"""Shared test fixtures. Real traces live in ../shared (read-only, never copied here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared() -> Path:
    """Path to ../shared; tests that need it are skipped where it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED
