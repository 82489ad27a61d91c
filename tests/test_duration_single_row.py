"""The online estimator's per-job GBDT prediction goes through LightGBM's single-row entry point
(``GBDTDurationModel.predict_one``): it must give ``predict``'s number bit for bit, survive copies
and refits, and the estimator's refit window must bound what a refit trains on."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from dlsched.core.job import Job
from dlsched.predictors.duration.gbdt import GBDTDurationModel, SingleRow
from dlsched.predictors.duration.online import TRAIN_WINDOW, OnlineDurationEstimator


def _data(rng: np.random.Generator, n: int) -> np.ndarray:
    X = rng.normal(size=(n, 9))
    X[:, 0] = rng.integers(-1, 40, n)  # categorical codes, -1 = unknown, some never seen in training
    X[:, 1] = rng.integers(-1, 7, n)
    X[:, 2] = rng.integers(-1, 60, n)
    X[rng.random(n) < 0.2, 5] = np.nan
    return X


def test_predict_one_is_predict_bit_for_bit():
    rng = np.random.default_rng(3)
    X = _data(rng, 2000)
    X[:, 0] = np.minimum(X[:, 0], 29)
    model = GBDTDurationModel(n_estimators=40).fit(X, np.exp(rng.normal(5, 2, len(X))))
    rows = _data(rng, 600)
    one = [model.predict_one(list(r)) for r in rows]
    assert one == [float(model.predict(np.array(list(r)))[0]) for r in rows]
    assert one == [float(p) for p in model.predict(rows)]  # and the batch's
    assert isinstance(model.__dict__["_single"], SingleRow)  # the fast path was taken, not the fallback
    assert len(set(one)) > 50  # a real model: the rows get different answers


def test_copies_and_refits_do_not_reuse_a_stale_fast_path():
    rng = np.random.default_rng(4)
    X = _data(rng, 800)
    model = GBDTDurationModel(n_estimators=20).fit(X, np.exp(rng.normal(4, 1, len(X))))
    row = list(X[0])
    first = model.predict_one(row)
    twin = pickle.loads(pickle.dumps(model))
    assert "_single" not in twin.__dict__ and twin.predict_one(row) == first
    assert copy.deepcopy(model).predict_one(row) == first
    model.fit(X, np.exp(rng.normal(8, 1, len(X))))  # refitted in place: new trees, new answer
    assert model.predict_one(row) == float(model.predict(np.array(row))[0]) != first


def test_the_refit_window_bounds_the_training_set():
    assert OnlineDurationEstimator().max_train_jobs == TRAIN_WINDOW == 100_000
    est = OnlineDurationEstimator(refit_every=100.0, min_train_jobs=20, max_train_jobs=50, n_estimators=5)
    jobs = [Job(f"j{i}", "v", 1 + i % 4, float(i), 10.0 + i) for i in range(120)]
    for i, job in enumerate(jobs):
        est.observe_finished(job, 200.0 + i, duration=10.0 + i)
    est.estimate(Job("new", "v", 2, 400.0, 5.0), 400.0)  # a refit is due at t=400
    assert est.n_observed == 120 and est.model_.n_train_ == 50
