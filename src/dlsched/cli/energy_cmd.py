"""``dlsched energy replay`` and ``dlsched forecast``: Cluster Energy Saving (Helios §4.3) from the shell.

A thin layer over :mod:`dlsched.experiments.helios.energy`; heavy imports (pandas, LightGBM) happen inside
the commands so other ``dlsched`` commands start fast. Bad input ends with one ``error:`` line
naming the file/line/column and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dlsched.cli import progress
from dlsched.cli.tables import FittingConsole

_out = FittingConsole()  # tables fitted to the width: no number is ever cut
_err = Console(stderr=True)


class Policy(StrEnum):
    ces = "ces"
    vanilla = "vanilla"


class Calendar(StrEnum):
    us = "us"
    cn = "cn"
    none = "none"


SeriesOpt = Annotated[Path, typer.Option("--series", help="Occupancy CSV(.gz): 'time,active,total' nodes, "
                                         "or a Helios VC sequence with running_gpu_num,total_gpu_num.")]
EvalStartOpt = Annotated[str | None, typer.Option(
    "--eval-start", help="First day evaluated (default: 14 days before --eval-end).")]
EvalEndOpt = Annotated[str | None, typer.Option("--eval-end", help="Last day evaluated, inclusive (default: "
                                                "the last complete day of the series).")]
HolidayOpt = Annotated[Calendar, typer.Option("--holidays", help="Holiday calendar for the forecaster.")]
GpusOpt = Annotated[int, typer.Option("--gpus-per-node", min=1, help="GPUs per node for GPU-count series.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Forecaster seed.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of tables.")]


def _fail(message: str) -> typer.Exit:
    _err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _load(path: Path, gpus_per_node: int, eval_start: str | None, eval_end: str | None) -> tuple[Any, Any]:
    from dlsched.energy.series import SeriesError, load_node_series
    from dlsched.experiments.helios.energy import resolve_window

    try:
        series = load_node_series(path, gpus_per_node=gpus_per_node)
    except SeriesError as exc:
        raise _fail(str(exc)) from None
    try:
        return series, resolve_window(series, eval_start, eval_end)
    except ValueError as exc:
        raise _fail(f"{path}: {exc}") from None


MAX_BOOT_DELAY_S = 86400.0
"""A node that needs more than a day to boot is a typo (minutes for seconds, say)."""
MAX_IDLE_S = 30 * 86400.0
"""Idle timeouts beyond a month never power anything off in any series we read."""


def _seconds(name: str, seconds: float | None, old: str, minutes: float | None, default: float,
             limit: float) -> float:
    """One duration in seconds from the option in seconds or its deprecated spelling in minutes
    (with a note: ``simulate`` takes seconds, so ``energy replay`` does too)."""
    if seconds is not None and minutes is not None:
        raise _fail(f"give {name} (seconds) or the deprecated {old} (minutes), not both")
    if minutes is not None:
        if not math.isfinite(minutes) or minutes * 60.0 > limit:
            raise _fail(f"{old} must be a finite number of at most {limit / 60.0:,.0f} minutes, got {minutes:g}")
        _err.print(f"note: {old} {minutes:g} is in minutes and deprecated; use {name} {minutes * 60.0:g} "
                   f"(seconds, the unit simulate's {old} takes)", highlight=False, soft_wrap=True, markup=False)
        return minutes * 60.0
    if seconds is None:
        return default
    if not math.isfinite(seconds) or seconds > limit:
        raise _fail(f"{name} must be a finite number of at most {limit:,.0f} s, got {seconds:g}")
    return seconds


def _check_finite(values: dict[str, float]) -> None:
    """NaN and infinity pass typer's range checks; no energy figure means anything with them."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise _fail(f"{name} must be a finite number, got {value:g}")


def _jsonable(obj: Any) -> Any:
    return obj if isinstance(obj, (str, int, float, bool, type(None))) else str(obj)


