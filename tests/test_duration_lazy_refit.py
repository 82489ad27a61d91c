"""The online estimator trains a due refit only when a prediction first needs it
(``OnlineDurationEstimator.lazy_refits``): every estimate, cache entry and simulated decision must
equal the eager path's (each refit trained when due), while refits nobody reads are never trained."""

from __future__ import annotations

import random

import pytest
from test_duration_toy import toy_trace

from dlsched.core.cluster import ClusterSpec
from dlsched.core.truth import duration as true_duration
from dlsched.predictors.duration.online import OnlineDurationEstimator
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator

SMALL = {"n_estimators": 10, "min_train_jobs": 50, "refit_every": 21600.0}


def _replay(jobs, lazy: bool, seed: int) -> tuple[list, int]:
    """Finishes in end order, estimates of a random subset at submission and random re-estimates
    of still-waiting jobs: long stretches with no estimate leave refits unread."""
    OnlineDurationEstimator.lazy_refits = lazy
    try:
        est = OnlineDurationEstimator(origin=None, **SMALL)
        rng = random.Random(seed)
        events = [(j.submit_time, 1, i) for i, j in enumerate(jobs) if rng.random() < 0.4]
        events += [(j.submit_time + true_duration(j), 0, i) for i, j in enumerate(jobs)]
        events.sort()
        out, waiting = [], []
        for t, kind, i in events:
            job = jobs[i]
            if kind == 0:
                est.observe_finished(job, t, true_duration(job))
                continue
            out.append((job.job_id, est.estimate_parts(job, t)))
            waiting.append(job)
            if rng.random() < 0.3:
                again = rng.choice(waiting)
                out.append((again.job_id, est.estimate_parts(again, t)))
        fits = est.n_fits
        est.model_  # noqa: B018 -- trains the refit still due, whose batch fills the cache
        cache = {j.job_id: v for j, v in est._cache.items()}
        return out + [("cache", cache), ("refits", est.n_refits)], fits
    finally:
        OnlineDurationEstimator.lazy_refits = True


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lazy_refits_give_the_eager_estimates_and_skip_unread_ones(seed):
    jobs = toy_trace(500, days=4, seed=10 + seed).jobs
    eager, eager_fits = _replay(jobs, False, seed)
    lazy, lazy_fits = _replay(jobs, True, seed)
    assert lazy == eager                      # every estimate, the cache and the refit count
    refits = eager[-1][1]
    assert eager_fits == refits >= 10
    assert lazy_fits < refits                 # refits no estimate read were never trained


def test_reading_model_trains_the_due_refit():
    jobs = toy_trace(300, days=2, seed=7).jobs
    est = OnlineDurationEstimator(origin=None, **SMALL)
    for j in sorted(jobs, key=lambda j: j.submit_time + true_duration(j)):
        est.observe_finished(j, j.submit_time + true_duration(j), true_duration(j))
    assert est.n_refits > 0 and est.n_fits == 0 and est._due is not None
    assert est.refit_seconds == est.refit_cpu_seconds == 0.0   # nothing trained, no time counted
    model = est.model_
    assert model is not None and est.n_fits == 1 and est._due is None
    assert model.n_train_ == est._fitted_n
    assert est.refit_seconds > 0 and est.refit_cpu_seconds > 0     # the trained refit's wall and CPU


def _qssf_run(jobs, lazy: bool):
    OnlineDurationEstimator.lazy_refits = lazy
    try:
        policy = make_policy("qssf", refit_every=21600.0)
        Simulator(ClusterSpec.from_vc_sizes({"vc0": 2, "vc1": 1}, 8), policy, SimConfig()).run(jobs)
        est = policy.estimator
        return [(j.job_id, j.start_time, j.end_time, j.priority, j.pred_duration) for j in jobs], est
    finally:
        OnlineDurationEstimator.lazy_refits = True


def test_qssf_decides_the_same_with_lazy_refits():
    jobs = toy_trace(1500, days=3, seed=4).jobs
    for j in jobs:
        j.vc = "vc0" if j.vc != "vc1" else "vc1"
        j.gpus = min(j.gpus, 8)
    eager, e = _qssf_run(jobs, False)
    for j in jobs:
        j.reset()
    lazy, lz = _qssf_run(jobs, True)
    assert lazy == eager
    assert lz.n_refits == e.n_refits and lz.n_fits < e.n_fits == e.n_refits
