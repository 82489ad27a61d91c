"""Report readability (issue 12, item 6): each policy's line has its own dash pattern and marker,
so coinciding CDFs stay apart without colour; energy figures read as sentences with units."""

from __future__ import annotations

import json

from support.report_fixtures import write_energy, write_run

from dlsched.report import build_report
from dlsched.report.figure import marks, style
from dlsched.report.load import load_run
from dlsched.report.plots_runs import jct_cdf

CES_SUMMARY = {
    "policy": "ces", "eval_start": "2020-03-29 00:00:00", "eval_end_exclusive": "2020-04-05 00:00:00",
    "total_nodes": 100, "steps": 1008, "days": 7.0, "avg_powered_off_nodes": 23.363, "wakeups": 14,
    "daily_wakeups": 2.0, "woken_nodes": 296, "nodes_per_wakeup": 21.143, "node_util_before": 0.59876,
    "node_util_after": 0.76952, "waiting_node_minutes": 190.0, "powered_off_node_hours": 3925.0,
    "smape": 4.6775, "rmse": 3.2177, "train_bins": 3870, "train_end": "2020-03-28 23:50:00",
    "forecast_horizon_steps": 18,
    "energy": {"idle_power_w": 800.0, "cooling_factor": 3.0, "price_per_kwh": 0.1, "currency": "USD",
               "energy_saved_kwh": 9420.0, "cost_saved": 942.0, "energy_saved_kwh_per_year": 491185.71,
               "cost_saved_per_year": 49118.57},
    "ces_params": {"buffer": 20, "keep": 10, "period": 600.0, "boot_delay": 300.0},
    "seconds": {"fit": 26.2, "total": 27.5},
}


def test_series_differ_in_dash_and_marker_not_colour_only():
    styles = [style(i) for i in range(10)]
    assert len({str(s["linestyle"]) for s in styles}) == 10
    assert len({marks(i)["marker"] for i in range(10)}) == 10


def test_cdf_lines_of_a_comparison_are_distinguishable(tmp_path):
    runs = []
    for policy in ("fifo", "sjf", "srtf"):
        write_run(tmp_path / policy, policy, seed=0)  # same seed: the three CDFs coincide
        runs.append(load_run(tmp_path / policy, policy))
    ax = jct_cdf(runs).axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label().split(" ")[0] in ("fifo", "sjf", "srtf")]
    assert len(lines) == 3
    assert len({repr(ln._dash_pattern) for ln in lines}) == 3  # solid, dashed, dotted: three dash patterns
    assert len({ln.get_marker() for ln in lines}) == 3 and all(ln.get_marker() not in (None, "None", "") for ln in lines)
    assert len({str(ln.get_markevery()) for ln in lines}) == 3  # offset, so coinciding markers do not hide


def test_energy_summary_reads_as_sentences_with_units(tmp_path):
    write_energy(tmp_path, days=3)
    (tmp_path / "summary.json").write_text(json.dumps(CES_SUMMARY))
    page = build_report(tmp_path).read_text()
    section = page[page.index('<section id="energy-summary"'):]
    for sentence in (("Over 7 days (2020-03-29 to 2020-04-05, end exclusive) on 100 nodes, CES kept on average "
                     "23.4 nodes powered off (3,925 node-hours)."),
                     "It woke nodes 14 times (2.0 per day), 21.1 nodes per wake-up",
                     "Node utilisation rose from 59.9 % (all nodes on) to 77.0 % of the powered-on nodes.",
                     ("Energy saved: 9,420 kWh (USD 942), about 491,186 kWh a year at this rate (USD 49,119), "
                     "assuming 800 W idle per node, cooling factor 3, USD 0.10/kWh."),
                     "The node-demand forecast had SMAPE 4.68 % and RMSE 3.22 nodes"):
        assert sentence in section, sentence
    # figure / value / unit rows, not raw keys
    assert "<th>Unit</th>" in section
    assert '<th scope="row">Powered-off nodes, time-weighted mean</th><td>23.4</td><td>nodes</td>' in section
    assert '<th scope="row">Electricity price</th><td>0.10</td><td>USD/kWh</td>' in section
    assert '<th scope="row">Boot delay</th><td>300</td><td>s</td>' in section
    for raw in ("energy_saved_kwh", "ces_params", "avg_powered_off_nodes", "Seconds"):
        assert raw not in section, raw
