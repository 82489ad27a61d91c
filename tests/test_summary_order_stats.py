"""The summary's own median and percentiles give numpy's floats exactly (they exist only to keep
``numpy.ma`` out of a command's start; see ``dlsched.metrics.summary``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dlsched.metrics.summary import _median, _percentiles


def _samples(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        n = int(rng.integers(1, 300)) if trial % 2 else int(rng.integers(1, 5))
        kind = trial % 4
        if kind == 0:
            yield rng.random(n) * 10.0 ** rng.integers(-3, 9)
        elif kind == 1:
            yield rng.integers(0, 50, n).astype(float)  # many ties
        else:
            v = np.round(rng.exponential(1000, n), 1)
            yield -v if kind == 3 else v


@pytest.mark.parametrize("percents", [(95, 99), (50,), (0, 100), (12.5, 33.3, 87.1)])
def test_percentiles_are_numpys_floats(percents) -> None:
    for values in _samples(1, 3000):
        assert _percentiles(values.copy(), percents) == np.percentile(values, percents).tolist()


def test_median_is_numpys_float_and_nan_goes_to_numpy() -> None:
    for values in _samples(2, 3000):
        assert _median(values.copy()) == float(np.median(values))
    with_nan = np.array([1.0, np.nan, 3.0])
    assert np.isnan(_median(with_nan)) and np.isnan(_percentiles(with_nan, (95, 99))).all()


def test_summarizing_does_not_import_numpy_ma() -> None:
    code = ("import sys, numpy as np; from dlsched.metrics.summary import _stats; "
            "v = np.arange(10.0); _stats({'jct': v, 'queue_delay': v}); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
