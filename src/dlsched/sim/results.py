"""Writing a finished simulation to a run directory: jobs.csv, summary.json, timeline.csv."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.metrics.summary import job_arrays, summarize
from dlsched.sim.engine import SimResult

JOB_COLUMNS = ("job_id", "user", "name", "vc", "gpus", "submit_time", "duration", "start_time", "end_time",
               "queue_delay", "jct", "preemptions")


def jobs_frame(result: SimResult, cols: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    jobs = result.jobs
    cols = cols if cols is not None else job_arrays(jobs)
    frame = pd.DataFrame({
        "job_id": [j.job_id for j in jobs],
        "user": [j.user for j in jobs],
        "name": [j.name for j in jobs],
        "vc": [j.vc for j in jobs],
        **{k: cols[k] for k in ("gpus", "submit_time", "duration", "start_time", "end_time", "queue_delay",
                                "jct", "preemptions")},
    })
    frame = frame[list(JOB_COLUMNS)]
    util = np.fromiter((j.pred_gpu_util for j in jobs), float, len(jobs))
    if len(jobs) and not np.isnan(util).all():  # predictions were filled: keep them with the outcomes
        frame["pred_gpu_util"] = util
        frame["pred_gpu_mem_mib"] = np.fromiter((j.pred_gpu_mem_mib for j in jobs), float, len(jobs))
    return frame


def write_run(result: SimResult, out_dir: str | Path, meta: dict | None = None) -> dict:
    """Write the three files of a run directory and return the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cols = job_arrays(result.jobs)
    summary = {"policy": result.policy, "placement": result.placement, **(meta or {}),
               **summarize(result.jobs, result.metrics, cols)}
    summary.update(result.extra)
    jobs_frame(result, cols).to_csv(out / "jobs.csv", index=False)
    pd.DataFrame(result.metrics.timeline()).to_csv(out / "timeline.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    return summary
