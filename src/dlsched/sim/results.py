"""Writing a finished simulation to a run directory: jobs.csv, summary.json, timeline.csv.

The CSV files are written column by column with numpy's float formatting and the standard
``csv`` writer: the same bytes as ``pandas.DataFrame.to_csv`` produced before (numbers via
``ndarray.astype(str)``, NaN as an empty field, minimal quoting), about ten times faster, and
without importing pandas (which alone took longer than the simulation).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from operator import attrgetter, is_not
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dlsched.kernel.stop import StopReason
from dlsched.metrics.strict_json import dumps as strict_dumps
from dlsched.metrics.strict_json import strict_summary
from dlsched.metrics.summary import job_arrays, summarize, summary_arrays

if TYPE_CHECKING:
    import pandas as pd

    from dlsched.sim.engine import SimResult

JOB_COLUMNS = ("job_id", "user", "name", "vc", "gpus", "submit_time", "duration", "start_time", "end_time",
               "queue_delay", "jct", "preemptions")
_TEXT_COLUMNS = ("job_id", "user", "name", "vc")
_NUMBER_ATTRS = {"duration": "_duration"}  # jobs.csv column -> job attribute, where they differ
_NUMBER_TYPES = {"gpus": np.int64, "preemptions": np.int64}  # the rest are floats
_LIMIT = attrgetter("_spec.time_limit_s")
_SET = partial(is_not, None)  # a limit was given

# Seconds spent in write_run, collected while a `timed_writes()` block is open (for --timings).
_WRITE_SECONDS: ContextVar[list[float] | None] = ContextVar("dlsched_write_seconds", default=None)


@contextmanager
def timed_writes() -> Iterator[list[float]]:
    """Collect the wall seconds of every :func:`write_run` call made inside the block, so a
    caller that only sees ``run_one`` can still split simulating from writing."""
    seconds: list[float] = []
    token = _WRITE_SECONDS.set(seconds)
    try:
        yield seconds
    finally:
        _WRITE_SECONDS.reset(token)


def job_columns(result: SimResult, cols: dict[str, np.ndarray] | None = None,
                lazy: bool = False) -> dict[str, Sequence]:
    """The columns of ``jobs.csv`` in file order: the job's text fields as lists (``lazy``: as
    :class:`AttrColumn` s, read a chunk at a time by the writer), numbers as arrays;
    ``pred_gpu_util``/``pred_gpu_mem_mib`` are added when predictions were filled, and
    ``prior_gpu_util``/``prior_gpu_mem_mib``/``observed_at`` when observation replaced some, and
    ``time_limit_s`` (empty: none) with ``stop`` (``finish`` or ``time_limit``) when some job had
    a max runtime."""
    jobs = result.jobs
    cols = cols if cols is not None else job_arrays(jobs)
    out: dict[str, Sequence] = {}
    for name in JOB_COLUMNS:
        if name in _TEXT_COLUMNS:
            out[name] = AttrColumn(jobs, name) if lazy else list(map(attrgetter(name), jobs))
        elif name in cols and len(cols[name]) == len(jobs):
            out[name] = cols[name]
        else:  # reduced by summary_arrays: read from the jobs a block at a time
            out[name] = AttrColumn(jobs, _NUMBER_ATTRS.get(name, name), _NUMBER_TYPES.get(name, float))
    util = np.fromiter(map(attrgetter("pred_gpu_util"), jobs), float, len(jobs))
    if len(jobs) and not np.isnan(util).all():  # predictions were filled: keep them with the outcomes
        out["pred_gpu_util"] = util
        out["pred_gpu_mem_mib"] = np.fromiter(map(attrgetter("pred_gpu_mem_mib"), jobs), float, len(jobs))
    if any(map(_SET, map(_LIMIT, jobs))):   # max runtimes were set: each one, and how each job ended
        limits = list(map(_LIMIT, jobs))  # (only then: a list of every job's limit is 8 B a job at the peak)
        out["time_limit_s"] = np.array([math.nan if limit is None else limit for limit in limits], float)
        stops = result.stops
        out["stop"] = [str(stops.get(job.job_id, StopReason.FINISHED)) for job in jobs]
    observed = np.fromiter(map(attrgetter("observed_at"), jobs), float, len(jobs))
    if len(jobs) and (observed >= 0).any():  # observation replaced predictions: keep the priors too
        out["prior_gpu_util"] = np.fromiter(map(attrgetter("prior_gpu_util"), jobs), float, len(jobs))
        out["prior_gpu_mem_mib"] = np.fromiter(map(attrgetter("prior_gpu_mem_mib"), jobs), float, len(jobs))
        out["observed_at"] = np.where(observed >= 0, observed, np.nan)
    return out


def jobs_frame(result: SimResult, cols: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """``jobs.csv`` as a DataFrame (for library users; the writer does not need pandas)."""
    import pandas as pd

    return pd.DataFrame(job_columns(result, cols))


def _as_text(values: Sequence) -> list[str]:
    """One column as CSV fields, formatted as pandas' ``to_csv`` formats it: floats as their
    shortest round-trip repr (what ``ndarray.astype(str)`` gives, 3x faster), NaN and None as
    empty fields, integers and anything else through ``str``."""
    if not isinstance(values, np.ndarray):
        kinds = set(map(type, values))
        if kinds <= {str}:
            return list(values)
        arr = np.asarray(values) if not kinds & {str, type(None)} else None
        if arr is None or arr.dtype.kind not in "iufb":  # mixed objects, as pandas keeps them
            return ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values]
        values = arr
    if values.dtype.kind == "f":
        text = list(map(repr, values.astype(np.float64).tolist()))
        for i in np.flatnonzero(np.isnan(values)).tolist():
            text[i] = ""
        return text
    if values.dtype.kind in "iub":
        return list(map(str, values.tolist()))
    return _as_text(values.tolist())


_SPECIAL = (",", '"', "\n", "\r")  # a field with one of these must be quoted
_EXACT_INT = 1e16  # below this, a whole float's repr is its integer digits plus ".0" (1e16 is "1e+16")


def _printf(values: Sequence) -> tuple[str, list]:
    """One column as a printf conversion and the Python values it formats to the field
    :func:`_as_text` gives: ``%d`` for integers, ``%d.0`` for whole floats (their repr; about
    twice as fast as ``repr``), ``%r`` for other finite floats, ``%s`` for text and for columns
    with NaN or mixed objects (formatted by :func:`_as_text` first)."""
    if not isinstance(values, np.ndarray):
        if type(values) is list:
            try:  # all text (the usual case): one C call checks it (%s gives str(v) for subclasses too)
                "".join(values)
            except TypeError:
                pass
            else:
                return "%s", values
        kinds = set(map(type, values))
        if kinds <= {str}:
            return "%s", list(values)
        arr = np.asarray(values) if not kinds & {str, type(None)} else None
        if arr is None or arr.dtype.kind not in "iufb":
            return "%s", _as_text(values)
        values = arr
    kind = values.dtype.kind
    if kind in "iu":
        return "%d", values.tolist()
    if kind != "f":
        return "%s", _as_text(values)
    floats = values.astype(np.float64)
    if np.isnan(floats).any():
        return "%s", _as_text(floats)
    if (np.abs(floats) < _EXACT_INT).all() and (floats == np.floor(floats)).all() \
            and not (np.signbit(floats) & (floats == 0.0)).any():  # -0.0 keeps its sign in repr
        return "%d.0", floats.astype(np.int64).tolist()
    return "%r", floats.tolist()


CHUNK_ROWS = 1 << 12  # rows formatted at a time: the text of a whole 1M-row file never exists at once


class AttrColumn:
    """One attribute of every job, read a slice at a time (a list, or an array of ``dtype``): a
    column of ``jobs.csv`` without a million entries beside the jobs (what :func:`write_csv` slices)."""

    __slots__ = ("dtype", "get", "jobs")

    def __init__(self, jobs: Sequence, name: str, dtype: type | None = None) -> None:
        self.jobs, self.get, self.dtype = jobs, attrgetter(name), dtype

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, rows: slice) -> list | np.ndarray:
        block = self.jobs[rows]
        if self.dtype is None:
            return list(map(self.get, block))
        return np.fromiter(map(self.get, block), self.dtype, len(block))


def _rows(values, rows: slice) -> Sequence:
    """Rows ``rows`` of one column (an array view, a list slice or an :class:`AttrColumn` read)."""
    return values[rows]


def write_csv(path: str | Path, columns: dict[str, Sequence], chunk_rows: int = CHUNK_ROWS) -> None:
    """Write equal-length columns as a CSV file with a header (``\\n`` line ends, minimal quoting).

    Rows are written ``chunk_rows`` at a time (streaming: memory stays flat however long the
    file), each row one ``%`` formatting of its values. Every field has one text whatever the
    chunk, so the bytes do not depend on ``chunk_rows``; a chunk whose text needs quoting goes
    through the csv module (the same bytes for fields that need none). A one-column file is
    one chunk: the csv module quotes a lone empty field, the plain path does not."""
    header = list(columns)
    n = len(next(iter(columns.values()))) if columns else 0
    step = max(n, 1) if len(header) == 1 else max(chunk_rows, 1)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        if any(c in joined for joined in header for c in _SPECIAL):
            csv.writer(fh, lineterminator="\n").writerow(header)
        else:
            fh.write(",".join(header) + "\n")
        for lo in range(0, n, step):
            rows = slice(lo, lo + step)
            chunk = [_rows(v, rows) for v in columns.values()]
            _write_rows(fh, chunk)


def _write_rows(fh, chunk: list[Sequence]) -> None:
    """One block of rows (equal-length column slices) in the file's CSV dialect."""
    specs, values = zip(*map(_printf, chunk))
    texts = [v for spec, v in zip(specs, values) if spec == "%s"]
    if any(c in joined for joined in map("\x00".join, texts) for c in _SPECIAL):
        csv.writer(fh, lineterminator="\n").writerows(zip(*[_as_text(v) for v in chunk]))
        return
    if values[0]:
        fh.write("\n".join(map(",".join(specs).__mod__, zip(*values))))
        fh.write("\n")


def write_run(result: SimResult, out_dir: str | Path, meta: dict | None = None) -> dict:
    """Write the three files of a run directory and return the summary."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cols = summary_arrays(result.jobs)  # the other columns are read a block at a time while writing
    summary = {"policy": result.policy, "placement": result.placement, **(meta or {}),
               **summarize(result.jobs, result.metrics, cols)}
    summary.update(result.extra)
    write_csv(out / "jobs.csv", job_columns(result, cols, lazy=True))
    write_csv(out / "timeline.csv", result.metrics.timeline_arrays())
    summary, _ = strict_summary(summary)   # strict JSON: a non-finite number is null, listed in non_finite
    (out / "summary.json").write_text(strict_dumps(summary))
    seconds = _WRITE_SECONDS.get()
    if seconds is not None:
        seconds.append(time.perf_counter() - t0)
    return summary
