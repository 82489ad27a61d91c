"""SMAPE / RMSE on arrays whose values are worked out by hand, and the energy arithmetic."""

from __future__ import annotations

import math

import pytest

from dlsched.energy.accounting import EnergyModel
from dlsched.energy.metrics import rmse, smape


def test_smape_known_values() -> None:
    # |110-100| * 2 / 210 = 0.0952381; |90-100| * 2 / 190 = 0.1052632 -> mean 0.1002506
    assert smape([100, 100], [110, 90]) == pytest.approx(10.02506, abs=1e-4)
    assert smape([5, 0], [5, 0]) == 0.0  # 0/0 counts as a perfect forecast
    assert smape([1], [0]) == pytest.approx(200.0)


def test_rmse_known_values() -> None:
    assert rmse([1, 2, 3, 4], [1, 2, 3, 8]) == pytest.approx(2.0)
    assert rmse([10], [10]) == 0.0


@pytest.mark.parametrize("fn", [smape, rmse])
def test_metrics_reject_mismatched_or_empty(fn) -> None:
    with pytest.raises(ValueError):
        fn([1, 2], [1])
    with pytest.raises(ValueError):
        fn([], [])


def test_energy_model_matches_paper_estimate() -> None:
    # Helios §4.3.3: 79.5 DRS nodes (Table 5, four clusters) x 800 W x 3 (cooling) -> "over 1.65 M kWh/yr"
    model = EnergyModel()
    assert model.annual_kwh(5.0 + 20.5 + 20.0 + 34.0) == pytest.approx(1_671_408, rel=1e-6)
    saved = EnergyModel(idle_power_w=1000, cooling_factor=2, price_per_kwh=0.5).savings(24.0, days=1.0)
    assert saved["energy_saved_kwh"] == pytest.approx(48.0)
    assert saved["cost_saved"] == pytest.approx(24.0)
    assert saved["energy_saved_kwh_per_year"] == pytest.approx(48.0 * 365)
    with pytest.raises(ValueError):
        EnergyModel(cooling_factor=0.5)
    assert math.isclose(EnergyModel().savings(0.0, 0.0)["energy_saved_kwh_per_year"], 0.0)
