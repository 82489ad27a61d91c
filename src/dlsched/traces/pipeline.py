"""What every loader shares after parsing: filters, origin, ordering and building the jobs.

Loaders hand over validated numpy columns (:class:`Columns`); :func:`finish` applies the
CPU-only / VC / time-window filters in that order (each left-out row counted once, under the
first filter it fails, as the reference simulator filters GPU and VC before the window), fixes
the origin, sorts by submit time (stable on file order) and builds the :class:`Job` objects in
one pass.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from numbers import Real

import numpy as np

from dlsched.core.job import SIDE_RECORDS, Job
from dlsched.core.truth import MEASURED_SLOT
from dlsched.traces.model import LoadReport, Trace, TraceError
from dlsched.traces.release import release_freed_memory

_NAN = float("nan")

# wall-clock bounds: text, datetime (pandas.Timestamp is one), numpy datetime64; or seconds
TimeArg = str | datetime | np.datetime64 | float | int | None

# "YYYY-MM-DD[ HH:MM[:SS[.ffffff]]]" (also with T): what datetime.fromisoformat and pandas read alike
_PLAIN_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?")
_SECOND = np.timedelta64(1, "s")

# Job attributes a loader may fill besides the five positional ones, with their "absent" value.
OPTIONAL_FIELDS: dict[str, object] = {
    "user": "", "name": "", "cpus": 0, "status": "", "model_name": "", "batch_size": 0,
    "onnx_ref": "", "gpu_util": float("nan"), "gpu_mem_mib": float("nan"),
    "attention": "", "stack": "",   # how the job trains (memory predictions): attention mode, software stack
    "time_limit_s": None,           # the user's maximum runtime in seconds (None: no limit given)
}


@dataclass(slots=True)
class LoadOptions:
    """The caller's filters; see :func:`dlsched.traces.load_trace`."""

    start: TimeArg = None
    end: TimeArg = None
    vcs: frozenset[str] | None = None
    skip_invalid: bool = False
    origin: TimeArg = None
    include_cpu_jobs: bool = False
    format_options: dict = field(default_factory=dict)
    vcs_reason: str = "VC not in config"  # how rows left out by ``vcs`` are counted (e.g. "VC not in --vcs")


@dataclass(slots=True)
class Columns:
    """Validated rows of one trace. ``submit`` is datetime64[ns] (wall clock) or float seconds."""

    job_id: np.ndarray
    vc: np.ndarray
    gpus: np.ndarray
    submit: np.ndarray
    duration: np.ndarray
    lines: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    origin: np.datetime64 | None = None  # stored origin of relative times (canonical format), [ns]

    def take(self, mask: np.ndarray) -> Columns:
        return Columns(self.job_id[mask], self.vc[mask], self.gpus[mask], self.submit[mask],
                       self.duration[mask], self.lines[mask],
                       {k: v[mask] for k, v in self.extra.items()}, self.origin)

    @property
    def absolute(self) -> bool:
        return np.issubdtype(self.submit.dtype, np.datetime64)


def to_timestamp(value: TimeArg, path: str, what: str) -> np.datetime64:
    """A wall-clock argument as a naive datetime64[ns] (aware values are converted to UTC).

    Plain ISO text and datetimes are converted directly; anything else is read by pandas
    (imported only then), which accepts many more spellings."""
    if isinstance(value, np.datetime64) and not np.isnat(value):
        return value.astype("datetime64[ns]")
    if type(value) is datetime or (isinstance(value, str) and _PLAIN_ISO.fullmatch(value)):
        try:
            dt = datetime.fromisoformat(value) if isinstance(value, str) else value
        except ValueError:
            dt = None  # e.g. 2017-02-30: let pandas word the refusal
        if dt is not None:
            if dt.tzinfo is not None:
                dt = dt.astimezone(UTC).replace(tzinfo=None)
            return np.datetime64(dt, "ns")
    import pandas as pd

    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise TraceError(path, f"{what}={value!r} is not a date/time (want 'YYYY-MM-DD HH:MM:SS')") from None
    if ts is pd.NaT:
        raise TraceError(path, f"{what}={value!r} is not a date/time")
    return (ts.tz_convert(None) if ts.tzinfo is not None else ts).to_datetime64().astype("datetime64[ns]")


def _to_datetime(value: np.datetime64) -> datetime:
    """The origin as a naive ``datetime`` (microseconds: what a datetime holds)."""
    return value.astype("datetime64[us]").item()


