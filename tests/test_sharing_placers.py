"""Co-location placements on hand-checked GPUs: Horus cost (Eq. 7-10), OBP, Binpack, FFD-util."""

from __future__ import annotations

import pytest
from support.sharing import job, state_with

from dlsched.registry import make_placer, make_policy
from dlsched.sched.placers.horus_cost import HorusCostScorer
from dlsched.sched.sharing.curve import PAPER_CURVE

F1 = 1.16664 - 0.00302 + 4e-5   # the paper's RTX 2080 curve at 100 % cumulative utilisation


def test_paper_curve_is_linear_below_100_and_quadratic_above():
    assert PAPER_CURVE(0) == 0
    assert PAPER_CURVE(50) == pytest.approx(F1 / 2)
    assert PAPER_CURVE(100) == pytest.approx(F1)
    assert PAPER_CURVE(150) == pytest.approx(1.16664 * 2.25 - 0.00302 * 1.5 + 4e-5)


def test_horus_cost_by_hand():
    """GPU 0 holds A (60 %, 4,000 MiB), GPU 1 is free; B predicts 30 %, 2,000 MiB on 10,000 MiB GPUs.
    Cost GPU 0 = 6,000/10,000 + f(90) = 0.6 + 0.9 F1; GPU 1 = 0.2 + f(30) = 0.2 + 0.3 F1."""
    policy = make_policy("horus", share=True)
    a = job("a", 60, 4000)
    _, view = state_with(policy, [(a, 0, 0b01)])
    costs = {g: c for c, g in HorusCostScorer().costs(view, job("b", 30, 2000), 0, 0b11)}
    assert costs[0] == pytest.approx(0.6 + 0.9 * F1)
    assert costs[1] == pytest.approx(0.2 + 0.3 * F1)


def test_horus_cost_picks_the_less_loaded_gpu_and_respects_memory():
    """Both GPUs busy: A (60 %, 4,000) on GPU 0, C (20 %, 7,000) on GPU 1. B (30 %, 2,000):
    GPU 0 costs 0.6 + 0.9 F1 = 1.647, GPU 1 costs 0.9 + 0.5 F1 = 1.482 -> GPU 1. B' with 4,000 MiB
    does not fit GPU 1 (11,000 > 10,000 MiB) -> GPU 0."""
    policy = make_policy("horus", share=True)
    state, view = state_with(policy, [(job("a", 60, 4000), 0, 0b01), (job("c", 20, 7000), 0, 0b10)])
    vc = state.vcs[0]
    fit = policy.placer.place(view, vc, job("b", 30, 2000))
    assert fit.fits and fit.placement == ((0, 0b10),) and fit.shared
    fit = policy.placer.place(view, vc, job("b2", 30, 4000))
    assert fit.fits and fit.placement == ((0, 0b01),)


def test_horus_cost_prefers_an_idle_gpu_on_another_node():
    policy = make_policy("horus", share=True)
    state, view = state_with(policy, [(job("a", 10, 1000), 0, 0b11)], nodes=2)
    fit = policy.placer.place(view, state.vcs[0], job("b", 10, 1000, gpus=2))
    assert fit.placement == ((1, 0b11),) and not fit.shared


def _three_gpus(placement: str, new):
    policy = make_policy("fifo", placement, share=True)
    state, view = state_with(policy, [(job("a", 50, 6000), 0, 0b001), (job("b", 50, 2000), 0, 0b010)], gpus=3)
    return policy.placer.place(view, state.vcs[0], new)


def test_obp_takes_the_gpu_with_most_memory_left_binpack_the_fullest_that_fits():
    """GPU 0 uses 6,000 MiB, GPU 1 2,000, GPU 2 none (10,000 each)."""
    assert _three_gpus("obp", job("n", 50, 1000)).placement == ((0, 0b100),)
    assert _three_gpus("binpack-mem", job("n", 50, 1000)).placement == ((0, 0b001),)
    assert _three_gpus("binpack-mem", job("n", 50, 5000)).placement == ((0, 0b010),)   # 11,000 > 10,000 on GPU 0
    assert _three_gpus("binpack-mem", job("n", 50, 9000)).placement == ((0, 0b100),)   # only the idle GPU fits


def test_ffd_util_keeps_predicted_utilisation_within_100_and_at_most_3_jobs():
    """GPU 0 at 70 %, GPU 1 at 20 %: a 40 % job must skip GPU 0 (110 %), a 30 % job fits it (100 %)."""
    policy = make_policy("ffd-util", share=True)
    state, view = state_with(policy, [(job("a", 70, 1000), 0, 0b01), (job("b", 20, 1000), 0, 0b10)], cap=4)
    vc = state.vcs[0]
    assert policy.placer.place(view, vc, job("n", 40, 1000)).placement == ((0, 0b10),)
    assert policy.placer.place(view, vc, job("n", 30, 1000)).placement == ((0, 0b01),)
    state, view = state_with(policy, [(job(f"j{i}", 10, 1000), 0, 0b01) for i in range(3)], gpus=1, cap=4)
    fit = policy.placer.place(view, state.vcs[0], job("n", 10, 1000))
    assert not fit.fits and "utilisation" in fit.reason


def test_sharing_placements_combine_with_any_order():
    placer = make_placer("horus-cost:2,spread:1", share=True)
    assert placer.name == "horus-cost:2+spread" and placer.picker.name == "horus-cost"
    assert make_policy("qssf", "horus-cost", share=True, priorities={"x": 1.0}).placer.name == "horus-cost"


def test_horus_free_gpu_shortcut_equals_the_pipeline():
    """Random half-full clusters: where some node has enough free GPUs, the shortcut Horus takes
    gives exactly the pipeline's placement."""
    import random

    rng = random.Random(1)
    policy = make_policy("horus", share=True)
    scorer = policy.placer.scorers[0][0]
    for trial in range(30):
        running = [(job(f"r{i}", rng.uniform(5, 90), rng.uniform(500, 4000)), n, 1 << g)
                   for i, (n, g) in enumerate((n, g) for n in range(3) for g in range(4) if rng.random() < 0.6)]
        state, view = state_with(policy, running, nodes=3, gpus=4)
        new = job("n", rng.uniform(5, 90), rng.uniform(500, 4000), gpus=rng.choice([1, 2, 4]))
        short = scorer.free_fit(view, state.vcs[0], new)
        if short is not None:
            assert short.placement == policy.placer.place(view, state.vcs[0], new).placement, trial
