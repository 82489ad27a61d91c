"""Synthetic run / comparison / energy directories for the report tests (no simulator needed).

Imported by the other ``test_report_*`` modules; it holds no tests itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

TOTAL_GPUS = 512
GROUP_BOUNDS = {"short": (0, 900), "middle": (900, 21600), "long": (21600, np.inf)}


def metrics(jobs: pd.DataFrame) -> dict:
    """The summary.json metric keys for a set of jobs."""
    jct, qd = jobs["jct"], jobs["queue_delay"]
    return {
        "jobs": int(len(jobs)),
        "avg_jct": round(float(jct.mean()), 3), "median_jct": float(jct.median()),
        "p95_jct": float(jct.quantile(0.95)), "p99_jct": float(jct.quantile(0.99)),
        "avg_queue_delay": round(float(qd.mean()), 3), "median_queue_delay": float(qd.median()),
        "p95_queue_delay": float(qd.quantile(0.95)), "p99_queue_delay": float(qd.quantile(0.99)),
        "queued_jobs": int((qd > 0).sum()),
    }


def make_jobs(n: int, seed: int, delay_scale: float, n_vcs: int = 6) -> pd.DataFrame:
    """Jobs over a week: log-normal durations, Zipf-like VC sizes, exponential queue delays."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 7 * 86400, n))
    duration = np.exp(rng.normal(np.log(600), 2.0, n)).clip(5, 20 * 86400)
    weights = 1 / np.arange(1, n_vcs + 1)
    vc = rng.choice([f"vc{k}" for k in range(n_vcs)], n, p=weights / weights.sum())
    queue = rng.exponential(delay_scale, n) * (rng.random(n) < 0.4)
    start = submit + queue
    return pd.DataFrame({
        "job_id": np.arange(n), "user": "u", "name": "job", "vc": vc,
        "gpus": rng.choice([1, 2, 4, 8], n), "submit_time": submit, "duration": duration,
        "start_time": start, "end_time": start + duration, "queue_delay": queue,
        "jct": queue + duration, "preemptions": 0,
    })


def make_timeline(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per submit/start/end event, as the simulator writes it."""
    times = np.concatenate([jobs["submit_time"], jobs["start_time"], jobs["end_time"]])
    busy = np.concatenate([np.zeros(len(jobs)), jobs["gpus"], -jobs["gpus"]])
    queued = np.concatenate([np.ones(len(jobs)), -np.ones(len(jobs)), np.zeros(len(jobs))])
    running = np.concatenate([np.zeros(len(jobs)), np.ones(len(jobs)), -np.ones(len(jobs))])
    order = np.argsort(times, kind="stable")
    return pd.DataFrame({
        "time": times[order], "busy_gpus": np.cumsum(busy[order]).clip(0, None),
        "total_gpus": TOTAL_GPUS, "running_jobs": np.cumsum(running[order]),
        "queued_jobs": np.cumsum(queued[order]), "powered_nodes": np.nan,
    })


def write_run(path: Path, policy: str, n: int = 400, seed: int = 0, delay_scale: float = 1800.0,
              energy: bool = False) -> dict:
    """A single-run directory (jobs.csv, summary.json, timeline.csv); returns the summary."""
    path.mkdir(parents=True, exist_ok=True)
    jobs = make_jobs(n, seed, delay_scale)
    timeline = make_timeline(jobs)
    jobs.to_csv(path / "jobs.csv", index=False)
    timeline.to_csv(path / "timeline.csv", index=False)
    summary = {"policy": policy, "placement": "consolidate", "trace": "synthetic-venus", **metrics(jobs),
               "makespan": float(jobs["end_time"].max()), "gpu_utilization": 0.6123, "preemptions": 0}
    summary["groups"] = {g: metrics(jobs[(jobs["duration"] >= lo) & (jobs["duration"] < hi)])
                         for g, (lo, hi) in GROUP_BOUNDS.items()}
    summary["per_vc"] = {vc: {**metrics(part), "gpu_utilization": 0.5}
                         for vc, part in jobs.groupby("vc")}
    if energy:
        summary["energy"] = {"gpu_energy_kwh": 1234.5, "saved_kwh": 98.7}
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return summary


def write_comparison(path: Path, policies: tuple[str, ...] = ("fifo", "sjf", "qssf"), n: int = 400) -> pd.DataFrame:
    """A comparison directory: summary.csv with ratios plus one run folder per policy."""
    rows = []
    for i, policy in enumerate(policies):
        summary = write_run(path / policy, policy, n=n, seed=i, delay_scale=1800.0 / (i + 1))
        rows.append({k: v for k, v in summary.items() if not isinstance(v, dict)})
    table = pd.DataFrame(rows)
    for key in ("avg_jct", "avg_queue_delay", "queued_jobs"):
        table[f"ratio_{key}"] = table[key] / table[key].iloc[0]
    table.to_csv(path / "summary.csv", index=False)
    return table


def write_energy(path: Path, days: int = 21) -> dict:
    """An energy replay directory: per-minute node series and its summary.json."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    times = pd.date_range("2020-04-01", periods=days * 1440, freq="min")
    hours = np.arange(len(times)) / 60
    active = np.round(80 + 30 * np.sin(2 * np.pi * hours / 24) + rng.normal(0, 4, len(times))).clip(0)
    predicted = np.roll(active, 30) + rng.normal(0, 3, len(times))
    predicted[:30] = np.nan
    powered = np.maximum(np.nan_to_num(predicted, nan=120) + 8, active).round()
    pd.DataFrame({"time": times.strftime("%Y-%m-%dT%H:%M:%S"), "active": active, "predicted": predicted,
                  "powered_on": powered}).to_csv(path / "series.csv", index=False)
    summary = {"trace": "synthetic-venus", "nodes": 133, "avg_powered_off_nodes": 41.27, "daily_wakeups": 5.5,
               "nodes_per_wakeup": 3.2, "node_util_before": 0.6, "node_util_after": 0.87, "smape": 3.914,
               "rmse": 5.021, "energy_saved_kwh": 15321.4}
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return summary
