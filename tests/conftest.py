"""Shared test fixtures. Real traces live in ../shared (read-only, never copied here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

# the store tests' database fixtures (`url`: SQLite and a real PostgreSQL, `postgres_url`)
pytest_plugins = ["support.store_fixtures"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared() -> Path:
    """Path to ../shared; tests that need it are skipped where it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED


@pytest.fixture(scope="module")
def philly_reference(shared):
    """The Helios reference run's input: 68,503 Philly jobs of Oct-Nov 2017 and its VC sizes."""
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    vc_nodes = load_vc_config(shared / "traces/philly/philly_vc_config.csv")
    trace = load_trace(shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz", "helios-log",
                       start="2017-10-01 00:00:00", end="2017-11-30 23:59:00", vcs=list(vc_nodes))
    return trace, vc_nodes
