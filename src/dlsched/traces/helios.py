"""Helios ``cluster_log.csv`` (SenseTime, Hu et al. SC'21) and the shared Helios-style reader.

Schema: ``job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
duration,queue``; times are naive ``YYYY-MM-DD HH:MM:SS`` wall clock (kept naive: no zone is
applied, so no DST shifts), ``duration``/``queue`` in integer seconds. Lucid's
``cluster_full_log.csv`` adds ``model,batchsize,gpu_util``; those are read when present. Only GPU
jobs are kept unless ``include_cpu_jobs``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.traces._table import Checks, check_datetime, check_number, check_text, duplicated, read_table
from dlsched.traces.model import LoadReport, Trace
from dlsched.traces.pipeline import Columns, LoadOptions, finish
from dlsched.traces.registry import TraceFormat, register

# optional source column -> (Job attribute, kind)
_OPTIONAL = {"user": ("user", "text"), "jobname": ("name", "text"), "cpu_num": ("cpus", "int"),
             "state": ("status", "text"), "model": ("model_name", "text"),
             "batchsize": ("batch_size", "int"), "gpu_util": ("gpu_util", "float")}


def load_helios_style(path: Path, opts: LoadOptions, id_column: str, fmt: str) -> Trace:
    """Read a Helios-layout CSV whose job id is ``id_column`` (``job_id`` or ``jobname``)."""
    wanted = {id_column, "vc", "gpu_num", "submit_time", "duration", *_OPTIONAL}
    table = read_table(path, columns=wanted, numeric={"gpu_num", "duration", "cpu_num", "batchsize", "gpu_util"},
                       datetimes={"submit_time"})
    table.require(id_column, "vc", "gpu_num", "submit_time", "duration")
    report = LoadReport(source=str(path), rows_read=len(table))
    checks = Checks(table)
    job_id = check_text(checks, id_column)
    checks.fail(duplicated(job_id) & (job_id != ""), id_column, "duplicate job id")
    vc = check_text(checks, "vc")
    gpus = check_number(checks, "gpu_num", integer=True, minimum=0)
    submit = check_datetime(checks, "submit_time")
    duration = check_number(checks, "duration", integer=True, minimum=0, seconds=True)
    extra = {}
    for column, (attr, kind) in _OPTIONAL.items():
        if column not in table:
            continue
        if kind == "text":
            extra[attr] = table.text(column)
        else:
            nums = check_number(checks, column, integer=kind == "int", minimum=0, required=False)
            extra[attr] = np.nan_to_num(nums, nan=0.0) if kind == "int" else nums
    keep = checks.resolve(report, opts.skip_invalid)
    cols = Columns(job_id, vc, np.nan_to_num(gpus).astype(np.int64), submit, np.nan_to_num(duration),
                   table.lines, extra).take(keep)
    return finish(cols, opts, report, str(path), name=Path(path).name)


def _sniff(header: list[str], path: Path) -> bool:
    return {"job_id", "vc", "gpu_num", "submit_time", "duration"} <= set(header)


FORMAT = register(TraceFormat(
    name="helios",
    description="Helios cluster_log.csv (job_id,user,vc,jobname,gpu_num,...,submit_time,...,duration)",
    sniff=_sniff,
    load=lambda path, opts: load_helios_style(path, opts, "job_id", "helios"),
))
