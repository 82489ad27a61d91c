"""Pollux / Sia Philly job list (``timestamp,duration,num_gpus,gpu_time,cluster``).

Derived by the Pollux authors from the Microsoft Philly trace (82,247 GPU jobs). ``timestamp`` is
the naive submit time, ``duration`` run time in seconds (float), ``cluster`` the Philly VC hash.
There is no job id; ``job_id`` := ``sia_%06d`` of the 0-based data row, which is the ``jobname``
the Philly reference run uses, so results can be joined job by job. ``gpu_time`` is redundant
(duration x num_gpus) and is checked: a mismatch means a corrupted row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.traces._table import Checks, check_datetime, check_number, check_text, read_table
from dlsched.traces.model import LoadReport, Trace
from dlsched.traces.pipeline import Columns, LoadOptions, finish
from dlsched.traces.registry import TraceFormat, register


def load(path: Path, opts: LoadOptions) -> Trace:
    table = read_table(path, columns={"timestamp", "duration", "num_gpus", "gpu_time", "cluster"},
                       numeric={"duration", "num_gpus", "gpu_time"}, datetimes={"timestamp"})
    table.require("timestamp", "duration", "num_gpus", "cluster")
    report = LoadReport(source=str(path), rows_read=len(table))
    checks = Checks(table)
    submit = check_datetime(checks, "timestamp")
    duration = check_number(checks, "duration", minimum=0, seconds=True)
    gpus = check_number(checks, "num_gpus", integer=True, minimum=0)
    vc = check_text(checks, "cluster")
    if "gpu_time" in table:
        gpu_time = check_number(checks, "gpu_time", minimum=0)
        expected = duration * gpus
        off = np.abs(gpu_time - expected) > np.maximum(1.0, 1e-6 * np.abs(expected))
        checks.fail(off & ~np.isnan(expected), "gpu_time", "gpu_time != duration * num_gpus")
    keep = checks.resolve(report, opts.skip_invalid)
    job_id = np.array([f"sia_{i:06d}" for i in range(len(table))], dtype=object)
    cols = Columns(job_id, vc, np.nan_to_num(gpus).astype(np.int64), submit, np.nan_to_num(duration),
                   table.lines).take(keep)
    return finish(cols, opts, report, str(path), name=Path(path).name)


def _sniff(header: list[str], path: Path) -> bool:
    return {"timestamp", "duration", "num_gpus", "cluster"} <= set(header)


FORMAT = register(TraceFormat(
    name="philly-pollux",
    description="Pollux/Sia Philly jobs (timestamp,duration,num_gpus,gpu_time,cluster)",
    sniff=_sniff,
    load=load,
))