def replay_cmd(
    series_path: SeriesOpt,
    out: Annotated[Path, typer.Option("--out", help="Directory for summary.json and series.csv.")],
    policy: Annotated[Policy, typer.Option("--policy", help="ces (Algorithm 2) or vanilla (idle timeout).")]
    = Policy.ces,
    eval_start: EvalStartOpt = None,
    eval_end: EvalEndOpt = None,
    boot_delay_s: Annotated[float | None, typer.Option(
        "--boot-delay-s", min=0, help="Seconds from power-on to ready (simulate's --boot-delay unit) "
                                      "[default: 300].")] = None,
    idle_timeout_s: Annotated[float | None, typer.Option(
        "--idle-timeout-s", min=0, help="Vanilla: seconds idle before power-off (simulate's --idle-timeout "
                                        "unit) [default: 1800].")] = None,
    boot_delay: Annotated[float | None, typer.Option(
        "--boot-delay", min=0, help="Deprecated: minutes from power-on to ready; use --boot-delay-s.")] = None,
    idle_timeout: Annotated[float | None, typer.Option(
        "--idle-timeout", min=0, help="Deprecated: vanilla minutes idle; use --idle-timeout-s.")] = None,
    idle_power_w: Annotated[float, typer.Option("--idle-power-w", min=0,
                                                help="Idle power per node (W); DGX-1 ~800 W.")] = 800.0,
    cooling_factor: Annotated[float, typer.Option(
        "--cooling-factor", min=1, help="Facility energy per server energy (PUE-like).")] = 3.0,
    price: Annotated[float, typer.Option("--price", min=0, help="Electricity price per kWh.")] = 0.10,
    buffer: Annotated[int, typer.Option("--buffer", min=0, help="sigma: spare powered-on nodes.")] = 20,
    keep: Annotated[int, typer.Option("--keep", min=0,
                                      help="Checks without power-off after a wake-up.")] = 10,
    history: Annotated[int, typer.Option("--history", min=1, help="Past checks in the recent trend.")] = 2,
    future: Annotated[int, typer.Option("--future", min=1, help="Future steps in the predicted trend.")] = 30,
    xi_h: Annotated[float, typer.Option("--xi-h", help="Recent-trend threshold.")] = 0.1,
    xi_p: Annotated[float, typer.Option("--xi-p", help="Predicted-trend threshold.")] = 0.0,
    holidays: HolidayOpt = Calendar.us,
    gpus_per_node: GpusOpt = 8,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Replay an occupancy series through CES or vanilla DRS; write summary.json and series.csv."""
    from dlsched.cli.checks import check_out_dir
    from dlsched.energy.accounting import EnergyModel
    from dlsched.energy.controller import CESParams
    from dlsched.experiments.helios.energy import ReplayConfig, replay_experiment

    try:
        check_out_dir(out)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    boot_s = _seconds("--boot-delay-s", boot_delay_s, "--boot-delay", boot_delay, 300.0, MAX_BOOT_DELAY_S)
    idle_s = _seconds("--idle-timeout-s", idle_timeout_s, "--idle-timeout", idle_timeout, 1800.0, MAX_IDLE_S)
    _check_finite({"--idle-power-w": idle_power_w, "--cooling-factor": cooling_factor, "--price": price,
                   "--xi-h": xi_h, "--xi-p": xi_p})
    series, window = _load(series_path, gpus_per_node, eval_start, eval_end)
    config = ReplayConfig(
        policy=policy.value,
        ces=CESParams(history=history, future=future, xi_h=xi_h, xi_p=xi_p, buffer=buffer, keep=keep,
                      boot_delay=boot_s),
        idle_timeout_s=idle_s,
        energy=EnergyModel(idle_power_w=idle_power_w, cooling_factor=cooling_factor, price_per_kwh=price),
        forecaster={"holidays": holidays.value, "seed": seed},
    )
    try:
        with progress.Activity(f"energy replay ({policy.value})", progress.enabled()):
            outcome = replay_experiment(series, window, config)
    except ValueError as exc:
        raise _fail(f"{series_path}: {exc}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(outcome.summary, indent=2, default=_jsonable) + "\n")
        outcome.frame.to_csv(out / "series.csv", index=False, float_format="%.3f")
    except OSError as exc:
        raise _fail(f"cannot write to {out}: {exc.strerror or exc}") from None
    if as_json:
        _out.print_json(json.dumps(outcome.summary, default=_jsonable))
        return
    _print_replay(outcome.summary, out)


def _print_replay(s: dict[str, Any], out: Path) -> None:
    table = Table(title=f"{s['policy']} on {Path(s['source']).name}, {s['eval_start'][:10]} .. "
                        f"{s['eval_end_exclusive'][:10]} (exclusive), {s['total_nodes']} nodes")
    table.add_column("figure")
    table.add_column("value", justify="right")
    e = s["energy"]
    rows = [
        ("average powered-off nodes", f"{s['avg_powered_off_nodes']:.1f}"),
        ("wake-ups per day", f"{s['daily_wakeups']:.2f}  ({s['wakeups']} in {s['days']:.1f} days)"),
        ("nodes per wake-up", f"{s['nodes_per_wakeup']:.1f}"),
        ("node utilisation before -> after", f"{s['node_util_before']:.1%} -> {s['node_util_after']:.1%}"),
        ("demand waiting for boot (node-min)", f"{s['waiting_node_minutes']:.0f}"),
        ("forecast SMAPE / RMSE", f"{s['smape']:.2f} % / {s['rmse']:.1f} nodes"),
        ("energy saved (window)", (f"{e['energy_saved_kwh']:,.0f} kWh = "
                                   f"{e['cost_saved']:,.0f} {e['currency']}")),
        ("energy saved (per year)", (f"{e['energy_saved_kwh_per_year']:,.0f} kWh = "
                                     f"{e['cost_saved_per_year']:,.0f} {e['currency']}")),
    ]
    for name, value in rows:
        table.add_row(name, value)
    _out.print(table)
    _out.print(f"wrote {out / 'summary.json'} and {out / 'series.csv'} in {s['seconds']['total']:.1f} s")


def forecast_cmd(
    series_path: SeriesOpt,
    eval_start: EvalStartOpt = None,
    eval_end: EvalEndOpt = None,
    holidays: HolidayOpt = Calendar.us,
    gpus_per_node: GpusOpt = 8,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Train the node-demand forecaster and score it (SMAPE, RMSE) beside seasonal-naive baselines."""
    from dlsched.experiments.helios.energy import forecast_experiment

    series, window = _load(series_path, gpus_per_node, eval_start, eval_end)
    try:
        with progress.Activity("forecast: fitting and scoring", progress.enabled()):
            result = forecast_experiment(series, window, {"holidays": holidays.value, "seed": seed})
    except ValueError as exc:
        raise _fail(f"{series_path}: {exc}") from None
    if as_json:
        _out.print_json(json.dumps(result, default=_jsonable))
        return
    table = Table(title=f"Node-demand forecast, 10-min bins, {Path(series_path).name}")
    for col in ("window", "model", "SMAPE %", "RMSE (nodes)"):
        table.add_column(col, justify="left" if col in ("window", "model") else "right")
    for name, start, end in (("validation", window.validation_start, window.start),
                             ("evaluation", window.start, window.end)):
        scores = result[name]
        label = f"{name} {start:%Y-%m-%d}..{end:%Y-%m-%d}"
        for model in ("lightgbm", "seasonal_naive_day", "seasonal_naive_week"):
            sc = scores.get(model, {"smape": float("nan"), "rmse": float("nan")})
            table.add_row(label, model, f"{sc['smape']:.2f}", f"{sc['rmse']:.1f}")
            label = ""
    _out.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``energy`` group (``replay``) and the top-level ``forecast`` command."""
    energy = typer.Typer(help="Cluster Energy Saving: replay node occupancy through CES / vanilla DRS.",
                         no_args_is_help=True)
    energy.command("replay")(replay_cmd)
    app.add_typer(energy, name="energy")
    app.command("forecast")(forecast_cmd)
