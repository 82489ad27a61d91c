"""Evaluation metrics and folds on tiny hand-made tables (every number worked out by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlsched.predictors.interference.base import ConstantSlowdown, JobProfile, PairObservation
from dlsched.predictors.interference.evaluation import metrics
from dlsched.predictors.interference.evaluation.folds import (
    leave_one_gpu_out,
    leave_one_model_out,
    leave_one_model_out_per_gpu,
)
from dlsched.predictors.interference.evaluation.run import evaluate_folds
from dlsched.predictors.interference.lookup import PairLookup


def test_ranking_of_one_job():
    true = np.array([1.0, 1.2, 1.5, 2.0])
    got = metrics.rank_one(np.array([1.3, 1.1, 1.6, 1.9]), true)
    # predicted best is partner 1 (true 1.2): regret 0.2, not top-1; the true best is 2nd: top-3
    assert got["regret"] == pytest.approx(0.2) and got["top1"] == 0.0 and got["top3"] == 1.0
    assert got["spearman"] == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    flat = metrics.rank_one(np.full(4, 2.0), true)  # a constant model = a random pick
    assert flat["regret"] == pytest.approx((0 + 0.2 + 0.5 + 1.0) / 4)
    assert flat["top1"] == 0.25 and flat["top3"] == 0.75 and flat["spearman"] == 0.0
    two = metrics.rank_one(np.array([1.0, 1.1]), np.array([1.5, 1.2]))
    assert two == {"regret": pytest.approx(0.3), "top1": 0.0}  # too few partners for top-3 / rho


def test_ranking_pools_jobs_and_takes_p95():
    groups = ["j1"] * 2 + ["j2"] * 2 + ["j3"] * 2
    pred = np.array([1.0, 2.0, 2.0, 1.0, 1.0, 2.0])
    true = np.array([1.5, 1.0, 1.0, 1.1, 1.0, 1.4])
    got = metrics.ranking(groups, pred, true)
    assert got["regret_mean"] == pytest.approx((0.5 + 0.1 + 0.0) / 3)
    assert got["regret_p95"] == pytest.approx(np.percentile([0.5, 0.1, 0.0], 95))
    assert got["top1"] == pytest.approx(1 / 3) and got["jobs_ranked"] == 3 and math.isnan(got["top3"])


def test_errors_with_censored_sides():
    pred = np.array([1.2, 1.0, 1.1, 1.0])
    true = np.array([1.0, 1.0, 1.0, 1.2])
    cens = np.array([True, True, False, True])
    # censored: truth is at most the record, so only over-prediction counts (last side: 0)
    assert metrics.mape(pred, true, cens) == pytest.approx((0.2 + 0 + 0.1 + 0) / 4)
    assert metrics.rmse(pred, true, cens) == pytest.approx(math.sqrt((0.04 + 0.01) / 4))


def test_safe_pair_auroc():
    ta, tb = np.array([1.05, 1.2, 1.0, 1.5]), np.array([1.0, 1.0, 1.08, 1.3])
    pa, pb = np.array([1.1, 1.3, 1.0, 1.15]), np.array([1.0, 1.0, 1.2, 1.0])
    # safe pairs score max 1.1 and 1.2, unsafe 1.3 and 1.15: 3 of 4 (safe, unsafe) pairs ordered right
    assert metrics.safe_auroc(ta, tb, pa, pb) == pytest.approx(0.75)
    assert math.isnan(metrics.safe_auroc(ta * 0 + 1, tb * 0 + 1, pa, pb))


def _p(a: str, b: str, gpu: str = "g", sa: float = 1.2, sb: float = 1.3, feasible: bool = True) -> PairObservation:
    ja, jb = JobProfile(a, 50.0, 1000.0, 32), JobProfile(b, 60.0, 1000.0, 32)
    return PairObservation(ja, jb, gpu, sa if feasible else math.inf, sb if feasible else math.inf, feasible=feasible)


def test_folds_hold_out_every_pair_of_a_model():
    pairs = [_p("A", "B"), _p("A", "C"), _p("B", "C"), _p("C", "C"), _p("B", "B", feasible=False)]
    folds = {f.name: f for f in leave_one_model_out(pairs)}
    assert sorted(folds) == ["A", "B", "C"]
    assert [(p.a.model, p.b.model) for p in folds["A"].test] == [("A", "B"), ("A", "C")]
    assert [(p.a.model, p.b.model) for p in folds["A"].train] == [("B", "C"), ("C", "C"), ("B", "B")]
    assert [(p.a.model, p.b.model) for p in folds["B"].test] == [("A", "B"), ("B", "C")]  # infeasible: not tested
    both = [_p("A", "B", "k80"), _p("A", "C", "k80"), _p("A", "B", "v100"), _p("B", "C", "v100")]
    # holding out k80/A or v100/B leaves nothing to train on: no such fold
    assert [f.name for f in leave_one_model_out_per_gpu(both)] == ["k80/B", "k80/C", "v100/A", "v100/C"]
    gpu_folds = leave_one_gpu_out(both)
    assert [(f.name, len(f.train), len(f.test)) for f in gpu_folds] == [("k80", 2, 2), ("v100", 2, 2)]


def test_held_out_pairs_never_leak_into_the_lookup():
    pairs = [_p("A", "B", sa=1.5, sb=1.1), _p("A", "C", sa=1.2, sb=1.4), _p("B", "C", sa=1.3, sb=1.6),
             _p("B", "B", sa=1.05, sb=1.05)]
    folds = leave_one_model_out(pairs)
    lookup = evaluate_folds(lambda: PairLookup(fallback=ConstantSlowdown(1.0)), folds)
    const = evaluate_folds(lambda: ConstantSlowdown(1.0), folds)
    assert lookup["mape"] == const["mape"] and lookup["regret_mean"] == const["regret_mean"]
    # by hand: 3 folds x 2 pairs x 2 sides (fold B: AB, BC, BB = 3 pairs) -> 14 sides
    assert const["sides"] == 14 and const["folds"] == 3
