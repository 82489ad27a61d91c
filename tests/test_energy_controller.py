"""CES (Algorithm 2) and vanilla DRS controllers on small hand-made demand, action by action."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pytest

from dlsched.energy.actions import PowerOff, PowerOn
from dlsched.energy.controller import CESController, CESParams
from dlsched.energy.replay import replay
from dlsched.energy.vanilla import VanillaDRSController

P = 600.0  # one control period (10 min)


class ListForecast:
    """Forecast source returning whatever the test set for the current time."""

    def __init__(self, default: Sequence[float] = (0.0, 0.0)) -> None:
        self.by_time: dict[float, Sequence[float]] = {}
        self.default = default

    def forecast(self, time: float) -> Sequence[float]:
        return self.by_time.get(time, self.default)


def small() -> tuple[CESController, ListForecast]:
    fc = ListForecast()
    params = CESParams(history=2, future=3, buffer=2, keep=1, period=P, boot_delay=300.0)
    return CESController(total_nodes=10, forecast=fc, params=params), fc


def test_ces_wakeups_and_power_off_exact() -> None:
    ctl, fc = small()
    assert ctl.start(0, 2) == [PowerOff(0, 6)]  # keep running + buffer = 4
    assert ctl.observe(0, 2) == []            # no history yet
    assert ctl.observe(P, 2) == []            # one sample of history only
    assert ctl.observe(2 * P, 5) == [PowerOn(2 * P, 3, 2 * P + 300.0)]  # 5 - 4 + buffer
    assert ctl.observe(3 * P, 5) == []        # keep: one check without power-off
    assert ctl.observe(4 * P, 9) == [PowerOn(4 * P, 3, 4 * P + 300.0)]  # capped: only 3 nodes were off
    assert ctl.powered_on == 10
    assert ctl.observe(5 * P, 3) == []        # keep again
    fc.by_time[6 * P] = [3, 2, 2, 2]          # falling forecast
    assert ctl.observe(6 * P, 3) == [PowerOff(6 * P, 5)]  # down to 3 + buffer
    assert (ctl.stats.wakeups, ctl.stats.woken_nodes) == (2, 6)


@pytest.mark.parametrize("forecast, past", [
    ([3, 4, 4, 4], (9, 3)),   # prediction rising: no power-off
    ([3, 3, 3, 4], (9, 3)),   # predicted trend negative (3 - 3.33 < 0)
    ([3, 2, 2, 2], (3, 3)),   # recent trend flat (mean 3 - 3 < 0.1)
])
def test_ces_power_off_needs_both_trends_and_no_rise(forecast, past) -> None:
    ctl, fc = small()
    ctl.start(0, 8)
    ctl.observe(0, past[0])
    ctl.observe(P, past[1])
    fc.by_time[2 * P] = forecast
    assert ctl.observe(2 * P, 3) == []


def test_ces_checks_only_once_per_period() -> None:
    ctl, fc = small()
    fc.default = [3, 2, 2, 2]
    ctl.start(0, 8)
    ctl.observe(0, 9)
    ctl.observe(P, 8)
    assert ctl.observe(P + 60, 3) == []                # between checks: demand recorded only
    assert ctl.observe(2 * P, 3) == [PowerOff(2 * P, 5)]


def test_ces_job_arrival() -> None:
    ctl, _ = small()
    ctl.start(0, 2)                                  # 4 on, 2 free
    assert ctl.job_arrival(10, 2) == []
    assert ctl.job_arrival(10, 5) == [PowerOn(10, 5, 310.0)]  # R - C_A + sigma = 5 - 2 + 2
    assert ctl.job_arrival(20, 3, available_nodes=0) == [PowerOn(20, 1, 320.0)]  # capped at total
    assert ctl.powered_on == 10 and ctl.stats.wakeups == 2


def test_ces_params_validated() -> None:
    with pytest.raises(ValueError):
        CESParams(history=0)
    with pytest.raises(RuntimeError):
        CESController(5, ListForecast()).observe(0, 1)


def test_vanilla_idle_timeout_and_exact_wakeups() -> None:
    ctl = VanillaDRSController(total_nodes=10, idle_timeout=2 * P, boot_delay=300.0)
    assert ctl.start(0, 4) == []
    assert ctl.observe(P, 4) == []
    assert ctl.observe(2 * P, 4) == [PowerOff(2 * P, 6)]
    assert ctl.observe(3 * P, 7) == [PowerOn(3 * P, 3, 3 * P + 300.0)]  # exactly the shortfall
    assert ctl.observe(4 * P, 5) == []                              # 2 idle from now
    assert ctl.observe(5 * P, 6) == []                              # one reused (most recent)
    assert ctl.observe(6 * P, 6) == [PowerOff(6 * P, 1)]
    assert ctl.job_arrival(6 * P + 1, 3) == [PowerOn(6 * P + 1, 3, 6 * P + 301.0)]
    assert (ctl.stats.wakeups, ctl.stats.woken_nodes) == (2, 6)


def test_replay_counts_and_utilisation() -> None:
    idx = pd.date_range("2020-01-01", periods=4, freq="10min")
    active = pd.Series([2.0, 2.0, 5.0, 5.0], index=idx)
    total = pd.Series(10.0, index=idx)
    ctl, _ = small()
    res = replay(ctl, active, total, boot_delay_s=300.0)
    s = res.summary()
    assert list(res.powered_on) == [4, 4, 7, 7]
    assert s["wakeups"] == 1 and s["nodes_per_wakeup"] == 3
    assert s["daily_wakeups"] == pytest.approx(1 / (40 / 1440))
    assert s["avg_powered_off_nodes"] == pytest.approx((6 + 6 + 3 + 3) / 4)
    assert s["node_util_before"] == pytest.approx(0.35)
    assert s["node_util_after"] == pytest.approx((0.5 + 0.5 + 5 / 7 + 5 / 7) / 4)
    assert s["waiting_node_minutes"] == pytest.approx(1 * 5.0)  # one node short for the 5-min boot
