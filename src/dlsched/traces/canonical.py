"""dlsched's own trace format (``--trace-format dlsched``), CSV or Parquet.

Columns are :data:`CANONICAL_COLUMNS` (only :data:`REQUIRED_COLUMNS` must be present), then the
optional ``attention``, ``stack`` and ``time_limit`` (seconds; empty: no limit);
``submit_time`` is in seconds from the origin. The origin (wall clock of time 0, ISO 8601) is kept
beside a CSV in ``NAME.meta.json`` (``{"format": "dlsched", "origin": ...}``), so that the CSV itself
is plain (any CSV reader takes it as is), and in the ``dlsched.origin`` schema metadata key in
Parquet; it is absent for traces that never had wall-clock times (e.g. synthetic ones). CSVs
written before this change carry it as a ``# origin=...`` first line, which is still read. Loading keeps the stored
origin (times are not re-based to the first kept job) so that a round trip is exact. In Parquet
files "line" in error messages is the 1-based row number.
"""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dlsched.core import truth
from dlsched.traces._table import Checks, Table, check_number, check_text, duplicated, read_table
from dlsched.traces.model import CANONICAL_COLUMNS, REQUIRED_COLUMNS, LoadReport, Trace, TraceError
from dlsched.traces.pipeline import Columns, LoadOptions, finish, to_timestamp
from dlsched.traces.registry import TraceFormat, register

if TYPE_CHECKING:
    import pandas as pd

ORIGIN_KEY = b"dlsched.origin"
PARQUET_SUFFIXES = (".parquet", ".pq")
_TEXT = ("user", "name", "status", "model_name", "onnx_ref")
_INT = ("cpus", "batch_size")
_FLOAT = ("gpu_util", "gpu_mem_mib")
_DICT_COLUMNS = ("vc", "user", "name", "status", "model_name", "onnx_ref")
# optional columns after the canonical ones: read when present, written only when a job sets them
# (the memory predictor's attention mode and software stack; docs/traces.md)
TRAINING_COLUMNS = ("attention", "stack")
ATTENTION_VALUES = ("", "eager", "fused", "memory_efficient", "memory-efficient")
# the user's maximum runtime in seconds (empty: no limit); read when present, written only when a
# job has one (docs/backfill.md); the job's attribute is ``time_limit_s``
TIME_LIMIT_COLUMN = "time_limit"


def _read_parquet(path: Path) -> Table:
    import pyarrow as pa  # lazy: pyarrow is slow to import and only Parquet needs it
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
        # repeated strings (VC, user, status, ...) as dictionaries: one str object per value
        table = pq.read_table(path, read_dictionary=[c for c in _DICT_COLUMNS if c in names])
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(str(path), f"not a readable Parquet file: {exc}") from None
    meta = table.schema.metadata or {}
    origin = meta.get(ORIGIN_KEY, b"").decode()
    frame = table.to_pandas()
    return Table.from_frame(str(path), frame, np.arange(len(frame), dtype=np.int64) + 1,
                            f"origin={origin}" if origin else "")


def meta_path(path: Path) -> Path:
    """The side file that holds a canonical CSV's origin: ``NAME.meta.json`` beside ``NAME``."""
    return path.with_name(path.name + ".meta.json")


def _origin(table: Table) -> np.datetime64 | None:
    """The origin from the side file, else from an old file's ``# origin=...`` comment, if any."""
    side = meta_path(Path(table.path))
    if side.is_file():
        import json

        try:
            value = json.loads(side.read_text()).get("origin")
        except (ValueError, AttributeError, OSError) as exc:
            raise TraceError(str(side), f"not a readable JSON object: {exc}") from None
        return to_timestamp(value, str(side), "origin") if value else None
    if not table.comment:
        return None
    key, _, value = table.comment.partition("=")
    if key.strip() != "origin" or not value.strip():
        return None
    return to_timestamp(value.strip(), table.path, "origin")


