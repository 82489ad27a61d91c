"""The common shape of a loaded profile set, and CSV helpers whose errors name file, row, column."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.core.colocation import JobProfile, PairObservation


class ProfileError(ValueError):
    """A profile folder or table is missing or malformed; the message says which and where."""


@dataclass(frozen=True)
class ProfileSet:
    """Single-job profiles and measured pairs of one source.

    ``jobs`` maps a GPU type (``""`` when the source does not record it) to the profiles of the
    jobs measured alone on it. ``notes`` counts everything flagged or left out while loading, so
    that nothing disappears silently.
    """

    source: str
    jobs: dict[str, list[JobProfile]]
    pairs: list[PairObservation]
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_types(self) -> list[str]:
        return sorted(self.jobs)

    def pairs_on(self, gpu_type: str) -> list[PairObservation]:
        return [p for p in self.pairs if p.gpu_type == gpu_type]


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read a CSV that must have ``columns``; one-line errors naming the file."""
    if not path.is_file():
        raise ProfileError(f"{path}: file not found")
    try:
        df = pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any parser failure is bad user input
        raise ProfileError(f"{path}: cannot read as CSV ({type(exc).__name__}: {exc})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ProfileError(f"{path}: missing column(s) {', '.join(missing)}")
    if df.empty:
        raise ProfileError(f"{path}: no rows")
    return df


def numeric(df: pd.DataFrame, path: Path, col: str, allow_empty: bool = False) -> np.ndarray:
    """A column as floats; the first non-numeric (or, unless ``allow_empty``, empty) cell is
    reported with its CSV line. Empty cells become NaN."""
    vals = pd.to_numeric(df[col], errors="coerce")
    bad = (vals.isna() & (df[col].notna() if allow_empty else True)).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ProfileError(f"{path}: line {row + 2}: column {col!r} is not a number ({df[col].iloc[row]!r})")
    return vals.to_numpy(float)
