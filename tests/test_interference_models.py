"""Interference models on hand-checked cases: the Horus curve's fit, lookup exactness, the 3+ rule,
the forest's partner ordering, and the shared contract over the registry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlsched.predictors.interference.base import (
    ConstantSlowdown,
    InterferenceModel,
    JobProfile,
    PairObservation,
)
from dlsched.predictors.interference.combine import combine_pairwise
from dlsched.predictors.interference.horus_curve import HorusCurve
from dlsched.predictors.interference.lookup import PairLookup
from dlsched.predictors.interference.pair_forest import PairForest
from dlsched.predictors.interference.pairwise import PairwiseModel
from dlsched.predictors.interference.registry import MODELS, make_model


def job(util: float, name: str = "m", batch: int = 32, mem: float = 1000.0) -> JobProfile:
    return JobProfile(model=name, gpu_util=util, gpu_mem_mib=mem, batch_size=batch)


def curve(u: float, c0: float, c1: float, c2: float) -> float:
    return c0 + c1 * u + c2 * max(0.0, u - 100.0) ** 2


def curve_pairs(gpu: str, coef: tuple[float, float, float], utils: range) -> list[PairObservation]:
    out = []
    for ua in utils:
        for ub in utils:
            s = curve(ua + ub, *coef)
            out.append(PairObservation(job(ua, f"a{ua}"), job(ub, f"b{ub}"), gpu, s, s))
    return out


def test_horus_curve_recovers_known_quadratic_per_gpu():
    k80, v100 = (1.0, 0.004, 0.0002), (0.9, 0.002, 0.0001)
    pairs = curve_pairs("k80", k80, range(10, 100, 10)) + curve_pairs("v100", v100, range(10, 100, 10))
    model = HorusCurve().fit(pairs)
    assert model.coefs_["k80"] == pytest.approx(k80, rel=1e-6)
    assert model.coefs_["v100"] == pytest.approx(v100, rel=1e-6)
    # 60 % + 90 % = 150 %: 1 + 0.6 + 0.0002 * 50^2 = 2.1 on K80
    assert model.slowdown(job(60), [job(90)], "k80") == pytest.approx(2.1)
    assert model.slowdown(job(30), [job(20)], "v100") == pytest.approx(1.0)  # 0.9 + 0.1, floored at 1


def test_horus_curve_pooled_fallback_and_unknown_utilisation():
    few = curve_pairs("p100", (1.0, 0.01, 0.0), range(10, 40, 10))  # 9 pairs = 18 sides < min_samples
    many = curve_pairs("k80", (1.0, 0.004, 0.0), range(10, 100, 10))
    model = HorusCurve(min_samples=30).fit(few + many)
    assert "p100" not in model.coefs_ and "k80" in model.coefs_
    pooled = model.curve(120.0, "p100")[0]
    assert pooled == pytest.approx(np.dot(model.pooled_, [1.0, 120.0, 400.0]))
    assert model.curve(120.0, "a100")[0] == pooled  # an unseen GPU type gets the pooled curve
    s = np.array([p.slowdown_a for p in few + many])
    assert model.slowdown(job(math.nan), [job(50)], "k80") == pytest.approx(s.mean())


def test_horus_curve_keeps_over_commit_penalty_non_negative():
    # data that bend *down* past 100 %: the quadratic term is dropped, not made negative
    pairs = [PairObservation(job(u / 2), job(u / 2), "x", s, s)
             for u, s in [(40, 1.1), (80, 1.3), (120, 1.45), (160, 1.5), (200, 1.5)]]
    assert HorusCurve(min_samples=1).fit(pairs).coefs_["x"][2] == 0.0


def test_three_or_more_jobs_add_pairwise_excesses():
    assert combine_pairwise([]) == 1.0
    assert combine_pairwise([1.3, 1.5]) == pytest.approx(1.8)
    assert combine_pairwise([0.9]) == 1.0
    assert combine_pairwise([1.2, math.inf]) == math.inf
    assert ConstantSlowdown(2.0).slowdown(job(1), [job(1), job(1)]) == 3.0  # time-slicing three jobs
    assert ConstantSlowdown(2.0).slowdown(job(1), []) == 1.0
    model = HorusCurve(min_samples=1).fit(curve_pairs("g", (1.0, 0.004, 0.0), range(10, 100, 10)))
    # 50+30 -> 1.32, 50+70 -> 1.48: together 1 + 0.32 + 0.48
    assert model.slowdown(job(50), [job(30), job(70)], "g") == pytest.approx(1.8)


def test_lookup_exact_on_measured_pairs_fallback_elsewhere():
    a, b, c = job(50, "A"), job(60, "B"), job(70, "C")
    pairs = [PairObservation(a, b, "v100", 1.2, 1.5), PairObservation(a, b, "v100", 1.4, 1.5),
             PairObservation(a, a, "v100", 1.3, 1.1), PairObservation(b, c, "v100", math.inf, math.inf, feasible=False),
             PairObservation(a, c, "", 1.7, 1.9)]
    model = PairLookup(fallback=ConstantSlowdown(1.25)).fit(pairs)
    assert model.slowdown(a, [b], "v100") == pytest.approx(1.3)  # mean of the two measurements
    assert model.slowdown(b, [a], "v100") == pytest.approx(1.5)
    assert model.slowdown(a, [a], "v100") == pytest.approx(1.2)  # self-pair: both sides averaged
    assert model.slowdown(b, [c], "v100") == math.inf  # infeasible: never co-locate
    assert model.slowdown(c, [a], "k80") == pytest.approx(1.9)  # measured on an unrecorded GPU type
    assert model.slowdown(b, [a], "k80") == 1.25  # not measured on k80: the fallback
    assert model.slowdown(a, [b, c], "v100") == pytest.approx(1 + 0.3 + 0.7)
    assert model.fallback.factor == 1.25 and model.fallback_ is not model.fallback  # fitted a copy


def test_forest_learns_which_partner_hurts_and_is_seeded():
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(400):
        ua, ub = rng.uniform(5, 100, 2)
        sa, sb = 1 + (ua * ub) / 5000, 1 + (ua * ub) / 5000
        pairs.append(PairObservation(job(ua, "x"), job(ub, "y"), "g", sa, sb))
    model = PairForest(n_estimators=20).fit(pairs)
    s = [model.slowdown(job(80), [job(u)], "g") for u in (10, 50, 95)]
    assert s[0] < s[1] < s[2]
    assert s[2] == pytest.approx(1 + 80 * 95 / 5000, rel=0.1)
    again = PairForest(n_estimators=20).fit(pairs)
    assert again.slowdown(job(80), [job(50)], "g") == s[1]


@pytest.mark.parametrize("name", list(MODELS))
def test_registry_models_follow_the_contract(name):
    pairs = curve_pairs("g", (1.0, 0.004, 0.0001), range(10, 100, 15))
    model = make_model(name)
    assert isinstance(model, InterferenceModel)
    assert model.fit(pairs) is model
    assert model.slowdown(job(40), [], "g") == 1.0
    assert model.slowdown(job(40), [job(90)], "g") >= 1.0
    assert model.slowdown(job(40), [job(90), job(90)], "g") >= model.slowdown(job(40), [job(90)], "g")


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="horus-curve"):
        make_model("nope")


@pytest.mark.parametrize("name", ["horus-curve", "lookup", "pair-forest"])
def test_scalar_and_batched_answers_agree(name):
    pairs = curve_pairs("g", (0.95, 0.003, 0.0001), range(10, 100, 15))
    model = make_model(name).fit(pairs)
    jobs = [job(15, "a15"), job(55, "b55"), job(33, "new"), job(math.nan, "unknown")]
    for a in jobs:
        for b in jobs:
            batched = PairwiseModel.slowdown(model, a, [b], "g")  # the base class's batched path
            assert model.slowdown(a, [b], "g") == pytest.approx(batched)
            assert model.slowdown(a, [b], "g") == pytest.approx(batched)  # again: cached answers agree
        assert model.slowdown(a, jobs, "g") == pytest.approx(PairwiseModel.slowdown(model, a, jobs, "g"))


@pytest.mark.parametrize("cls", [HorusCurve, PairForest, PairLookup])
def test_scikit_learn_conventions(cls):
    """Hyper-parameters kept as given in ``__init__``; ``fit`` adds only attributes ending in ``_``."""
    import inspect

    model = cls()
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    before = dict(vars(model))
    assert set(before) == set(params)
    model.fit(curve_pairs("g", (1.0, 0.004, 0.0), range(10, 100, 15)))
    added = set(vars(model)) - set(before)
    assert added and all(name.endswith("_") for name in added)
    assert all(vars(model)[p] is before[p] for p in params)
