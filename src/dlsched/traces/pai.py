"""Alibaba PAI GPU trace v2020 (``cluster-trace-gpu-v2020``, Weng et al., NSDI'22).

Official schema (alibaba/clusterdata, ``cluster-trace-gpu-v2020/README.md``; the released CSVs
have no header line, the column names ship in ``*.header`` files -- both variants are read):

* ``pai_job_table``: ``job_name,inst_id,user,status,start_time,end_time``. ``status`` is one of
  Running, Terminated (the only successful end), Failed, Waiting. ``start_time`` is the job's
  *submission* time, ``end_time`` its completion, both in seconds shifted by a constant; read as
  Unix time in UTC+8 they keep the real time of day and weekday (dates are fake).
* ``pai_task_table``: ``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
  plan_gpu,gpu_type``. ``start_time`` is the task's *launch*; ``plan_cpu``/``plan_gpu`` are per
  instance in percent (600 = 6 vCPUs, 50 = half a GPU); ``plan_mem`` GB; ``gpu_type`` e.g. V100,
  P100, T4, MISC.

Conversion: one job per ``pai_job_table`` row, ``job_id`` := ``job_name``. GPUs =
ceil(sum over tasks of inst_num x plan_gpu / 100); CPUs likewise from plan_cpu. Submit =
``start_time`` (as UTC+8 wall clock). Duration = ``end_time`` - launch, where launch is the
earliest task start (not before submission), so the PAI queueing delay is not counted as run
time; jobs without task start times fall back to ``end_time - start_time``. VC := the job's
``user`` (PAI has no VCs; per-user quota is the closest analogue) or another column chosen with
``format_options={"vc_column": ...}`` (a job-table column or ``gpu_type``). Jobs still running
or waiting (no ``end_time``) are left out and counted; task rows of unknown jobs are counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dlsched.traces._table import Checks, Table, check_number, check_text, duplicated, read_table
from dlsched.traces.model import LoadReport, Trace, TraceError
from dlsched.traces.pipeline import Columns, LoadOptions, finish
from dlsched.traces.registry import TraceFormat, register

if TYPE_CHECKING:
    import pandas as pd

JOB_COLUMNS = ["job_name", "inst_id", "user", "status", "start_time", "end_time"]
TASK_COLUMNS = ["job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu",
                "plan_mem", "plan_gpu", "gpu_type"]
UTC8 = np.timedelta64(8 * 3600, "s")


def _find_tables(path: Path) -> tuple[Path, Path]:
    """The job table and its sibling task table, given the directory or the job-table path."""
    if path.is_dir():
        jobs = sorted(p for p in path.iterdir() if p.name.startswith("pai_job_table")
                      and p.suffix != ".header")
        if not jobs:
            raise TraceError(str(path), "no pai_job_table.csv in this directory")
        path = jobs[0]
    task = path.with_name(path.name.replace("pai_job_table", "pai_task_table"))
    if task == path or not task.exists():
        raise TraceError(str(path), f"PAI task table not found (looked for {task.name} beside it)")
    return path, task


def _read(path: Path, names: list[str], numeric: set[str]) -> Table:
    """Read with or without a header line (the official release has none)."""
    with open(path, "rb") as fh:
        first = fh.readline().decode("utf-8", "replace")
    has_header = first.split(",")[0].strip() == "job_name"
    table = read_table(path, names=None if has_header else names, numeric=numeric)
    table.require(*names)
    return table


def _tasks(path: Path, opts: LoadOptions, report: LoadReport) -> tuple[pd.DataFrame, set[str]]:
    """Validated task rows and the job names that had an invalid task (skipped with it)."""
    import pandas as pd  # lazy: importing the format registry must stay cheap

    table = _read(path, TASK_COLUMNS, {"inst_num", "start_time", "end_time", "plan_cpu", "plan_mem",
                                       "plan_gpu"})
    checks = Checks(table)
    job = check_text(checks, "job_name")
    inst = check_number(checks, "inst_num", integer=True, minimum=0)
    start = check_number(checks, "start_time", minimum=0, required=False)
    cpu = check_number(checks, "plan_cpu", minimum=0, required=False)
    gpu = check_number(checks, "plan_gpu", minimum=0, required=False)
    task_report = LoadReport()
    keep = checks.resolve(task_report, opts.skip_invalid)
    for reason, n in task_report.skipped.items():
        key = f"{path.name} {reason}"
        report.skipped[key] += n
        report.examples.setdefault(key, task_report.examples[reason])
    frame = pd.DataFrame({"job_name": job, "inst": np.nan_to_num(inst), "start": start,
                          "cpu": np.nan_to_num(cpu), "gpu": np.nan_to_num(gpu),
                          "gpu_type": table.text("gpu_type")})
    return frame[keep], set(job[~keep])


def load(path: Path, opts: LoadOptions) -> Trace:
    job_path, task_path = _find_tables(path)
    table = _read(job_path, JOB_COLUMNS, {"start_time", "end_time"})
    report = LoadReport(source=str(job_path), rows_read=len(table))
    checks = Checks(table)
    name = check_text(checks, "job_name")
    checks.fail(duplicated(name) & (name != ""), "job_name", "duplicate job name")
    check_text(checks, "user")
    submit = check_number(checks, "start_time", minimum=0, seconds=True)
    end = check_number(checks, "end_time", minimum=0, required=False, seconds=True)
    checks.fail(end < submit, "end_time", "end_time before start_time (negative duration)")

    if not opts.skip_invalid:
        checks.resolve(report, False)  # report job-table errors before task-table ones
    tasks, bad_task_jobs = _tasks(task_path, opts, report)
    tasks["cpu_total"] = tasks["inst"] * tasks["cpu"]
    tasks["gpu_total"] = tasks["inst"] * tasks["gpu"]
    per_job = tasks.groupby("job_name", sort=False).agg(
        gpu=("gpu_total", "sum"), cpu=("cpu_total", "sum"), launch=("start", "min"),
        gpu_type=("gpu_type", "first"))
    orphans = int((~tasks["job_name"].isin(name)).sum())
    if orphans:
        report.filtered["task rows of jobs not in the job table"] += orphans
    checks.fail(np.isin(name, list(bad_task_jobs)), "job_name", "job has an invalid task row")
    checks.fail(~np.isin(name, per_job.index.to_numpy()) & (name != ""), "job_name",
                "job has no rows in the task table")
    keep = checks.resolve(report, opts.skip_invalid)

    unfinished = keep & np.isnan(end)
    if unfinished.any():
        report.filtered["job not finished (no end_time)"] += int(unfinished.sum())
        keep &= ~unfinished
    agg = per_job.reindex(name[keep])
    submit_k, end_k = submit[keep], end[keep]
    launch = agg["launch"].to_numpy(dtype=np.float64)
    launch = np.where(np.isnan(launch), submit_k, np.clip(launch, submit_k, end_k))
    gpus = np.ceil(agg["gpu"].to_numpy(dtype=np.float64) / 100.0 - 1e-9).astype(np.int64)
    cpus = np.ceil(agg["cpu"].to_numpy(dtype=np.float64) / 100.0 - 1e-9).astype(np.int64)
    vc_column = str(opts.format_options.get("vc_column", "user"))
    if vc_column == "gpu_type":
        vc = agg["gpu_type"].fillna("").to_numpy(dtype=object)
    elif vc_column in table:
        vc = table.text(vc_column)[keep]
    else:
        raise TraceError(str(job_path), f"vc_column {vc_column!r} is neither a job-table column "
                                        f"({', '.join(JOB_COLUMNS)}) nor 'gpu_type'")
    when = (submit_k * 1e9).astype("datetime64[ns]") + UTC8
    cols = Columns(name[keep], vc, gpus, when, end_k - launch, table.lines[keep],
                   {"user": table.text("user")[keep], "name": name[keep],
                    "status": table.text("status")[keep], "cpus": cpus})
    return finish(cols, opts, report, str(job_path), name=job_path.parent.name or job_path.name)


def _sniff(header: list[str], path: Path) -> bool:
    if path.is_dir():
        return any(p.name.startswith("pai_job_table") for p in path.iterdir())
    return path.name.startswith("pai_job_table") or header[:4] == JOB_COLUMNS[:4]


FORMAT = register(TraceFormat(
    name="pai",
    description="Alibaba PAI 2020 pai_job_table + pai_task_table (directory or job-table path)",
    sniff=_sniff,
    load=load,
))