def _is_seconds(value: TimeArg) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _window_seconds(value: TimeArg, cols: Columns, path: str, what: str) -> float:
    """A window bound for a relative-time trace, in seconds from its origin."""
    if _is_seconds(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if cols.origin is None:
        raise TraceError(path, f"{what}={value!r} is a date but this trace has relative times and no "
                               "origin; give seconds")
    return float((to_timestamp(value, path, what) - cols.origin) / _SECOND)


def _window_datetime(value: TimeArg, path: str, what: str) -> np.datetime64:
    if _is_seconds(value):
        raise TraceError(path, f"{what}={value!r}: this trace has wall-clock times; give "
                               "'YYYY-MM-DD HH:MM:SS'")
    return to_timestamp(value, path, what)


def apply_filters(cols: Columns, opts: LoadOptions, report: LoadReport, path: str) -> Columns:
    """Leave out CPU-only jobs, VCs not asked for, and jobs outside the window (inclusive)."""
    keep = np.ones(len(cols.job_id), dtype=bool)

    def drop(mask: np.ndarray, reason: str) -> None:
        hit = mask & keep
        n = int(hit.sum())
        if n:
            report.filtered[reason] += n
            keep[hit] = False

    if not opts.include_cpu_jobs:
        drop(cols.gpus <= 0, "CPU-only job (0 GPUs)")
    if opts.vcs is not None:
        wanted = opts.vcs  # set lookups: np.isin sorts object arrays, ~10x slower
        drop(~np.fromiter(map(wanted.__contains__, cols.vc.tolist()), bool, len(cols.vc)), opts.vcs_reason)
    limits = {}
    for bound, what in ((opts.start, "start"), (opts.end, "end")):
        if bound is not None:
            limits[what] = (_window_datetime(bound, path, what) if cols.absolute
                            else _window_seconds(bound, cols, path, what))
    if len(limits) == 2 and limits["start"] > limits["end"]:
        raise TraceError(path, f"start={opts.start!s} is after end={opts.end!s}: the window holds no time")
    if "start" in limits:
        drop(cols.submit < limits["start"], "outside window (before start)")
    if "end" in limits:
        drop(cols.submit > limits["end"], "outside window (after end)")
    return cols if keep.all() else cols.take(keep)


def finish(cols: Columns, opts: LoadOptions, report: LoadReport, path: str, name: str = "") -> Trace:
    """Filter, fix the origin, sort stably by submit time and build the jobs."""
    cols = apply_filters(cols, opts, report, path)
    if cols.absolute:
        if opts.origin is not None:
            origin = to_timestamp(opts.origin, path, "origin")
        elif len(cols.submit):
            origin = cols.submit.min().astype("datetime64[ns]")
        elif opts.start is not None:
            origin = to_timestamp(opts.start, path, "start")
        else:
            origin = None
        submit = ((cols.submit - origin) / _SECOND).astype(np.float64) if origin is not None \
            else np.zeros(0)
    else:
        submit = cols.submit.astype(np.float64)
        origin = cols.origin
        if opts.origin is not None:
            new = to_timestamp(opts.origin, path, "origin")
            if origin is not None:
                submit = submit + float((origin - new) / _SECOND)
            origin = new
    order = np.argsort(submit, kind="stable")
    release_freed_memory(len(order))  # the reader's freed temporaries, before the jobs are made
    with gc_paused():
        jobs = build_jobs(cols, submit, order)
        return Trace(jobs, _to_datetime(origin) if origin is not None else None, report, name)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while allocating many jobs.

    Every Job is GC-tracked, so building a million triggers hundreds of full-heap passes that
    find nothing (measured: 2.7 s -> 0.65 s for 1M jobs). Nesting is safe.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


BUILD_ROWS = 1 << 16  # jobs built per block

# Optional fields kept in a job's shared side records (dlsched.core.job), by record slot
SIDE_FIELDS: dict[str, str] = {
    "cpus": "_spec", "model_name": "_spec", "batch_size": "_spec", "onnx_ref": "_spec", "attention": "_spec",
    "stack": "_spec", "time_limit_s": "_spec", "gpu_util": MEASURED_SLOT, "gpu_mem_mib": MEASURED_SLOT,
    "status": MEASURED_SLOT,
}


def build_jobs(cols: Columns, submit: np.ndarray, order: np.ndarray) -> list[Job]:
    """One pass of the real ``Job`` constructor, then optional fields that carry information:
    ``user``/``name`` into their slots, the rest as shared side records (equal rows, one record)."""
    durations = shared_floats(cols.duration[order].astype(np.float64))  # a list: sliced per block
    jobs: list[Job] = []
    for lo in range(0, len(order), BUILD_ROWS):  # a block at a time: no job-length lists beside the jobs
        rows = order[lo:lo + BUILD_ROWS]
        jobs += map(Job, cols.job_id[rows].tolist(), cols.vc[rows].tolist(),
                    cols.gpus[rows].astype(np.int64).tolist(), submit[rows].tolist(),
                    durations[lo:lo + BUILD_ROWS])
    slots, columns = [], []
    sides: dict[str, dict[str, np.ndarray]] = {}
    for attr, values in cols.extra.items():
        default = OPTIONAL_FIELDS[attr]
        values = values[order]
        if default is None:   # a float column whose NaN is "not given" (None on the job)
            floats = values.astype(np.float64)
            if np.isnan(floats).all():
                continue
            values = np.array([None if v != v else v for v in floats.tolist()], dtype=object)
        elif isinstance(default, float):
            if np.isnan(values.astype(np.float64)).all():
                continue
            values = values.astype(np.float64)
        elif isinstance(default, int):
            if not values.any():
                continue
            values = values.astype(np.int64)
        elif not (values != default).any():
            continue
        if attr in SIDE_FIELDS:
            sides.setdefault(SIDE_FIELDS[attr], {})[attr] = values
        else:
            slots.append(attr)
            columns.append(values.tolist())
    if "_spec" in sides:  # the VC is part of the request record (the constructor set it alone)
        sides["_spec"] = {"vc": cols.vc[order], **sides["_spec"]}
    for slot, fields in sides.items():
        slots.append(slot)
        columns.append(shared_records(SIDE_RECORDS[slot][0], fields))
    if slots:
        _slot_setter(tuple(slots))(jobs, *columns)
    return jobs


def shared_floats(values: np.ndarray) -> list[float]:
    """``values`` as a list in which equal floats are one Python float: traces repeat run times
    (whole seconds): the built-in workload's 1M jobs hold ~59,000 duration objects. One dict pass in C.
    Left unshared where sharing could blur a value (-0.0 beside 0.0; NaN is never equal)."""
    floats = values.tolist()
    if (np.signbit(values) & (values == 0)).any():
        return floats
    seen: dict[float, float] = {}
    return list(map(seen.setdefault, floats, floats))


def shared_records(record: type, fields: dict[str, np.ndarray]) -> list:
    """One ``record`` (a NamedTuple of :mod:`dlsched.core.job`) per row from equal-length
    columns ``fields``, unnamed fields at their defaults; rows with equal values share one
    record, so a million jobs of a few thousand kinds hold a few thousand records. Dict passes
    in C, no sort; a column's NaNs become one NaN first, so that rows without a value share."""
    columns = []
    for values in fields.values():
        column = values.tolist()
        if values.dtype.kind == "f":
            if (np.signbit(values) & (values == 0)).any():  # -0.0 equals 0.0: rows keep records of their own
                return [record(**dict(zip(fields, row))) for row in zip(*(v.tolist() for v in fields.values()))]
            if np.isnan(values).any():
                column = [_NAN if v != v else v for v in column]
        columns.append(column)
    if len(columns) == 1:  # one field: its values are the keys (no row tuples)
        name, column = next(iter(fields)), columns[0]
        single = {value: record(**{name: value}) for value in dict.fromkeys(column)}
        return list(map(single.__getitem__, column))
    seen: dict[tuple, tuple] = {}
    firsts = list(map(seen.setdefault, zip(*columns), zip(*columns)))  # each row -> the first equal row
    made = {row: record(**dict(zip(fields, row))) for row in seen}
    return list(map(made.__getitem__, firsts))


_SETTERS: dict[tuple[str, ...], object] = {}


def _slot_setter(slots: tuple[str, ...]):
    """``set(jobs, *columns)``: one loop over the jobs that assigns every column to its slot,
    written with the slot names in the code (plain attribute stores: about 3x faster than a
    pass per column with the slot descriptor mapped in C, the old way, for the three columns
    of a Helios trace). Compiled once per set of slots."""
    setter = _SETTERS.get(slots)
    if setter is None:
        if not all(slot.isidentifier() and slot in Job.__slots__ for slot in slots):
            raise ValueError(f"not Job slots: {slots}")
        args = [f"c{i}" for i in range(len(slots))]
        body = "".join(f"        job.{slot} = v{i}\n" for i, slot in enumerate(slots))
        source = (f"def set_slots(jobs, {', '.join(args)}):\n"
                  f"    for job, {', '.join(f'v{i}' for i in range(len(slots)))}, in zip(jobs, {', '.join(args)}):\n"
                  f"{body}")
        namespace: dict = {}
        exec(compile(source, f"<job slots {', '.join(slots)}>", "exec"), namespace)  # noqa: S102 - fixed names
        setter = _SETTERS[slots] = namespace["set_slots"]
    return setter
