"""Loading node-occupancy series (busy and total nodes over time) for the energy service.

Two layouts are accepted, recognised by their header:

* ``time,active,total`` – busy and total *nodes* per sample (Philly, as used by the Helios CES
  artifact);
* Helios per-VC sequences (``time,...,total_gpu_num,running_gpu_num,...``) – GPU counts, turned
  into nodes with ``ceil(running / gpus_per_node)`` (jobs packed onto as few nodes as possible,
  which is how Slurm allocates in Helios) and ``total_gpu_num / gpus_per_node``.

Bad input raises :class:`SeriesError` naming the file, the 1-based line and the column, so the
CLI can print one clear line instead of a traceback.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.traces._table import gzip_error
from dlsched.traces.model import TraceError

STEP = pd.Timedelta(minutes=10)
"""Control and forecasting step of the CES service (the reference resamples to 10 minutes)."""


class SeriesError(TraceError):
    """Invalid occupancy series; the message names the file, line and column."""


@dataclass(frozen=True, slots=True)
class NodeSeries:
    """Busy and total nodes on a regular grid (``STEP``); empty bins are NaN (gaps in the log)."""

    active: pd.Series
    total: pd.Series
    source: str = ""

    @property
    def step(self) -> pd.Timedelta:
        return pd.Timedelta(self.active.index.freq)

    def window(self, start: pd.Timestamp | None, end: pd.Timestamp) -> NodeSeries:
        """Rows with ``start <= time < end`` (all rows before ``end`` when ``start`` is None);
        positional slicing keeps the grid's ``freq``."""
        idx = self.active.index
        lo = 0 if start is None else int(idx.searchsorted(start, side="left"))
        hi = int(idx.searchsorted(end, side="left"))
        return NodeSeries(self.active.iloc[lo:hi], self.total.iloc[lo:hi], self.source)


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise SeriesError(str(path), "file not found")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except zlib.error as exc:  # a damaged deflate stream is no OSError: named here, not "internal error"
        raise gzip_error(str(path), exc, SeriesError) from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError) as exc:
        raise SeriesError(str(path), f"not a readable CSV file ({str(exc).strip()})") from None
    except pd.errors.EmptyDataError:
        raise SeriesError(str(path), "file is empty") from None


def _numeric(frame: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    """Column as float; the first bad cell is reported with its line (header = line 1)."""
    values = pd.to_numeric(frame[column].str.strip(), errors="coerce")
    bad = values.isna() | (values < 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise SeriesError(str(path), f"expected a non-negative number, got {frame[column].iloc[row]!r}",
                          line=row + 2, column=column)
    return values.to_numpy(dtype=float)


def load_node_series(path: str | Path, gpus_per_node: int = 8, step: pd.Timedelta = STEP) -> NodeSeries:
    """Read a per-minute occupancy CSV (plain or .gz) and resample it to ``step`` bins.

    Each bin keeps the *maximum* of its samples, as the reference does: powering off must never
    drop below the peak demand inside a control period. A directory is read as one cluster made of
    all its ``*.csv``/``*.csv.gz`` files (e.g. the Earth VC sequences), summed per bin.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted([*path.glob("*.csv"), *path.glob("*.csv.gz")])
        if not files:
            raise SeriesError(str(path), "directory holds no *.csv or *.csv.gz files")
        parts = [_load_file(f, gpus_per_node, step) for f in files]
        n = len(parts)  # a bin missing in any file is missing for the cluster
        active = pd.concat([p.active for p in parts], axis=1).sum(axis=1, min_count=n).asfreq(step)
        total = pd.concat([p.total for p in parts], axis=1).sum(axis=1, min_count=n).asfreq(step)
        return NodeSeries(active.rename("active"), total.rename("total"), str(path))
    return _load_file(path, gpus_per_node, step)


def _load_file(path: Path, gpus_per_node: int, step: pd.Timedelta) -> NodeSeries:
    frame = _read_csv(path)
    if "time" not in frame.columns:
        raise SeriesError(str(path), f"missing column 'time' (found: {', '.join(frame.columns)})", line=1)
    if {"active", "total"} <= set(frame.columns):
        active_col, total_col, per_node = "active", "total", 1
    elif {"running_gpu_num", "total_gpu_num"} <= set(frame.columns):
        active_col, total_col, per_node = "running_gpu_num", "total_gpu_num", gpus_per_node
    else:
        raise SeriesError(str(path), "expected columns 'time,active,total' (nodes) or a Helios VC sequence "
                          "with 'running_gpu_num,total_gpu_num'", line=1)
    if frame.empty:
        raise SeriesError(str(path), "no data rows")
    times = pd.to_datetime(frame["time"].str.strip(), errors="coerce", format="mixed")
    if times.isna().any():
        row = int(np.flatnonzero(times.isna().to_numpy())[0])
        raise SeriesError(str(path), f"cannot parse time {frame['time'].iloc[row]!r}",
                          line=row + 2, column="time")
    active = _numeric(frame, active_col, path)
    total = _numeric(frame, total_col, path)
    over = np.flatnonzero(active > total)
    if len(over):  # more busy than there are: a swapped or mislabelled column, never a real state
        row = int(over[0])
        raise SeriesError(str(path), f"{active_col} {frame[active_col].iloc[row].strip()} is more than "
                          f"{total_col} {frame[total_col].iloc[row].strip()} (busy cannot exceed total; "
                          f"{len(over):,} such rows)", line=row + 2, column=active_col)
    if per_node > 1:
        active, total = np.ceil(active / per_node), total / per_node
    index = pd.DatetimeIndex(times, name="time")
    raw = pd.DataFrame({"active": active, "total": total}, index=index).sort_index()
    binned = raw.resample(step).max()
    return NodeSeries(binned["active"], binned["total"], str(path))
