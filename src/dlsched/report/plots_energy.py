"""Plot of an energy replay: active vs predicted vs powered-on nodes over time (Helios Fig. 14 style)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from dlsched.report.figure import new_figure, tidy
from dlsched.report.sample import reduce_steps

SERIES_STYLE = {
    "powered_on": {"label": "Powered-on nodes", "color": "#2ca02c", "linewidth": 1.3},
    "active": {"label": "Active nodes (actual)", "color": "#1f77b4", "linewidth": 1.1},
    "predicted": {"label": "Predicted active nodes", "color": "#d62728", "linewidth": 1.1,
                  "linestyle": "--"},
}


def node_series(series: pd.DataFrame, title: str, window: tuple | None = None) -> Figure | None:
    """Lines of the node counts; ``window`` = (start, end) timestamps zooms into part of the replay."""
    frame = series
    if window is not None:
        frame = series[(series["time"] >= window[0]) & (series["time"] <= window[1])]
    if frame.empty:
        return None
    seconds = frame["time"].to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9
    start, end = float(seconds.min()), float(seconds.max())
    fig = new_figure(height=3.8)
    ax = fig.add_subplot()
    for key, kwargs in SERIES_STYLE.items():
        if key not in frame.columns or not frame[key].notna().any():
            continue
        x, y, raw = reduce_steps(seconds, frame[key].to_numpy(dtype=float), start, end)
        stamps = (x * 1e9).astype(np.int64).astype("datetime64[ns]")
        ax.plot(stamps, y, drawstyle="steps-post" if raw else "default", **kwargs)
        if key == "powered_on":
            ax.fill_between(stamps, y, step="post" if raw else None, color=kwargs["color"], alpha=0.08)
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # headroom so the legend above the curves hides nothing
    ax.set_xlabel("Time")
    ax.set_ylabel("Nodes")
    ax.set_title(title)
    ax.legend(loc="upper left", frameon=False, ncol=3)
    tidy(ax)
    return fig