def load(path: Path, opts: LoadOptions) -> Trace:
    table = _read_parquet(path) if path.suffix.lower() in PARQUET_SUFFIXES else read_table(
        path, numeric={"gpus", "submit_time", "duration", TIME_LIMIT_COLUMN, *_INT, *_FLOAT})
    table.require(*REQUIRED_COLUMNS)
    report = LoadReport(source=str(path), rows_read=len(table))
    checks = Checks(table)
    job_id = check_text(checks, "job_id")
    checks.fail(duplicated(job_id) & (job_id != ""), "job_id", "duplicate job id")
    vc = check_text(checks, "vc")
    gpus = check_number(checks, "gpus", integer=True, minimum=0)
    submit = check_number(checks, "submit_time", seconds=True)
    duration = check_number(checks, "duration", minimum=0, seconds=True)
    extra: dict[str, np.ndarray] = {}
    columns = set(table.names)
    for name in (*_TEXT, *TRAINING_COLUMNS):
        if name in columns:
            extra[name] = table.text(name)
    if "attention" in extra:
        extra["attention"] = np.char.lower(extra["attention"].astype(str)).astype(object)
        checks.fail(~np.isin(extra["attention"], ATTENTION_VALUES), "attention",
                    "not an attention mode (eager, fused, memory_efficient or empty)")
    for name in _INT:
        if name in columns:
            extra[name] = np.nan_to_num(check_number(checks, name, integer=True, minimum=0, required=False))
    for name in _FLOAT:
        if name in columns:
            extra[name] = check_number(checks, name, minimum=0, required=False)
    if TIME_LIMIT_COLUMN in columns:
        extra["time_limit_s"] = check_number(checks, TIME_LIMIT_COLUMN, positive=True, required=False,
                                             seconds=True)
    keep = checks.resolve(report, opts.skip_invalid)
    cols = Columns(job_id, vc, np.nan_to_num(gpus).astype(np.int64), np.nan_to_num(submit),
                   np.nan_to_num(duration), table.lines, extra, _origin(table)).take(keep)
    return finish(cols, opts, report, str(path), name=path.name)


def to_frame(trace: Trace) -> pd.DataFrame:
    """The trace as a DataFrame in canonical column order (one attribute sweep per column)."""
    import pandas as pd

    jobs = trace.jobs
    # the truth the trace recorded (duration, status, measured use) is read through its door
    data = {col: list(map(truth.field(col), jobs)) for col in CANONICAL_COLUMNS}
    for col in TRAINING_COLUMNS:  # only when some job says how it trains: other files stay as they were
        values = [getattr(j, col, "") or "" for j in jobs]
        if any(values):
            data[col] = values
    limits = [j.time_limit_s for j in jobs]
    if any(v is not None for v in limits):   # only when some job has one: other files stay as they were
        data[TIME_LIMIT_COLUMN] = [float("nan") if v is None else float(v) for v in limits]
    frame = pd.DataFrame(data, columns=list(data))
    for col in ("gpus", "cpus", "batch_size"):
        frame[col] = frame[col].astype(np.int64)
    for col in ("submit_time", "duration", *_FLOAT):
        frame[col] = frame[col].astype(np.float64)
    return frame


def write_canonical(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as canonical CSV or Parquet, chosen by the suffix of ``path``."""
    path = Path(path)
    frame = to_frame(trace)
    origin = _iso(trace.origin)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        if origin:
            meta[ORIGIN_KEY] = origin.encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
    elif path.name.lower().endswith((".csv", ".csv.gz")):
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8", newline="") as fh:
            frame.to_csv(fh, index=False)
        side = meta_path(path)
        if origin:
            import json

            side.write_text(json.dumps({"format": "dlsched", "origin": origin}) + "\n")
        elif side.exists():  # a stale origin of an earlier file of this name must not apply
            side.unlink()
    else:
        raise TraceError(str(path), "output must end in .csv, .csv.gz or .parquet")
    return path


def _iso(origin: datetime | None) -> str:
    if origin is None:
        return ""
    import pandas as pd

    return pd.Timestamp(origin).isoformat()


def _sniff(header: list[str], path: Path) -> bool:
    return path.suffix.lower() in PARQUET_SUFFIXES or set(REQUIRED_COLUMNS) <= set(header)


FORMAT = register(TraceFormat(
    name="dlsched",
    description="dlsched canonical CSV/Parquet (" + ",".join(CANONICAL_COLUMNS) + ")",
    sniff=_sniff,
    load=load,
))
