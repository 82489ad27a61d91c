"""Read run, comparison and energy directories into small in-memory records.

Only the columns the report needs are parsed, which keeps 70k-job comparisons fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.report.errors import ReportError
from dlsched.report.layout import read_json, require_file

JOB_COLUMNS = ("vc", "jct", "queue_delay")
TIMELINE_COLUMNS = ("time", "busy_gpus", "total_gpus", "queued_jobs")
SERIES_COLUMNS = ("time", "active", "predicted", "powered_on")


@dataclass
class RunData:
    """One simulated run: its summary.json, the per-job columns we plot, and its timeline."""

    label: str
    path: Path
    summary: dict
    jobs: pd.DataFrame
    timeline: pd.DataFrame | None


@dataclass
class ComparisonData:
    """A policy comparison: summary.csv (one row per policy) plus each policy's run."""

    path: Path
    table: pd.DataFrame
    runs: list[RunData]


@dataclass
class EnergyData:
    """An energy replay: its summary.json and the node series (time parsed to datetime64)."""

    path: Path
    summary: dict
    series: pd.DataFrame


def read_csv(path: Path, required: Sequence[str], optional: Sequence[str] = ()) -> pd.DataFrame:
    """Read only the needed columns; fail naming the file and the columns it lacks."""
    require_file(path)
    wanted = set(required) | set(optional)
    try:
        frame = pd.read_csv(path, usecols=lambda c: c in wanted, dtype={"vc": str, "policy": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path} is not a readable CSV file: {exc}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ReportError(f"{path} lacks column(s): {', '.join(missing)}")
    return frame


def numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Coerce columns to float so empty cells (e.g. powered_nodes with energy saving off) become NaN."""
    for col in columns:
        if col in frame.columns:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def load_run(run_dir: Path, label: str | None = None) -> RunData:
    """Load a single-run directory; timeline.csv is optional (its plot is skipped without it)."""
    summary = read_json(run_dir / "summary.json")
    jobs = numeric(read_csv(run_dir / "jobs.csv", JOB_COLUMNS), ("jct", "queue_delay"))
    jobs["vc"] = jobs["vc"].fillna("")
    timeline = None
    if (run_dir / "timeline.csv").is_file():
        cols = TIMELINE_COLUMNS + ("powered_nodes",)
        timeline = numeric(read_csv(run_dir / "timeline.csv", TIMELINE_COLUMNS, ("powered_nodes",)), cols)
    name = label or str(summary.get("policy") or run_dir.name)
    return RunData(label=name, path=run_dir, summary=summary, jobs=jobs, timeline=timeline)


def policy_dir(root: Path, policy: str) -> Path:
    """Find a policy's run folder: ``root/<policy>`` or else a subfolder whose summary names it."""
    direct = root / policy
    if direct.is_dir():
        return direct
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        summary = sub / "summary.json"
        if summary.is_file() and str(read_json(summary).get("policy")) == policy:
            return sub
    raise ReportError(f"missing file: {direct / 'summary.json'} (run folder of policy {policy!r})")


def load_comparison(root: Path) -> ComparisonData:
    """Load summary.csv and the run folder of every policy it lists, in its order."""
    path = root / "summary.csv"
    require_file(path)
    try:
        table = pd.read_csv(path, dtype={"policy": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path} is not a readable CSV file: {exc}") from None
    if "policy" not in table.columns:
        raise ReportError(f"{path} lacks column(s): policy")
    if table.empty:
        raise ReportError(f"{path} has no rows")
    runs = [load_run(policy_dir(root, p), label=p) for p in table["policy"].astype(str)]
    return ComparisonData(path=root, table=table, runs=runs)


def load_energy(root: Path) -> EnergyData:
    """Load an energy replay; the series' ISO time strings become datetime64 for plotting."""
    summary = read_json(root / "summary.json")
    series = numeric(read_csv(root / "series.csv", ("time", "active"), SERIES_COLUMNS[2:]), SERIES_COLUMNS[1:])
    path = root / "series.csv"
    if "predicted" not in series.columns and "powered_on" not in series.columns:
        raise ReportError(f"{path} lacks column(s): predicted, powered_on")
    try:
        series["time"] = pd.to_datetime(series["time"], format="ISO8601")
    except (ValueError, TypeError) as exc:
        raise ReportError(f"{path}: column 'time' is not ISO datetimes: {exc}") from None
    if getattr(series["time"].dt, "tz", None) is not None:
        series["time"] = series["time"].dt.tz_localize(None)
    series = series.sort_values("time", kind="stable").reset_index(drop=True)
    return EnergyData(path=root, summary=summary, series=series)


def finite(values: pd.Series) -> np.ndarray:
    """Float values without NaN/inf: unfinished jobs have no JCT and must not skew plots."""
    arr = values.to_numpy(dtype=float, na_value=np.nan)
    return arr[np.isfinite(arr)]
