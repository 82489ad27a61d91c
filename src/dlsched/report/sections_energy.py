"""Report sections for an energy replay: node series plots and the summary figures."""

from __future__ import annotations

import pandas as pd

from dlsched.report.energy_text import energy_sentences, units_table
from dlsched.report.figure import to_data_uri
from dlsched.report.fmt import cell, label
from dlsched.report.load import EnergyData
from dlsched.report.page import Section, figure, note
from dlsched.report.plots_energy import node_series

HEADLINE = ("avg_powered_off_nodes", "daily_wakeups", "nodes_per_wakeup", "node_util_before",
            "node_util_after", "smape", "rmse")
ZOOM = pd.Timedelta(days=7)
# what only a forecast-driven controller (CES) uses: a vanilla idle-timeout replay shows none of it
FORECAST_KEYS = ("smape", "rmse", "train_bins", "train_end", "forecast_horizon_steps", "validation_start",
                 "ces_params")


def uses_forecast(summary: dict) -> bool:
    """False for the vanilla idle-timeout controller, which never reads the forecast."""
    return summary.get("policy") != "vanilla"


def energy_headline(summary: dict) -> list[tuple[str, str]]:
    """Card items for the figures Helios reports for its energy-saving replay."""
    shown = HEADLINE if uses_forecast(summary) else tuple(k for k in HEADLINE if k not in FORECAST_KEYS)
    return [(label(k), cell(k, summary[k])) for k in shown if k in summary]


def summary_body(summary: dict, forecast: bool) -> str:
    """Sentences first, then the figures with units, the energy model and the controller's parameters."""
    skip = () if forecast else FORECAST_KEYS
    energy = summary.get("energy") if isinstance(summary.get("energy"), dict) else {}
    currency = str(energy.get("currency", "USD"))
    body = energy_sentences(summary, forecast) + units_table(summary, currency, skip)
    if energy:
        body += "<h3>Energy model and savings</h3>" + units_table(energy, currency)
    params = summary.get("ces_params")
    if forecast and isinstance(params, dict):
        body += "<h3>CES parameters</h3>" + units_table(params, currency)
    return body


def energy_sections(data: EnergyData) -> list[Section]:
    """Whole-replay plot, a one-week zoom for long replays, and the summary table."""
    series = data.series
    forecast = uses_forecast(data.summary)
    if not forecast:
        series = series.drop(columns=["predicted"], errors="ignore")
    caption = ("Actual active nodes, " + ("the predictor's forecast, " if forecast else "")
               + "and nodes kept powered on (time-weighted means when downsampled).")
    fig = node_series(series, "Active vs predicted vs powered-on nodes" if forecast else "Active vs powered-on nodes")
    body = figure(to_data_uri(fig), "Node counts over time", caption) if fig else note("series.csv has no rows.")
    if fig is not None and series["time"].iloc[-1] - series["time"].iloc[0] > 2 * ZOOM:
        start = series["time"].iloc[0]
        zoom = node_series(series, "First week", (start, start + ZOOM))
        if zoom is not None:
            body += figure(to_data_uri(zoom), "Node counts, first week", "Zoom into the first seven days.")
    return [
        Section("nodes", "Nodes over time", body),
        Section("energy-summary", "Summary figures", summary_body(data.summary, forecast)),
    ]
