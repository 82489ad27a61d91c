"""Helios-style characterisation of a trace (the statistics of Hu et al. SC'21 §3).

Used to check a loaded or synthetic trace against the published figures: duration CDF and
percentiles (Fig. 5a), GPU-count mix by jobs and GPU time (Fig. 6), arrivals per hour of day
(Fig. 2b), per-VC load (Fig. 4), final statuses (Fig. 7) and the Table 4 duration groups.
Duration statistics are over GPU jobs, as in the paper.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from dlsched.core import truth
from dlsched.traces.model import Trace

GPUS_PER_NODE = 8
PERCENTILES = (10, 25, 50, 75, 90, 95, 99)
CDF_POINTS = (1, 10, 60, 300, 900, 1000, 3600, 6 * 3600, 86400, 7 * 86400)
# Helios Table 4 groups: short < 15 min, middle 15 min - 6 h, long > 6 h
GROUPS = (("short (<15 min)", 0.0, 900.0), ("middle (15 min-6 h)", 900.0, 21600.0),
          ("long (>6 h)", 21600.0, float("inf")))


def _arrays(trace: Trace) -> dict[str, np.ndarray]:
    jobs = trace.jobs
    return {"gpus": np.fromiter((j.gpus for j in jobs), np.int64, len(jobs)),
            "duration": np.fromiter(map(truth.duration, jobs), np.float64, len(jobs)),
            "submit": np.fromiter((j.submit_time for j in jobs), np.float64, len(jobs)),
            "vc": np.array([j.vc for j in jobs], dtype=object),
            "status": np.array(list(map(truth.status, jobs)), dtype=object),
            "user": np.array([j.user for j in jobs], dtype=object)}


def trace_stats(trace: Trace, cluster: dict[str, int] | None = None) -> dict:
    """A JSON-ready dict of the trace's characterisation; ``cluster`` (VC -> nodes) adds load."""
    a = _arrays(trace)
    gpu = a["gpus"] > 0
    g, d = a["gpus"][gpu], a["duration"][gpu]
    gt = g * d
    total_gt = float(gt.sum()) or 1.0
    span = float(a["submit"].max() - a["submit"].min()) if len(a["submit"]) else 0.0
    out: dict = {
        "name": trace.name, "jobs": len(trace), "gpu_jobs": int(gpu.sum()),
        "cpu_jobs": int((~gpu).sum()),
        "origin": trace.origin.isoformat() if trace.origin else None,
        "span_days": span / 86400.0, "gpu_time_gpu_hours": float(gt.sum()) / 3600.0,
    }
    out["duration"] = _durations(d)
    out["groups"] = {}
    for name, lo, hi in GROUPS:
        m = (d >= lo) & (d < hi)
        out["groups"][name] = {"jobs": int(m.sum()), "share": _share(m.sum(), len(d)),
                               "gpu_time_share": float(gt[m].sum()) / total_gt}
    out["gpus"] = _gpu_mix(g, gt, total_gt)
    out["arrivals"] = _arrivals(a["submit"], trace)
    out["vcs"] = _per_key(a["vc"][gpu], g, d, gt)
    out["status"] = {str(s): {"jobs": v["jobs"], "share": v["share"], "gpu_time_share": v["gpu_time_share"]}
                     for s, v in _per_key(a["status"][gpu], g, d, gt).items()}
    out["users"] = _users(a["user"][gpu], gt, total_gt)
    if cluster:
        gpus_total = sum(cluster.values()) * GPUS_PER_NODE
        out["cluster_gpus"] = gpus_total
        out["offered_load"] = float(gt.sum()) / (gpus_total * max(span, 1.0))
    return out


def _share(n: float, total: float) -> float:
    return float(n) / total if total else 0.0


def _durations(d: np.ndarray) -> dict:
    if not len(d):
        return {"mean": 0.0, "max": 0.0, "percentiles": {}, "cdf": {}}
    pct = np.percentile(d, PERCENTILES)
    srt = np.sort(d)
    cdf = {str(p): float(np.searchsorted(srt, p, side="right")) / len(d) for p in CDF_POINTS}
    return {"mean": float(d.mean()), "max": float(d.max()),
            "percentiles": {f"p{p}": float(v) for p, v in zip(PERCENTILES, pct)},
            "cdf": cdf, "under_1000s": cdf["1000"]}


def _gpu_mix(g: np.ndarray, gt: np.ndarray, total_gt: float) -> dict:
    sizes, counts = np.unique(g, return_counts=True)
    mix = {str(int(s)): {"jobs": int(c), "share": _share(c, len(g)),
                         "gpu_time_share": float(gt[g == s].sum()) / total_gt}
           for s, c in zip(sizes, counts)}
    big = g >= 8
    return {"mean": float(g.mean()) if len(g) else 0.0, "max": int(g.max()) if len(g) else 0,
            "single_gpu_share": _share((g == 1).sum(), len(g)),
            "ge8_share": _share(big.sum(), len(g)), "ge8_gpu_time_share": float(gt[big].sum()) / total_gt,
            "mix": mix}


def _arrivals(submit: np.ndarray, trace: Trace) -> dict:
    """Jobs per hour of day (wall clock if the trace has an origin) and per weekday."""
    offset = 0.0
    if trace.origin is not None:
        midnight = trace.origin.replace(hour=0, minute=0, second=0, microsecond=0)
        offset = (trace.origin - midnight) / timedelta(seconds=1)
    t = submit + offset
    hours = np.bincount(((t // 3600) % 24).astype(np.int64), minlength=24)
    out = {"wall_clock": trace.origin is not None, "per_hour": [int(x) for x in hours]}
    if trace.origin is not None:
        dow = ((trace.origin.weekday() + t // 86400) % 7).astype(np.int64)
        out["per_weekday"] = [int(x) for x in np.bincount(dow, minlength=7)]  # Monday first
    return out


def _per_key(keys: np.ndarray, g: np.ndarray, d: np.ndarray, gt: np.ndarray) -> dict:
    if not len(keys):
        return {}
    uniq, inv = np.unique(keys.astype(str), return_inverse=True)
    counts = np.bincount(inv, minlength=len(uniq))
    gtime = np.bincount(inv, weights=gt, minlength=len(uniq))
    gsum = np.bincount(inv, weights=g, minlength=len(uniq))
    total = float(gt.sum()) or 1.0
    order = np.argsort(-counts, kind="stable")
    return {str(uniq[i]): {"jobs": int(counts[i]), "share": _share(counts[i], len(keys)),
                           "gpu_hours": float(gtime[i]) / 3600.0, "gpu_time_share": float(gtime[i]) / total,
                           "mean_gpus": float(gsum[i]) / counts[i],
                           "median_duration": float(np.median(d[inv == i]))}
            for i in order}


def _users(users: np.ndarray, gt: np.ndarray, total_gt: float) -> dict:
    if not len(users):
        return {"count": 0}
    _, inv = np.unique(users.astype(str), return_inverse=True)
    per = np.sort(np.bincount(inv, weights=gt))[::-1]
    top = max(1, round(len(per) * 0.05))
    return {"count": len(per), "top5pct_gpu_time_share": float(per[:top].sum()) / total_gt}
