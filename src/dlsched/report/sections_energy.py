"""Report sections for an energy replay: node series plots and the summary figures."""

from __future__ import annotations

import pandas as pd

from dlsched.report.figure import to_data_uri
from dlsched.report.fmt import cell, label
from dlsched.report.load import EnergyData
from dlsched.report.page import Section, figure, note
from dlsched.report.plots_energy import node_series
from dlsched.report.tables import kv_table

HEADLINE = ("avg_powered_off_nodes", "daily_wakeups", "nodes_per_wakeup", "node_util_before",
            "node_util_after", "smape", "rmse")
ZOOM = pd.Timedelta(days=7)


def energy_headline(summary: dict) -> list[tuple[str, str]]:
    """Card items for the figures Helios reports for its energy-saving replay."""
    return [(label(k), cell(k, summary[k])) for k in HEADLINE if k in summary]


def energy_sections(data: EnergyData) -> list[Section]:
    """Whole-replay plot, a one-week zoom for long replays, and the summary table."""
    series = data.series
    caption = ("Actual active nodes, the predictor's forecast, and nodes kept powered on "
               "(time-weighted means when downsampled).")
    fig = node_series(series, "Active vs predicted vs powered-on nodes")
    body = figure(to_data_uri(fig), "Node counts over time", caption) if fig else note("series.csv has no rows.")
    if fig is not None and series["time"].iloc[-1] - series["time"].iloc[0] > 2 * ZOOM:
        start = series["time"].iloc[0]
        zoom = node_series(series, "First week", (start, start + ZOOM))
        if zoom is not None:
            body += figure(to_data_uri(zoom), "Node counts, first week", "Zoom into the first seven days.")
    return [
        Section("nodes", "Nodes over time", body),
        Section("energy-summary", "Summary figures", kv_table(data.summary)),
    ]
