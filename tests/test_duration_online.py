"""Online estimator: no future leakage, refit schedule, caching, λ blend."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest
from test_duration_toy import toy_trace

from dlsched.core.job import Job, JobState, OracleAccessError
from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import set_duration
from dlsched.predictors.duration.accuracy import replay
from dlsched.predictors.duration.combined import CombinedDurationEstimator, merge
from dlsched.predictors.duration.gbdt import GBDTParams
from dlsched.predictors.duration.online import OnlineDurationEstimator

SMALL = {"n_estimators": 10, "min_train_jobs": 50}


def _estimates_until(jobs: list[Job], cutoff: float, **kw) -> dict[str, tuple[float, float, float]]:
    est = OnlineDurationEstimator(refit_every=43200, origin=None, **{**SMALL, **kw})
    res = replay(jobs, est, list(map(true_duration, jobs)))
    return {j.job_id: (res["rolling"][i], res["gbdt"][i], res["combined"][i])
            for i, j in enumerate(jobs) if j.submit_time <= cutoff}


def test_no_future_leakage() -> None:
    """Estimates made up to time T must not change when jobs that end after T change."""
    jobs = toy_trace(600, days=3, seed=1).jobs
    cutoff = 1.5 * 86400
    before = _estimates_until(jobs, cutoff)
    changed = 0
    for i, j in enumerate(jobs):
        if j.submit_time + true_duration(j) > cutoff:       # not finished at T: the future
            set_duration(j, true_duration(j) * 7 + 13)       # ends even later
            j.reset()
            changed += 1
        if j.submit_time > cutoff:                           # not even submitted at T
            j.name = f"renamed_{i}"
            j.user = f"other{i % 3}"
    after = _estimates_until(jobs, cutoff)
    assert changed > 100
    assert after == before
    # the test is sensitive: estimates after T do change
    full_before = _estimates_until(toy_trace(600, days=3, seed=1).jobs, math.inf)
    full_after = _estimates_until(jobs, math.inf)
    assert sum(full_before[k] != full_after[k] for k in full_after) > 100


def test_refuses_to_observe_unfinished_jobs_or_go_back_in_time() -> None:
    est = OnlineDurationEstimator(**SMALL)
    j = Job("a", "vc", 1, 100.0, 50.0, user="u", name="n")
    with pytest.raises(OracleAccessError, match="has not finished"):  # it revealed nothing yet
        est.observe_finished(j, 150.0)
    with pytest.raises(ValueError, match="leak the future"):  # history: the recorded 50 s end at 150
        est.observe_finished(j, 149.0, 50.0)
    est.observe_finished(j, 150.0, 50.0)
    with pytest.raises(ValueError, match="backwards"):
        est.estimate(Job("b", "vc", 1, 10.0, 5.0), 100.0)
    # a simulated job that queued ends at end_time, which is what counts
    k = Job("k", "vc", 1, 100.0, 50.0)
    k.end_time = 400.0
    with pytest.raises(ValueError):
        est.observe_finished(k, 399.0, 50.0)
    k.state = JobState.FINISHED  # its finish reveals the run time: no duration handed over
    with pytest.raises(ValueError):
        est.observe_finished(k, 399.0)
    est.observe_finished(k, 400.0)


def test_refits_on_schedule_and_uses_rolling_before_first_fit() -> None:
    jobs = toy_trace(400, days=4, seed=2).jobs
    est = OnlineDurationEstimator(refit_every=86400, **SMALL)
    res = replay(jobs, est, list(map(true_duration, jobs)))
    first_day = np.array([j.submit_time < 86400 for j in jobs])
    assert not res["fitted"][first_day].any() and res["fitted"][~first_day].all()
    np.testing.assert_array_equal(res["combined"][first_day], res["rolling"][first_day])
    assert est.n_refits == 4            # at days 1, 2, 3 and the first call on/after day 4
    assert est.n_observed == len(jobs)


def test_gbdt_predictions_cached_and_pending_batch_predicted(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = toy_trace(300, days=2, seed=3).jobs
    est = OnlineDurationEstimator(refit_every=86400, **SMALL)
    first = [j for j in jobs if j.submit_time + true_duration(j) < 80000]
    for j in sorted(first, key=lambda j: j.submit_time + true_duration(j)):
        est.observe_finished(j, j.submit_time + true_duration(j), true_duration(j))
    waiting = Job("w", "vc0", 2, 80000.0, 10.0, user="u01", name="resnet_run1")
    est.estimate(waiting, 80000.0)                                   # before the first fit
    assert est.model_ is None
    est.estimate(Job("x", "vc0", 1, 86400.0, 1.0), 86400.0)          # triggers the refit
    assert est.model_ is not None and waiting in est._cache          # pending: batch-predicted
    calls = []
    real, real_one = est.model_.predict, est.model_.predict_one
    monkeypatch.setattr(est.model_, "predict", lambda X: calls.append(1) or real(X))
    monkeypatch.setattr(est.model_, "predict_one", lambda row: calls.append(1) or real_one(row))
    a = est.estimate(waiting, 86401.0)
    b = est.estimate(waiting, 86402.0)
    assert a == b and calls == []                                    # served from cache
    new = Job("n", "vc1", 1, 86403.0, 1.0, user="u02", name="bert_ft")
    est.estimate(new, 86403.0)
    est.estimate(new, 86404.0)
    assert calls == [1]                                              # one single-row predict


def test_lambda_blend_and_priority() -> None:
    jobs = toy_trace(300, days=2, seed=4).jobs
    for lam in (0.0, 0.25, 1.0):
        est = OnlineDurationEstimator(lam=lam, **SMALL)
        res = replay(jobs, est, list(map(true_duration, jobs)))
        m = res["fitted"]
        np.testing.assert_allclose(res["combined"][m], lam * res["rolling"][m] + (1 - lam) * res["gbdt"][m])
    est = OnlineDurationEstimator(lam=0.5, blend="log", **SMALL)
    res = replay(jobs, est, list(map(true_duration, jobs)))
    m = res["fitted"]
    np.testing.assert_allclose(res["combined"][m],
                               np.expm1(0.5 * np.log1p(res["rolling"][m]) + 0.5 * np.log1p(res["gbdt"][m])))
    assert merge(100.0, 400.0, 0.1) == pytest.approx(370.0)
    now = est._now
    j = Job("p", "vc0", 4, now, 1.0, user="u01", name="resnet")
    p = est.priority(j, now)
    assert p == pytest.approx(4 * j.pred_duration) and j.priority == p
    with pytest.raises(ValueError):
        OnlineDurationEstimator(lam=1.5)
    with pytest.raises(ValueError):
        OnlineDurationEstimator(blend="max")


def test_prime_with_history_fits_at_once() -> None:
    hist = toy_trace(300, days=2, seed=5).jobs
    est = OnlineDurationEstimator(**SMALL)
    est.prime(hist, map(true_duration, hist))
    assert est.model_ is not None and est.n_observed == 300
    assert est.estimate(Job("q", "vc0", 1, 0.0, 1.0, user="u03", name="x"), 0.0) > 0


def test_batch_combined_estimator_is_sklearn_style_and_deterministic() -> None:
    tr = toy_trace(800, days=4, seed=6)
    train, test = tr.jobs[:600], tr.jobs[600:]
    a = CombinedDurationEstimator(lam=0.1, n_estimators=20, random_state=0).fit(train, list(map(true_duration, train)), origin=tr.origin)
    b = CombinedDurationEstimator(lam=0.1, n_estimators=20, random_state=0).fit(train, list(map(true_duration, train)), origin=tr.origin)
    pa, pb = a.predict(test), b.predict(test)
    np.testing.assert_array_equal(pa, pb)
    pr, pm = a.predict_parts(test)
    np.testing.assert_allclose(pa, 0.1 * pr + 0.9 * pm)
    np.testing.assert_allclose(a.priority(test), pa * np.array([j.gpus for j in test]))
    true = np.array([true_duration(j) for j in test])
    assert np.corrcoef(np.log1p(pa), np.log1p(true))[0, 1] > 0.7


def test_batch_and_online_estimators_train_the_same_gbdt() -> None:
    """One hyper-parameter set: same defaults, and the same values reach P_M from either estimator."""
    defaults = GBDTParams()
    assert GBDTParams.of(CombinedDurationEstimator()) == GBDTParams.of(OnlineDurationEstimator()) == defaults
    custom = GBDTParams(n_estimators=7, learning_rate=0.2, num_leaves=5, min_child_samples=3, random_state=4)
    jobs = toy_trace(300, days=2, seed=1).jobs
    batch = CombinedDurationEstimator(**asdict(custom)).fit(jobs, list(map(true_duration, jobs)))
    online = OnlineDurationEstimator(**asdict(custom), min_train_jobs=50)
    online.prime(jobs, map(true_duration, jobs))
    assert GBDTParams.of(batch.gbdt_) == GBDTParams.of(online.model_) == custom
