"""Per-job records and summaries (cluster-wide, per VC, Helios Table 4 duration groups)."""

from __future__ import annotations

from itertools import count
from operator import attrgetter

import numpy as np

from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration

# Helios Table 4 groups by job duration: short < 15 min, middle 15 min - 6 h, long > 6 h
GROUPS = {"short": (0.0, 15 * 60.0), "middle": (15 * 60.0, 6 * 3600.0), "long": (6 * 3600.0, float("inf"))}


def job_arrays(jobs: list[Job]) -> dict[str, np.ndarray]:
    """Columns of the per-job record, as numpy arrays (one pass over the jobs)."""
    n = len(jobs)

    def column(name: str, dtype: type) -> np.ndarray:  # attrgetter mapped in C: 2-3x a generator
        return np.fromiter(map(attrgetter(name), jobs), dtype, n)

    submit, end = column("submit_time", float), column("end_time", float)
    return {
        "submit_time": submit,
        "start_time": column("start_time", float),
        "end_time": end,
        "queue_delay": column("queue_delay", float),
        "jct": end - submit,
        "duration": np.fromiter(map(true_duration, jobs), float, n),  # metrics may read truth (C getter)
        "gpus": column("gpus", np.int64),
        "preemptions": column("preemptions", np.int64),
    }


SUMMARY_BLOCK = 1 << 14  # jobs read per block by summary_arrays


def summary_arrays(jobs: list[Job]) -> dict[str, np.ndarray]:
    """What :func:`summarize` needs and no more: ``jct``, ``queue_delay``, ``duration`` and ``gpus``
    for every job, ``end_time``/``submit_time`` reduced to their largest/smallest value and
    ``preemptions`` to its total (one-element arrays). Half the memory of :func:`job_arrays`
    for a run's summary (the writer reads the other columns a block at a time), same results:
    ``jct`` is the same element-wise difference, extremes and integer sums do not depend on the
    blocks."""
    n = len(jobs)
    jct, queue, duration = np.empty(n), np.empty(n), np.empty(n)
    gpus = np.empty(n, np.int32)  # GPU counts: 4 bytes hold any, and duration * gpus is the same float
    ends, submits, preemptions = [], [], 0
    for lo in range(0, n, SUMMARY_BLOCK):
        block = jobs[lo:lo + SUMMARY_BLOCK]
        k = len(block)

        def column(name: str, dtype: type, block: list = block, k: int = k) -> np.ndarray:
            return np.fromiter(map(attrgetter(name), block), dtype, k)

        submit, end = column("submit_time", float), column("end_time", float)
        np.subtract(end, submit, out=jct[lo:lo + k])
        queue[lo:lo + k] = column("queue_delay", float)
        duration[lo:lo + k] = np.fromiter(map(true_duration, block), float, k)
        gpus[lo:lo + k] = column("gpus", np.int64)
        preemptions += int(column("preemptions", np.int64).sum())
        ends.append(end.max())
        submits.append(submit.min())
    return {"jct": jct, "queue_delay": queue, "duration": duration, "gpus": gpus,
            "end_time": np.array([np.max(ends)] if ends else []),
            "submit_time": np.array([np.min(submits)] if submits else []),
            "preemptions": np.array([preemptions], np.int64)}


def _median(values: np.ndarray) -> float:
    """``np.median`` of a non-empty float array, the same value: the middle element, or the mean
    of the two middle ones, ``(a + b) / 2`` as ``np.mean`` computes it. Without NaN only (those
    go to ``np.median``): its NaN check imports ``numpy.ma``, a start-up cost of its own."""
    n = len(values)
    if np.isnan(values.max()):
        return float(np.median(values))
    half = n // 2
    if n % 2:
        return float(np.partition(values, half)[half])
    part = np.partition(values, (half - 1, half))
    return float((part[half - 1] + part[half]) / 2)


def _percentiles(values: np.ndarray, percents: tuple[float, ...]) -> list[float]:
    """``np.percentile(values, percents)`` (linear method) of a non-empty float array, the same
    floats: the order statistics around each virtual index ``(n - 1) q`` blended as numpy's
    ``_lerp`` does (from the upper one when the weight is >= 0.5). Without NaN only (those go
    to numpy): ``np.percentile`` passes its indices through ``np.unique``, which imports
    ``numpy.ma`` (0.05 s of a command's start)."""
    n = len(values)
    if np.isnan(values.max()):
        return np.percentile(values, percents).tolist()
    virtual = (n - 1) * (np.asarray(percents) / 100)
    lower = np.floor(virtual).astype(np.intp)
    upper = lower + 1
    beyond = virtual >= n - 1
    lower[beyond] = upper[beyond] = n - 1
    part = np.partition(values, sorted({*lower.tolist(), *upper.tolist()}))
    a, b = part[lower], part[upper]
    weight = virtual - lower
    diff = b - a
    out = a + diff * weight
    np.subtract(b, diff * (1 - weight), out=out, where=weight >= 0.5)
    return out.tolist()


def _stats(cols: dict[str, np.ndarray], mask: np.ndarray | None = None) -> dict[str, float]:
    jct, queue = cols["jct"], cols["queue_delay"]
    if mask is not None:
        jct, queue = jct[mask], queue[mask]
    if len(jct) == 0:
        return {"jobs": 0}
    p95_jct, p99_jct = _percentiles(jct, (95, 99))
    p95_queue, p99_queue = _percentiles(queue, (95, 99))
    return {
        "jobs": int(len(jct)),
        "avg_jct": float(jct.mean()),
        "median_jct": _median(jct),
        "p95_jct": p95_jct,
        "p99_jct": p99_jct,
        "avg_queue_delay": float(queue.mean()),
        "median_queue_delay": _median(queue),
        "p95_queue_delay": p95_queue,
        "p99_queue_delay": p99_queue,
        "queued_jobs": int((queue > 0).sum()),
    }


def summarize(jobs: list[Job], recorder=None, cols: dict[str, np.ndarray] | None = None) -> dict:
    """The summary written to ``summary.json``: overall, per VC and per duration group."""
    cols = cols if cols is not None else job_arrays(jobs)
    out = _stats(cols)
    out["makespan"] = float(cols["end_time"].max() - cols["submit_time"].min()) if len(jobs) else 0.0
    out["preemptions"] = int(cols["preemptions"].sum())
    out["gpu_time"] = float((cols["duration"] * cols["gpus"]).sum())
    if recorder is not None:
        out["gpu_utilization"] = recorder.gpu_utilization()
    dur = cols["duration"]
    out["groups"] = {name: _stats(cols, (dur >= lo) & (dur < hi)) for name, (lo, hi) in GROUPS.items()}
    codes: dict[str, int] = {}  # VC -> a code of its own, in order of first appearance (one pass, in C)
    vc_code = np.fromiter(map(codes.setdefault, map(attrgetter("vc"), jobs), count()), np.int64, len(jobs))
    per_vc = {}
    for vc, code in codes.items():
        stats = _stats(cols, vc_code == code)
        if recorder is not None:
            state = recorder.state
            stats["gpu_utilization"] = recorder.vc_utilization(state.vcs[state.vc_index[vc]])
        per_vc[vc] = stats
    out["per_vc"] = per_vc
    return out
