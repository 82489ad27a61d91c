"""Reading delimited trace files and validating columns in bulk.

A file becomes a :class:`Table`: one numpy array per column -- text (object array of ``str``,
"" where empty, so that ids such as ``6214e9`` stay strings), numbers (float64, NaN where empty)
or wall-clock times (datetime64[ns], NaT where empty) -- plus the file line of every row, so
that every bad value can be reported with its line.

Clean files (no quotes, no blank lines inside, no padding after commas, every number finite
and every time ISO 8601) are parsed by pyarrow's CSV reader with the column types given, in a
few tens of milliseconds. Anything else goes through the all-text pandas reader, which
accepts what pyarrow would not and lets validation point at the bad cell; both give the same
columns for a clean file. Validation is vectorised: each check yields a boolean mask, and
:class:`Checks` turns the first failing row into a :class:`TraceError` (or counts every failing
row under its first reason when invalid rows are skipped).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np

from dlsched.traces.model import LoadReport, TraceError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(slots=True)
class Table:
    """A trace file as columns: text, float64 or datetime64[ns] arrays plus 1-based file lines."""

    path: str
    columns: dict[str, np.ndarray]
    lines: np.ndarray
    comment: str = ""
    header: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.lines)

    def __contains__(self, column: str) -> bool:
        return column in self.columns

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def require(self, *columns: str) -> None:
        """Raise for the first missing column: a file-level error that skipping cannot fix."""
        shown = ", ".join(self.header or self.names)
        for col in columns:
            if col not in self.columns:
                raise TraceError(self.path, f"missing column {col!r} (header has: {shown})",
                                 line=1 + (1 if self.comment else 0), column=col)

    def text(self, column: str) -> np.ndarray:
        """The column as an object array of strings ("" where empty); typed columns are formatted."""
        col = self.columns[column]
        if col.dtype == np.float64:  # parsed numbers: show 5 rather than 5.0 in messages
            return np.array(["" if np.isnan(v) else f"{v:.15g}" for v in col.tolist()], dtype=object)
        if col.dtype.kind == "M":
            text = np.datetime_as_string(col, unit="s").astype(object)
            text[np.isnat(col)] = ""
            return np.array([t.replace("T", " ") for t in text], dtype=object)
        return col

    @classmethod
    def from_frame(cls, path: str, frame: pd.DataFrame, lines: np.ndarray, comment: str = "",
                   header: tuple[str, ...] = ()) -> Table:
        """A table from a pandas frame (the all-text reader, Parquet): numbers stay float64,
        everything else becomes text as the frame shows it."""
        import pandas as pd

        columns: dict[str, np.ndarray] = {}
        for name in frame.columns:
            col = frame[name]
            if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
                columns[str(name)] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            elif isinstance(col.dtype, pd.CategoricalDtype):
                labels = np.append(col.cat.categories.to_numpy(dtype=object).astype(str).astype(object), "")
                columns[str(name)] = labels[col.cat.codes.to_numpy()]  # code -1 (missing) picks ""
            elif col.dtype != object:
                columns[str(name)] = np.where(col.isna().to_numpy(), "",
                                              col.astype(str).to_numpy(dtype=object)).astype(object)
            else:
                columns[str(name)] = col.fillna("").to_numpy(dtype=object)
        return cls(path, columns, lines, comment, header)


@dataclass(slots=True)
class _Raw:
    """A CSV file's bytes after the optional ``# key=value`` comment line, with its header."""

    path: str
    data: bytes
    comment: str
    header_lines: int            # file lines before the first data row
    raw: list[str]               # header fields as written (or the given names)
    header: tuple[str, ...]      # the same, stripped
    named: bool                  # header-less file read with given names
    blank_inside: bool = field(default=False)


