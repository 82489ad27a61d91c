"""Plots for simulated runs: JCT CDF, queue delay per VC, and cluster state over time.

Each function takes one or more runs (one per policy) so a single run and a comparison share code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from dlsched.report.figure import marks, new_figure, style, tidy
from dlsched.report.fmt import time_unit
from dlsched.report.load import RunData, finite
from dlsched.report.sample import cdf_points, reduce_steps

SHORT_S, LONG_S = 15 * 60, 6 * 3600  # Helios Table 4 group boundaries


def jct_cdf(runs: Sequence[RunData]) -> Figure | None:
    """CDF of job completion time per policy on a log axis (Helios Fig. 11 style)."""
    curves = [(i, run, finite(run.jobs["jct"])) for i, run in enumerate(runs)]
    curves = [(i, run, v[v > 0]) for i, run, v in curves]
    if not any(v.size for _, _, v in curves):
        return None
    fig = new_figure()
    ax = fig.add_subplot()
    for i, run, values in curves:
        if values.size:
            x, y = cdf_points(values)
            ax.step(x, y, where="post", label=f"{run.label} (n={values.size:,})", linewidth=1.6, **style(i),
                    **(marks(i) if len(curves) > 1 else {}))
    for boundary, text in ((SHORT_S, "15 min"), (LONG_S, "6 h")):
        ax.axvline(boundary, color="0.55", linewidth=0.8, linestyle=":")
        ax.text(boundary, 0.02, f" {text}", color="0.4", fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("Job completion time (s, log scale)")
    ax.set_ylabel("CDF (fraction of jobs)")
    ax.set_title("JCT distribution")
    ax.legend(loc="lower right", frameon=False)
    tidy(ax)
    ax.grid(True, which="minor", axis="x", alpha=0.12, linewidth=0.5)
    return fig


def vc_stats(run: RunData) -> pd.DataFrame:
    """Jobs and average queue delay per VC: summary.json's per_vc when present, else from jobs.csv."""
    per_vc = run.summary.get("per_vc")
    if isinstance(per_vc, dict) and per_vc:
        rows = {str(vc): m for vc, m in per_vc.items() if isinstance(m, dict)}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        if "avg_queue_delay" in frame.columns:
            frame = frame.reindex(columns=["jobs", "avg_queue_delay"])
            return frame.apply(pd.to_numeric, errors="coerce")
    grouped = run.jobs.groupby("vc", sort=False)["queue_delay"]
    return pd.DataFrame({"jobs": grouped.size(), "avg_queue_delay": grouped.mean()})


def top_vcs(stats: Sequence[pd.DataFrame], limit: int) -> tuple[list[str], int]:
    """The ``limit`` VCs with most jobs over all runs, and how many VCs there are in total."""
    jobs = pd.concat([s["jobs"].fillna(0) for s in stats], axis=1).sum(axis=1)
    order = jobs.sort_values(ascending=False, kind="stable")
    return [str(v) for v in order.index[:limit]], len(order)


def vc_queue_delay(runs: Sequence[RunData], limit: int = 20) -> tuple[Figure | None, int, int]:
    """Grouped bars of average queue delay per VC and policy; returns (figure, shown, total VCs)."""
    stats = [vc_stats(run) for run in runs]
    vcs, total = top_vcs(stats, limit)
    if not vcs:
        return None, 0, 0
    table = np.array([[s["avg_queue_delay"].get(vc, np.nan) for vc in vcs] for s in stats], dtype=float)
    peak = np.nanmax(table) if np.isfinite(table).any() else 0.0
    divisor, unit = time_unit(peak)
    fig = new_figure(width=max(8.0, 0.45 * len(vcs) * max(1, len(runs)) ** 0.5 + 3))
    ax = fig.add_subplot()
    width = 0.8 / len(runs)
    pos = np.arange(len(vcs))
    for i, run in enumerate(runs):
        offset = (i - (len(runs) - 1) / 2) * width
        ax.bar(pos + offset, np.nan_to_num(table[i]) / divisor, width, label=run.label,
               color=style(i)["color"], edgecolor="white", linewidth=0.4)
    ax.set_xticks(pos, vcs, rotation=45 if len(vcs) > 8 else 0, ha="right" if len(vcs) > 8 else "center")
    ax.set_xlabel("Virtual cluster (by number of jobs, descending)")
    ax.set_ylabel(f"Average queue delay ({unit})")
    ax.set_title("Queue delay per VC")
    ax.set_xlim(-0.6, len(vcs) - 0.4)
    if len(runs) > 1:
        ax.legend(frameon=False)
    tidy(ax)
    ax.grid(False, axis="x")
    return fig, len(vcs), total


def varies(column: pd.Series | None) -> bool:
    """Whether a timeline column carries information: a constant (all nodes on) is not worth a panel."""
    return column is not None and column.dropna().nunique() > 1


def timeline(runs: Sequence[RunData]) -> Figure | None:
    """GPU utilisation, queued jobs and (if recorded) powered nodes over time, one line per policy."""
    lines = [(i, run, run.timeline) for i, run in enumerate(runs) if run.timeline is not None]
    lines = [(i, run, tl) for i, run, tl in lines if not tl.empty]
    if not lines:
        return None
    start = min(float(tl["time"].min()) for _, _, tl in lines)
    end = max(float(tl["time"].max()) for _, _, tl in lines)
    divisor, unit = time_unit(end)
    powered = any(varies(tl.get("powered_nodes")) for _, _, tl in lines)
    panels = [("util", "GPU utilisation\n(busy / total)"), ("queued_jobs", "Queued jobs")]
    if powered:
        panels.append(("powered_nodes", "Powered-on nodes"))
    fig = new_figure(height=2.3 * len(panels) + 0.6)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for i, run, tl in lines:
        t = tl["time"].to_numpy(dtype=float)
        total = tl["total_gpus"].to_numpy(dtype=float)
        util = np.divide(tl["busy_gpus"].to_numpy(dtype=float), total,
                         out=np.full(len(tl), np.nan), where=total > 0)
        for ax, (key, _) in zip(axes, panels):
            values = util if key == "util" else tl[key].to_numpy(dtype=float) if key in tl else None
            if values is None:
                continue
            x, y, raw = reduce_steps(t, values, start, end)
            if x.size:
                ax.plot(x / divisor, y, drawstyle="steps-post" if raw else "default",
                        linewidth=1.1, label=run.label, **style(i), **(marks(i, 0.12) if len(lines) > 1 else {}))
    for ax, (key, name) in zip(axes, panels):
        ax.set_ylabel(name)
        ax.set_ylim(bottom=0)
        tidy(ax)
        if key == "util":
            ax.set_ylim(0, 1.05)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes[0].set_title("Cluster state over time")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside: never hides data
    axes[-1].set_xlabel(f"Time since trace origin ({unit})")
    return fig
