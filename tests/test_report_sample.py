"""Downsampling keeps what the plots promise: CDF extremes and the time-weighted mean of a step series."""

from __future__ import annotations

import numpy as np

from dlsched.report.fmt import cell, human_duration, time_unit
from dlsched.report.sample import cdf_points, reduce_steps, step_means


def test_cdf_points_are_bounded_and_keep_extremes():
    values = np.random.default_rng(0).lognormal(6, 2, 100_000)
    x, y = cdf_points(values, max_points=500)
    assert len(x) <= 500 and x[0] == values.min() and x[-1] == values.max()
    assert y[-1] == 1.0 and np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0)
    x, y = cdf_points(np.array([3.0, 1.0, 2.0]))
    assert list(x) == [1.0, 2.0, 3.0] and list(y) == [1 / 3, 2 / 3, 1.0]


def test_step_means_preserve_the_time_weighted_average():
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 1000, 50_000))
    v = rng.integers(0, 100, t.size).astype(float)
    exact = (np.sum(v[:-1] * np.diff(t)) + v[-1] * (1000 - t[-1])) / (1000 - t[0])
    x, m = step_means(t, v, t[0], 1000.0, bins=1000)
    assert len(x) == 1000 and abs(m.mean() - exact) < 1e-6 * exact


def test_reduce_steps_keeps_small_series_raw():
    x, y, raw = reduce_steps(np.array([0.0, 1.0, np.nan]), np.array([1.0, 2.0, 3.0]), 0, 1)
    assert raw and list(x) == [0.0, 1.0] and list(y) == [1.0, 2.0]


def test_formatting():
    assert cell("avg_jct", 1234.5).startswith("1234.5") and "20.6 min" in cell("avg_jct", 1234.5)
    assert cell("ratio_avg_jct", 0.5) == "0.500×" and cell("gpu_utilization", 0.5) == "50.0%"
    assert cell("jobs", 7) == "7" and "—" in cell("avg_jct", float("nan")) and cell("x", "<b>") == "&lt;b&gt;"
    assert human_duration(7200) == "2.0 h" and time_unit(3 * 86400) == (86400.0, "days")
