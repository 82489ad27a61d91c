"""Energy figures as a reader wants them: a few sentences with units, then a figure/value/unit
table, instead of a dump of summary.json keys (issue 12). Used by the energy-replay report and by
the energy section of a simulated run (``--energy ces|vanilla``)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

from dlsched.report.fmt import label
from dlsched.report.tables import render

# key -> (what it is, unit); {cur} is replaced by the summary's currency
UNITS: dict[str, tuple[str, str]] = {
    "eval_start": ("First instant evaluated", "date"),
    "eval_end_exclusive": ("End of the evaluated span (exclusive)", "date"),
    "validation_start": ("Forecaster validation from", "date"),
    "train_end": ("Forecaster trained up to", "date"),
    "total_nodes": ("Nodes in the cluster", "nodes"),
    "days": ("Evaluated span", "days"),
    "steps": ("Controller checks", "checks"),
    "filled_gap_bins": ("Series gaps filled", "bins"),
    "avg_powered_off_nodes": ("Powered-off nodes, time-weighted mean", "nodes"),
    "wakeups": ("Wake-ups", "events"),
    "woken_nodes": ("Nodes woken", "nodes"),
    "daily_wakeups": ("Wake-ups per day", "per day"),
    "nodes_per_wakeup": ("Nodes per wake-up", "nodes"),
    "node_util_before": ("Node utilisation, all nodes on", "%"),
    "node_util_after": ("Node utilisation of powered-on nodes", "%"),
    "waiting_node_minutes": ("Demand that waited for booting nodes", "node-minutes"),
    "powered_off_node_hours": ("Powered-off time", "node-hours"),
    "jobs_waiting_for_power": ("Jobs that waited for a node to boot", "jobs"),
    "smape": ("Forecast error, SMAPE", "%"),
    "rmse": ("Forecast error, RMSE", "nodes"),
    "train_bins": ("Forecaster training bins", "bins"),
    "forecast_horizon_steps": ("Forecast horizon", "checks"),
    "idle_power_w": ("Idle power per node", "W"),
    "cooling_factor": ("Facility energy per server energy (cooling factor)", "×"),
    "price_per_kwh": ("Electricity price", "{cur}/kWh"),
    "energy_saved_kwh": ("Energy saved over the span", "kWh"),
    "cost_saved": ("Cost saved over the span", "{cur}"),
    "energy_saved_kwh_per_year": ("Energy saved, extrapolated to a year", "kWh/year"),
    "cost_saved_per_year": ("Cost saved, extrapolated to a year", "{cur}/year"),
    "history": ("Past checks in the recent trend", "checks"),
    "future": ("Future steps in the predicted trend", "checks"),
    "xi_h": ("Recent-trend threshold ξh", ""),
    "xi_p": ("Predicted-trend threshold ξp", ""),
    "de_threshold": ("Power-off threshold (nodes)", "nodes"),
    "buffer": ("Spare powered-on nodes σ", "nodes"),
    "keep": ("Checks without power-off after a wake-up", "checks"),
    "period": ("Check period", "s"),
    "boot_delay": ("Boot delay", "s"),
    "idle_timeout": ("Idle time before power-off", "s"),
}
PERCENT = ("node_util_before", "node_util_after")
# never shown as figures: bookkeeping, or said in the sentences
HIDDEN = ("seconds", "source", "currency", "policy", "controller")


def _num(value: float, digits: int = 1) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.{digits}f}" if abs(value) >= 1 else f"{value:.3g}"


def _value(key: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return html.escape(str(value))
    if isinstance(value, float) and math.isnan(value):
        return "—"
    if key in PERCENT:
        return f"{100 * value:.1f}"
    if key == "price_per_kwh":
        return f"{value:.2f}"
    return _num(value, 2 if key in ("smape", "rmse", "daily_wakeups", "price_per_kwh", "cooling_factor") else 1)


def units_table(data: Mapping, currency: str = "USD", skip: tuple[str, ...] = ()) -> str:
    """Figure / value / unit rows for the scalars of ``data`` (nested dicts become their own rows)."""
    rows = []
    for key, value in data.items():
        if key in HIDDEN or key in skip or isinstance(value, Mapping | list):
            continue
        what, unit = UNITS.get(key) or _guess(key)
        rows.append([html.escape(what), _value(key, value), html.escape(unit.format(cur=currency))])
    return render(["Figure", "Value", "Unit"], rows, cls="kv") if rows else ""


SUFFIX_UNITS = (("_kwh", "kWh"), ("_wh", "Wh"), ("_w", "W"), ("_s", "s"), ("_h", "h"), ("_hours", "h"))


def _guess(key: str) -> tuple[str, str]:
    """An unknown key: its unit from the suffix (``saved_kwh`` -> kWh), the rest as the label."""
    for suffix, unit in SUFFIX_UNITS:
        if key.endswith(suffix):
            return label(key[: -len(suffix)]), unit
    return label(key), ""


def _day(stamp: object) -> str:
    return str(stamp)[:10]


def energy_sentences(summary: Mapping, forecast: bool = True) -> str:
    """What the replay (or a simulated run's power controller) did, in a few sentences."""
    s, energy = summary, summary.get("energy") if isinstance(summary.get("energy"), Mapping) else summary
    name = {"ces": "CES", "vanilla": "Vanilla DRS (idle timeout)"}.get(str(s.get("policy", "")),
                                                                    str(s.get("controller", "The controller")))
    parts = []
    where = f" on {s['total_nodes']:,} nodes" if "total_nodes" in s else ""
    span = ""
    if "days" in s:
        span = f"Over {_num(s['days'])} days"
        if "eval_start" in s and "eval_end_exclusive" in s:
            span += f" ({_day(s['eval_start'])} to {_day(s['eval_end_exclusive'])}, end exclusive)"
    if "avg_powered_off_nodes" in s:
        parts.append(f"{span or 'Over the run'}{where}, {name} kept on average "
                     f"{_num(s['avg_powered_off_nodes'])} nodes powered off"
                     + (f" ({_num(s['powered_off_node_hours'])} node-hours)" if "powered_off_node_hours" in s else "")
                     + ".")
    if "wakeups" in s:
        parts.append(f"It woke nodes {s['wakeups']:,} times ({s.get('daily_wakeups', 0.0):.1f} per day), "
                     f"{_num(s.get('nodes_per_wakeup', 0.0))} nodes per wake-up"
                     + (f"; demand waited {_num(s['waiting_node_minutes'])} node-minutes for booting nodes"
                        if "waiting_node_minutes" in s else "")
                     + (f"; {s['jobs_waiting_for_power']:,} jobs waited for a node to boot"
                        if "jobs_waiting_for_power" in s else "") + ".")
    if "node_util_before" in s and "node_util_after" in s:
        parts.append(f"Node utilisation rose from {100 * s['node_util_before']:.1f} % (all nodes on) to "
                     f"{100 * s['node_util_after']:.1f} % of the powered-on nodes.")
    cur = str(energy.get("currency", "USD"))
    if "energy_saved_kwh" in energy:
        text = f"Energy saved: {_num(energy['energy_saved_kwh'])} kWh"
        if "cost_saved" in energy:
            text += f" ({cur} {_num(energy['cost_saved'])})"
        if "energy_saved_kwh_per_year" in energy:
            text += f", about {_num(energy['energy_saved_kwh_per_year'], 0)} kWh a year at this rate"
            if "cost_saved_per_year" in energy:
                text += f" ({cur} {_num(energy['cost_saved_per_year'], 0)})"
        assumed = []
        if "idle_power_w" in energy:
            assumed.append(f"{_num(energy['idle_power_w'])} W idle per node")
        if "cooling_factor" in energy:
            assumed.append(f"cooling factor {_num(energy['cooling_factor'], 2)}")
        if "price_per_kwh" in energy:
            assumed.append(f"{cur} {energy['price_per_kwh']:.2f}/kWh")
        parts.append(text + (f", assuming {', '.join(assumed)}." if assumed else "."))
    if forecast and "smape" in s:
        text = f"The node-demand forecast had SMAPE {s['smape']:.2f} %"
        if "rmse" in s:
            text += f" and RMSE {s['rmse']:.2f} nodes"
        if "train_bins" in s:
            text += f", trained on {s['train_bins']:,} bins" + (f" up to {s['train_end']}" if "train_end" in s else "")
        parts.append(text + ".")
    return "".join(f"<p>{html.escape(p)}</p>" for p in parts)
