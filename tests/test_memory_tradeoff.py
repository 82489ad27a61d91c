"""The lift rules of ``scripts/memory_tradeoff.py`` (issue 36): each keeps the share of rows it
was set on, never predicts below the physical floor, and the decomposition's ``need`` is the lift
that predicts a row exactly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from dlsched.predictors.resources.train_memory import TrainingMemoryModel, _peak, physical_floor

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
spec = importlib.util.spec_from_file_location("memory_tradeoff", REPO / "scripts" / "memory_tradeoff.py")
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)


def synthetic(n: int = 400, seed: int = 0):
    """Rows whose activations cost 1.3x the saved bytes with a heavy tail at small batches."""
    rng = np.random.default_rng(seed)
    batch = 2.0 ** rng.integers(3, 9, n)
    saved = batch * rng.uniform(5, 60, n)
    X = np.c_[rng.uniform(100, 4000, n), saved, 0.3 * saved, saved / 20, np.zeros(n)]
    tail = np.where(batch <= 16, rng.lognormal(0.0, 0.5, n), rng.lognormal(0.0, 0.1, n))
    y = 900.0 + X[:, 0] + 1.3 * (X[:, 1] + X[:, 2]) * tail + 0.5 * X[:, 3]
    F = np.c_[np.log2(batch), np.zeros(n), np.log1p(saved / batch)]
    return X, y, F


@pytest.mark.parametrize("rule", ["margin", "batch"])
@pytest.mark.parametrize("share", [0.02, 0.05])
def test_two_parameter_rule_keeps_its_share_and_the_floor(rule: str, share: float) -> None:
    X, y, F = synthetic()
    coef = TrainingMemoryModel._solve(X, y, np.ones(len(y)))
    parts = [(coef, np.arange(len(y)) % 5 == k) for k in range(5)]
    pred = mt.two_parameter(coef, parts, X, y, F, X, F, share, rule)
    assert np.mean(pred < y) <= share + 1e-12
    assert np.all(pred >= physical_floor(X, float(coef[0])) - 1e-9)
    # a share of 0 under would need more: the rule did not simply over-reserve everything
    assert np.mean(pred < y) > 0 or share == 0


def test_batch_curve_lifts_small_batches_more() -> None:
    X, y, F = synthetic()
    coef = TrainingMemoryModel._solve(X, y, np.ones(len(y)))
    parts = [(coef, np.arange(len(y)) % 5 == k) for k in range(5)]
    pred = mt.two_parameter(coef, parts, X, y, F, X, F, 0.02, "batch")
    est = _peak(coef, X, 1.0) - _peak(coef, X, 0.0)
    lift = (pred - _peak(coef, X, 0.0)) / est
    small, large = F[:, 0] <= 4, F[:, 0] >= 7
    assert np.median(lift[small]) > np.median(lift[large])


def test_conformal_lift_never_below_the_unlifted_prediction_or_floor() -> None:
    X, y, F = synthetic()
    coef = TrainingMemoryModel._solve(X, y, np.ones(len(y)))
    parts = [(coef, np.arange(len(y)) % 5 == k) for k in range(5)]
    pred = mt.conformal_lift(coef, parts, X, y, F, X, F, 0.02, 0.5)
    assert np.all(pred >= _peak(coef, X, 1.0) - 1e-9)
    assert np.all(pred >= physical_floor(X, float(coef[0])) - 1e-9)
    assert np.mean(pred < y) <= 0.05   # calibrated on held-out inner folds: near the 2 % asked


def test_need_is_the_lift_that_predicts_a_row_exactly() -> None:
    X, y, _ = synthetic(50)
    coef = TrainingMemoryModel._solve(X, y, np.ones(len(y)))
    need = mt._need(coef, X, y)
    ok = need > 0
    # _peak takes max(loss, s * tmp); with no loss term it is linear in s, so need is exact
    np.testing.assert_allclose(_peak(coef, X[ok], need[ok]), y[ok], rtol=1e-9)


@pytest.mark.parametrize("share", [0.02, 0.05])
def test_one_lift_rule_is_the_shipped_fit(share: float) -> None:
    """The table's "one lift, <= x %" rows are what ``TrainingMemoryModel(under_share=x)`` (and so
    ``dlsched predictor evaluate`` with that ``UNDER_SHARE``) predicts: the doc quotes both."""
    X, y, _ = synthetic()
    w = np.ones(len(y))
    groups = np.array([f"fam{i % 23}" for i in range(len(y))])
    m = TrainingMemoryModel(under_share=share).fit(X, y, w, groups=groups)
    lab = np.array(["all"] * len(y))
    pred = mt.fit_predict(X, y, w, groups, lab, X, lab, share, None)
    np.testing.assert_allclose(pred, m.predict(X), rtol=1e-12)
