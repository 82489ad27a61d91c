"""Tell which kind of directory we were given: a single run, a policy comparison or an energy replay.

Detection looks only at file names (and, when ambiguous, summary.json keys), so a half-written
directory yields an error that names the file that is missing rather than a confusing failure later.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

from dlsched.report.errors import ReportError

RUN_FILES = ("summary.json", "jobs.csv", "timeline.csv")
ENERGY_KEYS = frozenset({"smape", "rmse", "daily_wakeups", "avg_powered_off_nodes", "nodes_per_wakeup"})


class Layout(Enum):
    """The directory layouts the report understands."""

    RUN = "run"
    COMPARISON = "comparison"
    ENERGY = "energy"
    SWEEP = "sweep"
    EXPERIMENT = "experiment"  # dlsched experiment topo-*: summary.json with meta.experiment
    SHARING = "sharing"      # dlsched experiment horus-table6 ... --out DIR


def require_file(path: Path) -> Path:
    """Return ``path`` if it is a file; otherwise fail with a message that names it."""
    if not path.is_file():
        raise ReportError(f"missing file: {path}")
    return path


def read_json(path: Path) -> dict:
    """Read a JSON object, turning decode errors into a ReportError that names the file."""
    require_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data


def detect_layout(run_dir: Path) -> Layout:
    """Classify ``run_dir``; raise ReportError naming what is missing when it fits no layout."""
    if not run_dir.exists():
        raise ReportError(f"report directory not found: {run_dir}")
    if not run_dir.is_dir():
        raise ReportError(f"not a directory: {run_dir}")
    if (run_dir / "sweep.json").is_file():  # dlsched sweep: cells/, results.parquet
        return Layout.SWEEP
    if (run_dir / "summary.csv").is_file():
        return Layout.COMPARISON
    if (run_dir / "series.csv").is_file():
        return Layout.ENERGY
    if (run_dir / "sharing_experiment.json").is_file():
        return Layout.SHARING
    summary = run_dir / "summary.json"
    if not summary.is_file():
        raise ReportError(
            f"missing file: {summary} (or summary.csv): {run_dir} is not a run directory "
            "(summary.json, jobs.csv, timeline.csv), a comparison directory (summary.csv and one "
            "folder per policy) or an energy replay directory (summary.json, series.csv)"
        )
    if not (run_dir / "jobs.csv").is_file() and isinstance(read_json(summary).get("meta"), dict) \
            and "experiment" in read_json(summary)["meta"]:
        return Layout.EXPERIMENT
    if not (run_dir / "jobs.csv").is_file() and ENERGY_KEYS & read_json(summary).keys():
        require_file(run_dir / "series.csv")
    return Layout.RUN
