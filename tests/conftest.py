"""Shared test fixtures. Real traces live in ../shared (read-only, never copied here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

# the store tests' database fixtures (`url`: SQLite and a real PostgreSQL, `postgres_url`)
pytest_plugins = ["support.store_fixtures"]

REPO = Path(__file__).resolve().parents[1]

# Markers for the fast inner loop (`pytest -m "not slow"`, README "Tests"): a test that starts a real
# outside component is marked by what it starts, and every such test is also `slow`. The rule reads the
# test module's own text (what it imports or names) so that a new test file is marked without a list.
_COMPONENT_MARKS = {
    "k8s": ("support.control_plane", "extender_control_plane", "start_control_plane"),
    "browser": ("chromium",),
    "dask": ("dask",),
    "prometheus": ('"prometheus"',),
}
_module_marks: dict[str, tuple[str, ...]] = {}


def _marks_of(path: Path) -> tuple[str, ...]:
    key = str(path)
    if key not in _module_marks:
        text = path.read_text(errors="replace")
        _module_marks[key] = tuple(m for m, needles in _COMPONENT_MARKS.items() if any(n in text for n in needles))
    return _module_marks[key]


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        marks = list(_marks_of(Path(item.fspath)))
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if "postgres_url" in item.fixturenames or params.get("url") == "postgresql":
            marks.append("postgres")
        for name in marks:
            item.add_marker(getattr(pytest.mark, name))
        if marks:
            item.add_marker(pytest.mark.slow)
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
