"""Reading delimited trace files as strings and validating columns in bulk.

Every cell is read as text so that ids such as ``6214e9`` stay strings and every bad value can be
reported with its file line. Validation is vectorised: each check yields a boolean mask, and
:class:`Checks` turns the first failing row into a :class:`TraceError` (or counts every failing
row under its first reason when invalid rows are skipped).
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.traces.model import LoadReport, TraceError


@dataclass(slots=True)
class Table:
    """A trace file read as text: one string column per header field plus 1-based file lines."""

    path: str
    frame: pd.DataFrame
    lines: np.ndarray
    comment: str = ""
    header: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.frame)

    def require(self, *columns: str) -> None:
        """Raise for the first missing column: a file-level error that skipping cannot fix."""
        have = list(self.frame.columns)
        shown = ", ".join(self.header or have)
        for col in columns:
            if col not in have:
                raise TraceError(self.path, f"missing column {col!r} (header has: {shown})",
                                 line=1 + (1 if self.comment else 0), column=col)

    def text(self, column: str) -> np.ndarray:
        """The column as an object array of strings ("" where empty); typed columns are converted."""
        col = self.frame[column]
        if col.dtype == np.float64:  # fast-parsed numbers: show 5 rather than 5.0 in messages
            return np.array(["" if np.isnan(v) else f"{v:.15g}" for v in col.tolist()], dtype=object)
        if isinstance(col.dtype, pd.CategoricalDtype):
            labels = np.append(col.cat.categories.to_numpy(dtype=object).astype(str).astype(object), "")
            return labels[col.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing ""
        if col.dtype != object:
            return np.where(col.isna().to_numpy(), "", col.astype(str).to_numpy(dtype=object)).astype(object)
        return col.fillna("").to_numpy(dtype=object)


def read_table(path: str | Path, *, names: list[str] | None = None, columns: set[str] | None = None,
               numeric: set[str] = frozenset()) -> Table:
    """Read a CSV (optionally gzip) as strings, keeping the file line of every data row.

    A leading ``# key=value`` comment line (the canonical CSV's origin) is returned in
    ``comment``. All-empty rows at the end of the file (e.g. the Pollux trace's trailing blank
    line) are not rows and are dropped; an all-empty row in the middle is kept so that it fails
    validation visibly. ``names`` reads a header-less file with the given column names;
    ``columns`` reads only those (others are never parsed). ``numeric`` columns are first
    parsed as floats by the C parser (fast path); any bad cell makes the whole file re-read as
    text so that validation can point at it.
    """
    path = str(path)
    data = _read_bytes(path)
    comment, skip = "", 0
    if data.startswith(b"#"):
        first, _, data = data.partition(b"\n")
        comment, skip = first[1:].decode("utf-8", "replace").strip(), 1
    data = data.rstrip(b"\r\n") + b"\n"
    if data.strip() == b"":
        raise TraceError(path, "file is empty (no header line)", line=1 + skip)
    header_lines = skip + (0 if names is not None else 1)
    raw = list(names) if names else data.partition(b"\n")[0].decode("utf-8", "replace").rstrip("\r").split(",")
    header = tuple(c.strip() for c in raw)
    blank_inside = b"\n\n" in data or b"\n\r\n" in data
    if columns is None:
        use = None
    else:
        wanted = set(columns)
        use = (lambda c: str(c).strip() in wanted) if names is None else [n for n in names if n in wanted]
    kinds = {n: ("float64" if c in numeric else object) for r, c in zip(raw, header) for n in (r, c)}
    frame = None
    if numeric and not blank_inside:
        try:
            frame = _parse(path, data, names, use, kinds)
        except (ValueError, TypeError):
            frame = None
    if frame is None:
        frame = _parse(path, data, names, use, {n: object for r, c in zip(raw, header) for n in (r, c)})
    frame.columns = [str(c).strip() for c in frame.columns]
    lines = np.arange(len(frame), dtype=np.int64) + header_lines + 1
    if len(frame) and not frame.dtypes.eq("float64").all():
        text_cols = [c for c in frame.columns if frame[c].dtype != np.float64]
        empty = (frame[text_cols] == "").all(axis=1).to_numpy()
        if empty[-1]:
            last = len(empty) - int(np.argmin(empty[::-1])) if not empty.all() else 0
            frame, lines = frame.iloc[:last], lines[:last]
    return Table(path, frame.reset_index(drop=True), lines, comment, header)


def _parse(path: str, data: bytes, names: list[str] | None, usecols, dtype: dict) -> pd.DataFrame:
    try:
        return pd.read_csv(io.BytesIO(data), dtype=dtype, keep_default_na=False, na_filter=False,
                           skip_blank_lines=False, header=None if names else "infer", names=names,
                           skipinitialspace=True, engine="c", usecols=usecols, encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise TraceError(path, "file is empty (no header line)", line=1) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TraceError(path, f"not a valid CSV file: {exc}") from None


def _read_bytes(path: str) -> bytes:
    """The whole file, gunzipped if it ends in ``.gz``, with read errors as TraceError."""
    try:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as fh:
            return fh.read()
    except OSError as exc:
        raise TraceError(path, f"cannot read file: {exc.strerror or exc}") from None
    except EOFError as exc:
        raise TraceError(path, f"truncated gzip file: {exc}") from None


def open_text(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


class Checks:
    """Collects row-level validation failures; the first by file line wins when raising.

    Each row is attributed to the first check it fails, so skipped rows are counted once.
    """

    def __init__(self, table: Table) -> None:
        self.table = table
        self.bad = np.zeros(len(table), dtype=bool)
        self._found: list[tuple[str, str, np.ndarray, np.ndarray | None]] = []

    def fail(self, mask: np.ndarray, column: str, reason: str, values: np.ndarray | None = None) -> None:
        """Record rows in ``mask`` as invalid in ``column`` for ``reason`` (``values`` for messages)."""
        new = np.asarray(mask, dtype=bool) & ~self.bad
        if new.any():
            if values is None and column in self.table.frame.columns:
                values = self.table.text(column)
            self._found.append((column, reason, new, values))
            self.bad |= new

    def resolve(self, report: LoadReport, skip_invalid: bool) -> np.ndarray:
        """Raise for the first invalid row, or count skipped rows by reason; return the keep-mask."""
        if not self._found:
            return ~self.bad
        if not skip_invalid:
            _, order = min((int(np.argmax(m)), i) for i, (_, _, m, _) in enumerate(self._found))
            col, why, mask, values = self._found[order]
            row = int(np.argmax(mask))
            raise TraceError(self.table.path, _describe(why, values, row), int(self.table.lines[row]), col)
        for col, why, mask, values in self._found:
            idx = np.flatnonzero(mask)
            key = f"{col}: {why}"
            report.skipped[key] += len(idx)
            report.examples.setdefault(key, f"line {self.table.lines[idx[0]]}: "
                                            f"{_describe(why, values, int(idx[0]))}")
        return ~self.bad


def _describe(reason: str, values: np.ndarray | None, row: int) -> str:
    return reason if values is None else f"{reason}: {values[row]!r}"


def parse_float(values: np.ndarray) -> np.ndarray:
    """Float array with NaN where the text is empty or not a number."""
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def check_number(checks: Checks, column: str, *, integer: bool = False, minimum: float | None = None,
                 positive: bool = False, required: bool = True) -> np.ndarray:
    """Parse a numeric column, recording empty / non-numeric / non-integer / out-of-range rows."""
    col = checks.table.frame[column]
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        nums = col.to_numpy(dtype=np.float64, na_value=np.nan)
        empty = np.isnan(nums)
    else:
        text = checks.table.text(column)
        nums = parse_float(text)
        empty = text == ""
    if required:
        checks.fail(empty, column, "empty value")
    checks.fail(np.isnan(nums) & ~empty, column, "not an integer" if integer else "not a number")
    ok = ~np.isnan(nums)
    if integer:
        checks.fail(ok & (nums != np.round(nums)), column, "not an integer")
    checks.fail(ok & ~np.isfinite(nums), column, "not a finite number")
    if minimum is not None:
        checks.fail(ok & (nums < minimum), column, "negative value" if minimum == 0 else f"below {minimum}")
    if positive:
        checks.fail(ok & (nums <= 0), column, "not positive")
    return nums


def check_datetime(checks: Checks, column: str) -> np.ndarray:
    """Parse naive wall-clock times (``YYYY-MM-DD HH:MM:SS``; any ISO 8601 accepted) to datetime64."""
    text = checks.table.text(column)
    series = pd.Series(text, dtype=object)
    parsed = pd.to_datetime(series, format="%Y-%m-%d %H:%M:%S", errors="coerce")
    retry = parsed.isna().to_numpy() & (text != "")
    if retry.any():
        again = pd.to_datetime(series[retry], format="ISO8601", errors="coerce", utc=True)
        parsed = parsed.astype("datetime64[ns]")
        parsed[retry] = again.dt.tz_convert(None).astype("datetime64[ns]")
    values = parsed.to_numpy(dtype="datetime64[ns]")
    checks.fail(text == "", column, "empty value")
    checks.fail(np.isnat(values) & (text != ""), column, "bad timestamp (want YYYY-MM-DD HH:MM:SS)")
    return values


def check_text(checks: Checks, column: str) -> np.ndarray:
    """A required string column: empty values are invalid."""
    text = checks.table.text(column)
    checks.fail(text == "", column, "empty value")
    return text
