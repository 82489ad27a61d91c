"""The shipped utilisation predictor against the shipped profile table's utilisation (issue 36
point 6): P100 within RMSLE 0.5, and the rows that dominate the error are the ones the docs name."""

from __future__ import annotations

import math

import pytest

from dlsched.experiments.sharing.util_check import check


def test_p100_rows_within_rmsle_half():
    c = check("P100", worst=26)
    assert (c.rows, c.types) == (26, 26)
    assert c.rmsle <= 0.5 and c.mae < 25
    # the RMSLE is what the rows say (log1p errors), and the worst row is the RL job the docs name
    again = math.sqrt(sum((math.log1p(p) - math.log1p(m)) ** 2 for _, m, p in c.worst) / len(c.worst))
    assert again == pytest.approx(c.rmsle, rel=1e-12)
    assert c.worst[0][0] == "a3c_pong-bs1" and c.worst[0][1] > 90 and c.worst[0][2] < 20
    assert sum(t.startswith("recommendation_vae") for t, _, _ in c.worst[:5]) == 4


def test_every_gpu_type_of_the_table_is_checked():
    for gpu in ("K80", "V100"):
        c = check(gpu)
        assert c.rows == 26 and c.rmsle < 0.5