def _read_raw(path: str, names: list[str] | None) -> _Raw:
    data = _read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 BOM (Excel's "CSV UTF-8"): not part of the header
        data = data[3:]
    comment, skip = "", 0
    if data.startswith(b"#"):
        first, _, data = data.partition(b"\n")
        comment, skip = first[1:].decode("utf-8", "replace").strip(), 1
    if data[-1:] != b"\n" or data[-2:-1] in (b"\n", b"\r"):  # else it already ends in one "\n": no copy
        data = data.rstrip(b"\r\n") + b"\n"
    if data.strip() == b"":
        raise TraceError(path, "file is empty (no header line)", line=1 + skip)
    raw = list(names) if names else data.partition(b"\n")[0].decode("utf-8", "replace").rstrip("\r").split(",")
    return _Raw(path, data, comment, skip + (0 if names is not None else 1), raw,
                tuple(c.strip() for c in raw), names is not None,
                b"\n\n" in data or b"\n\r\n" in data)


def read_table(path: str | Path, *, names: list[str] | None = None, columns: set[str] | None = None,
               numeric: set[str] = frozenset(), datetimes: set[str] = frozenset()) -> Table:
    """Read a CSV (optionally gzip), keeping the file line of every data row.

    A leading ``# key=value`` comment line (the canonical CSV's origin) is returned in
    ``comment``. All-empty rows at the end of the file (e.g. the Pollux trace's trailing blank
    line) are not rows and are dropped; an all-empty row in the middle is kept so that it fails
    validation visibly. ``names`` reads a header-less file with the given column names;
    ``columns`` reads only those (others are never parsed). ``numeric`` columns come back as
    float64 and ``datetimes`` (naive ISO 8601 wall clock) as datetime64[ns] when the whole file
    parses cleanly; otherwise every column is text and validation parses it.
    """
    raw = _read_raw(str(path), names)
    if columns is None:
        wanted = list(raw.header)
    else:
        wanted = [c for c in raw.header if c in set(columns)]
    table = _read_arrow(raw, wanted, set(numeric), set(datetimes))
    return table if table is not None else _read_pandas(raw, columns, set(numeric))


def _read_arrow(raw: _Raw, wanted: list[str], numeric: set[str], datetimes: set[str]) -> Table | None:
    """The fast reader, or None when the file has anything it would read differently from the
    all-text reader (quotes, blank or padded fields, a BOM, duplicate names, a cell that does not
    parse as its type, non-finite numbers, a trailing all-empty row)."""
    data = raw.data
    if (raw.blank_inside or b'"' in data or b", " in data or b",\t" in data or b"\n " in data
            or b"\n\t" in data or data[:1] in (b" ", b"\t") or data.startswith(b"\xef\xbb\xbf")
            or len(set(raw.header)) != len(raw.header) or "" in raw.header or not wanted
            or (not raw.named and data.find(b"\n") == len(data) - 1)):  # header only
        return None
    import pyarrow as pa  # lazy: only loaders need it
    import pyarrow.csv as pcsv

    text = pa.dictionary(pa.int32(), pa.string())  # repeated names (VC, user, state) become one str each
    types = {c: pa.float64() if c in numeric else pa.timestamp("ns") if c in datetimes else text for c in wanted}
    try:
        arrow = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(column_names=list(raw.header), skip_rows=0 if raw.named else 1,
                                          block_size=1 << 22),
            parse_options=pcsv.ParseOptions(delimiter=",", quote_char=False, newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(column_types=types, include_columns=wanted,
                                                null_values=[""], strings_can_be_null=False,
                                                quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    n = arrow.num_rows
    cols: dict[str, np.ndarray] = {}
    empty_last = True
    for name in wanted:
        col = arrow.column(name)
        if name in numeric:
            values = _fixed_width(col, np.float64, np.nan)
            if np.count_nonzero(~np.isfinite(values)) != col.null_count:  # "nan", "inf", 1e999
                return None
            empty_last &= bool(n) and bool(np.isnan(values[-1]))
        elif name in datetimes:
            values = _fixed_width(col, np.int64, np.iinfo(np.int64).min).view("datetime64[ns]")
            empty_last &= bool(n) and bool(np.isnat(values[-1]))
        else:
            values = _text(col)
            empty_last &= bool(n) and values[-1] == ""
        cols[name] = values
    if empty_last:  # trailing all-empty rows: the all-text reader trims them
        return None
    lines = np.arange(n, dtype=np.int64) + raw.header_lines + 1
    return Table(raw.path, cols, lines, raw.comment, raw.header)


def _text(col) -> np.ndarray:
    """A dictionary-encoded string column as an object array of ``str`` (one object per distinct
    value and chunk, shared by its rows)."""
    parts = [np.array(chunk.dictionary.to_pylist(), dtype=object)[_values(chunk.indices, np.int32, 0)]
             for chunk in col.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=object)


def _fixed_width(col, dtype: type, missing) -> np.ndarray:
    """A float64 or timestamp[ns] column as one numpy array, ``missing`` where null."""
    parts = [_values(chunk, dtype, missing) for chunk in col.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _values(chunk, dtype: type, missing) -> np.ndarray:
    """A fixed-width Arrow array as numpy, ``missing`` where null. Read from the buffers:
    ``to_numpy`` imports pandas for arrays with nulls (and for some without)."""
    validity, data = chunk.buffers()[:2]
    start, n = chunk.offset, len(chunk)
    if n == 0:
        return np.zeros(0, dtype=dtype)
    values = np.frombuffer(data, dtype=dtype, count=start + n)[start:].copy()
    if chunk.null_count:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        values[~bits[start:start + n].astype(bool)] = missing
    return values


def _read_pandas(raw: _Raw, columns: set[str] | None, numeric: set[str]) -> Table:
    """Every cell as text (numbers as float64 when they all parse), like the file shows it."""
    path, data, names = raw.path, raw.data, (raw.raw if raw.named else None)
    if columns is None:
        use = None
    else:
        wanted = set(columns)
        use = (lambda c: str(c).strip() in wanted) if names is None else [n for n in names if n in wanted]
    kinds = {n: ("float64" if c in numeric else object) for r, c in zip(raw.raw, raw.header) for n in (r, c)}
    frame = None
    if numeric and not raw.blank_inside:
        try:
            frame = _parse(path, data, names, use, kinds)
        except (ValueError, TypeError):
            frame = None
    if frame is None:
        frame = _parse(path, data, names, use, {n: object for r, c in zip(raw.raw, raw.header) for n in (r, c)})
    frame.columns = [str(c).strip() for c in frame.columns]
    lines = np.arange(len(frame), dtype=np.int64) + raw.header_lines + 1
    if len(frame) and not frame.dtypes.eq("float64").all():
        text_cols = [c for c in frame.columns if frame[c].dtype != np.float64]
        empty = (frame[text_cols] == "").all(axis=1).to_numpy()
        if empty[-1]:
            last = len(empty) - int(np.argmin(empty[::-1])) if not empty.all() else 0
            frame, lines = frame.iloc[:last], lines[:last]
    return Table.from_frame(path, frame.reset_index(drop=True), lines, raw.comment, raw.header)


def _parse(path: str, data: bytes, names: list[str] | None, usecols, dtype: dict) -> pd.DataFrame:
    import pandas as pd

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
        if not path.endswith(".gz"):
            with open(path, "rb") as fh:
                return fh.read()
        with open(path, "rb") as fh:
            packed = fh.read()
        try:  # one call for a single-member file: faster than GzipFile's chunked reads
            dec = zlib.decompressobj(wbits=31)
            data = dec.decompress(packed)
            if dec.eof and not dec.unused_data:
                return data
        except zlib.error:
            pass
        return gzip.decompress(packed)  # several members, or the precise error below
    except gzip.BadGzipFile as exc:
        raise TraceError(path, f"not a valid gzip file ({exc})") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read file: {exc.strerror or exc}") from None
    except EOFError as exc:
        raise TraceError(path, f"truncated gzip file: {exc}") from None
    except zlib.error as exc:
        raise TraceError(path, f"corrupt gzip file: the compressed data does not decompress ({exc})") from None


GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)
"""What reading a damaged ``.gz`` raises (zlib.error is no OSError, so it needs naming)."""


def gzip_error(path: str, exc: BaseException, kind: type[TraceError] = TraceError) -> TraceError:
    """A damaged gzip file as one TraceError (or subclass ``kind``) naming the file."""
    if isinstance(exc, EOFError):
        return kind(path, f"truncated gzip file: {exc}")
    return kind(path, f"corrupt gzip file: the compressed data does not decompress ({exc})")


class _Text:
    """A text file (gzip'd or not) whose damaged-gzip errors become a TraceError naming it; a UTF-8
    BOM (CSV files saved by Excel) is dropped."""

    def __init__(self, path: str) -> None:
        self.path = path
        gz = path.endswith(".gz")
        self._fh = (gzip.open(path, "rt", encoding="utf-8-sig") if gz  # noqa: SIM115 - closed by close()
                    else open(path, encoding="utf-8-sig"))  # noqa: SIM115

    def _guard(self, call, *args):
        try:
            return call(*args)
        except GZIP_ERRORS as exc:
            raise gzip_error(self.path, exc) from None

    def read(self, size: int = -1) -> str:
        return self._guard(self._fh.read, size)

    def readline(self) -> str:
        return self._guard(self._fh.readline)

    def __iter__(self):
        while line := self.readline():
            yield line

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_text(path: str) -> _Text:
    """A file for reading as UTF-8 text, gunzipped when it ends in ``.gz``."""
    return _Text(path)


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
            if values is None and column in self.table:
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


_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def parse_float(values: np.ndarray) -> np.ndarray:
    """Float array with NaN where the text is empty or not a number."""
    if all(map(_PLAIN_NUMBER.fullmatch, values)):  # plain decimals: read the same by any parser
        return np.array(values, dtype=np.float64) if len(values) else np.zeros(0)
    import pandas as pd

    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def duplicated(values: np.ndarray) -> np.ndarray:
    """True for every occurrence of a value after its first (``pandas.Series.duplicated``)."""
    out = np.zeros(len(values), dtype=bool)
    if len(set(values.tolist())) == len(values):
        return out
    seen: set = set()
    for i, value in enumerate(values.tolist()):
        if value in seen:
            out[i] = True
        else:
            seen.add(value)
    return out


SECONDS_BOUND = 1e10
"""Largest time or duration in seconds a trace may hold (about 317 years): beyond it the float
sums of the simulation lose whole seconds (1e300 + 100 == 1e300 gives a job a JCT of 0)."""


def check_number(checks: Checks, column: str, *, integer: bool = False, minimum: float | None = None,
                 positive: bool = False, required: bool = True, seconds: bool = False) -> np.ndarray:
    """Parse a numeric column, recording empty / non-numeric / non-integer / out-of-range rows
    (``seconds``: a time or duration, at most :data:`SECONDS_BOUND` either side of zero)."""
    col = checks.table.columns[column]
    if col.dtype == np.float64:
        nums = col
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
    if seconds:
        with np.errstate(invalid="ignore"):
            checks.fail(ok & (np.abs(nums) > SECONDS_BOUND), column,
                        f"beyond {SECONDS_BOUND:.0e} s (about 317 years; the limit for times and durations)")
    return nums


def check_datetime(checks: Checks, column: str) -> np.ndarray:
    """Parse naive wall-clock times (``YYYY-MM-DD HH:MM:SS``; any ISO 8601 accepted) to datetime64."""
    col = checks.table.columns[column]
    if col.dtype.kind == "M":  # parsed by the fast reader: only empty cells can be wrong
        checks.fail(np.isnat(col), column, "empty value")
        return col.astype("datetime64[ns]")
    import pandas as pd

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
