"""End-to-end CES experiments on an occupancy series: the single code path of CLI, tests, benchmark.

``replay_experiment``: fit the forecaster on everything before the evaluation window, forecast
the window (each value from data at least ``horizon`` steps older), replay the window through the
chosen controller and report Table 5 figures, forecast errors and energy saved.
``forecast_experiment``: forecast errors of LightGBM beside seasonal-naive baselines, on the
validation window (model fitted before it) and on the evaluation window (fitted before that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dlsched.energy.accounting import EnergyModel
from dlsched.energy.actions import PowerController
from dlsched.energy.controller import CESController, CESParams
from dlsched.energy.forecaster import NodeDemandForecaster, SeasonalNaiveForecaster
from dlsched.energy.metrics import rmse, smape
from dlsched.energy.replay import SeriesForecast, replay
from dlsched.energy.series import NodeSeries
from dlsched.energy.vanilla import VanillaDRSController

DEFAULT_EVAL_DAYS = 14
DEFAULT_VALIDATION_DAYS = 30


@dataclass(frozen=True, slots=True)
class Window:
    """Evaluation window ``[start, end)`` and the validation window just before it."""

    start: pd.Timestamp
    end: pd.Timestamp
    validation_days: int = DEFAULT_VALIDATION_DAYS

    @property
    def validation_start(self) -> pd.Timestamp:
        return self.start - pd.Timedelta(days=self.validation_days)

    def as_dict(self) -> dict[str, str]:
        return {"eval_start": str(self.start), "eval_end_exclusive": str(self.end),
                "validation_start": str(self.validation_start)}


def _bound(text: str, what: str) -> pd.Timestamp:
    try:
        return pd.Timestamp(text)
    except (ValueError, TypeError):
        raise ValueError(f"{what}: cannot parse {text!r} as a date or time") from None


def resolve_window(series: NodeSeries, eval_start: str | None = None, eval_end: str | None = None,
                   days: int = DEFAULT_EVAL_DAYS) -> Window:
    """Window from CLI-style bounds. ``eval_end`` is the last day included when it is a bare date
    (the paper's "1st to 14th December"); defaults: the last ``days`` complete days of the series."""
    last = series.active.index[-1]
    end = _bound(eval_end, "--eval-end") if eval_end else (last + series.step).normalize()
    if eval_end and end == end.normalize():
        end += pd.Timedelta(days=1)
    start = _bound(eval_start, "--eval-start") if eval_start else end - pd.Timedelta(days=days)
    if start >= end:
        raise ValueError(f"evaluation window is empty: {start} .. {end}")
    first = series.active.index[0]
    if start <= first or end > last + series.step:
        raise ValueError(f"evaluation window {start} .. {end} must lie inside the series "
                         f"({first} .. {last}) with data before it for training")
    return Window(start, end)


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """Everything a replay needs besides the series."""

    policy: str = "ces"
    ces: CESParams = field(default_factory=CESParams)
    idle_timeout_s: float = 1800.0
    energy: EnergyModel = field(default_factory=EnergyModel)
    forecaster: dict[str, Any] = field(default_factory=dict)


def _ces(total: int, forecast: SeriesForecast, cfg: ReplayConfig) -> PowerController:
    return CESController(total, forecast, cfg.ces)


def _vanilla(total: int, forecast: SeriesForecast, cfg: ReplayConfig) -> PowerController:
    return VanillaDRSController(total, cfg.idle_timeout_s, cfg.ces.boot_delay)


POLICIES: dict[str, Callable[[int, SeriesForecast, ReplayConfig], PowerController]] = {
    "ces": _ces, "vanilla": _vanilla,
}


def _errors(actual: pd.Series, predicted: pd.Series) -> dict[str, float]:
    both = pd.concat([actual, predicted.reindex(actual.index)], axis=1).dropna()
    if both.empty:
        raise ValueError("no observed bins in the evaluation window")
    return {"smape": smape(both.iloc[:, 0], both.iloc[:, 1]), "rmse": rmse(both.iloc[:, 0], both.iloc[:, 1])}


def _filled(s: pd.Series) -> tuple[pd.Series, int]:
    gaps = int(s.isna().sum())
    return s.ffill().bfill(), gaps


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    summary: dict[str, Any]
    frame: pd.DataFrame  # time, active, predicted, powered_on, total


def replay_experiment(series: NodeSeries, window: Window,
                      config: ReplayConfig | None = None) -> ReplayOutcome:
    """Train on the past, forecast and replay the evaluation window with the chosen policy."""
    cfg = config or ReplayConfig()
    if cfg.policy not in POLICIES:
        raise ValueError(f"unknown policy {cfg.policy!r} (choose from {', '.join(POLICIES)})")
    t0 = time.perf_counter()
    model = NodeDemandForecaster(**cfg.forecaster).fit(series.window(None, window.start).active)
    t_fit = time.perf_counter() - t0
    predicted = model.predict(series.window(None, window.end).active)
    ev = series.window(window.start, window.end)
    active, gaps = _filled(ev.active)
    total, _ = _filled(ev.total)
    total_nodes = int(total.max())
    controller = POLICIES[cfg.policy](total_nodes, SeriesForecast(predicted, model.horizon_), cfg)
    result = replay(controller, active, total, cfg.ces.boot_delay)
    summary: dict[str, Any] = {
        "policy": cfg.policy, "source": series.source, **window.as_dict(), "total_nodes": total_nodes,
        "filled_gap_bins": gaps, **result.summary(), **_errors(ev.active, predicted),
        "train_bins": model.n_train_, "train_end": str(model.train_end_),
        "forecast_horizon_steps": model.horizon_,
    }
    summary["energy"] = cfg.energy.savings(summary["powered_off_node_hours"], result.days)
    summary["ces_params"] = asdict(cfg.ces)
    if cfg.policy == "vanilla":
        summary["idle_timeout_s"] = cfg.idle_timeout_s
    summary["seconds"] = {"fit": t_fit, "total": time.perf_counter() - t0}
    frame = pd.DataFrame({"time": result.time, "active": result.active,
                          "predicted": predicted.reindex(result.time).to_numpy(),
                          "powered_on": result.powered_on, "total": result.total})
    return ReplayOutcome(summary, frame)


def forecast_experiment(series: NodeSeries, window: Window,
                        forecaster: dict[str, Any] | None = None) -> dict[str, Any]:
    """SMAPE/RMSE of LightGBM and seasonal-naive (day, week) on the validation and evaluation windows."""
    params = forecaster or {}
    out: dict[str, Any] = {"source": series.source, **window.as_dict()}
    for name, start, end in (("validation", window.validation_start, window.start),
                             ("evaluation", window.start, window.end)):
        past = series.window(None, start).active
        context = series.window(None, end).active
        actual = series.window(start, end).active
        if past.notna().sum() == 0 or actual.notna().sum() == 0:
            out[name] = {"error": "no data in this window"}
            continue
        day = int(pd.Timedelta(days=1) / series.step)
        models = {"lightgbm": NodeDemandForecaster(**params),
                  "seasonal_naive_day": SeasonalNaiveForecaster(day),
                  "seasonal_naive_week": SeasonalNaiveForecaster(7 * day)}
        scores: dict[str, Any] = {"bins": int(actual.notna().sum()), "train_bins": int(past.notna().sum())}
        for key, model in models.items():
            try:
                scores[key] = _errors(actual, model.fit(past).predict(context))
            except ValueError as exc:
                scores[key] = {"error": str(exc), "smape": np.nan, "rmse": np.nan}
        out[name] = scores
    return out
