"""Each co-location policy's decisions on small hand-checked cases."""

from __future__ import annotations

import numpy as np
import pytest
from support.sharing import cluster, config, job, state_with

from dlsched.core.truth import gpu_util as true_util
from dlsched.kernel.decide import apply as apply_decision
from dlsched.kernel.decisions import Start
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.sched.kmeans import l1_kmeans
from dlsched.sched.policies.horus import allot
from dlsched.sim import Simulator
from dlsched.sim.physics import Physics


def times(result) -> dict:
    return {j.job_id: (j.start_time, j.end_time) for j in result.jobs}


# -- Horus --------------------------------------------------------------------------------------
def test_weighted_fair_allotment_by_hand():
    assert allot([10, 30], [5, 5], 4) == [1, 3]
    assert allot([50, 10], [1, 10], 6) == [1, 5]          # a short queue's leftover goes to the others
    assert allot([794, 199], [4, 2], 3) == [2, 1]         # 2.399 / 0.601: the larger remainder wins
    assert allot([1, 1], [0, 0], 5) == [0, 0]
    assert sum(allot([3, 2, 1], [100, 100, 100], 15)) == 15


def test_l1_kmeans_separates_light_from_heavy_jobs():
    x = np.array([[1, 10, 1, 1000], [1, 12, 1, 1100], [1, 90, 1, 9000], [1, 95, 1, 9500], [1, 11, 1, 900]], float)
    assert l1_kmeans(x, 2).tolist() == [0, 0, 1, 1, 0]
    assert l1_kmeans(x, 1).tolist() == [0] * 5


def test_horus_f_weighted_fair_round_lets_the_younger_queue_in():
    """Four light jobs waited 200-197 s (median 198.5, w = 794), two heavy ones 100 and 99 s
    (w = 199). With beta = 3 a round takes 2 light + 1 heavy, so on 3 free GPUs the first heavy
    job starts where FIFO would have started three light ones."""
    policy = make_policy("horus-f", "horus-cost", share=False, k=2, beta=3)
    state, view = state_with(policy, [], gpus=3, cap=1)
    light = [job(f"l{i}", 10, 1000, submit=i) for i in range(4)]
    heavy = [job(f"h{i}", 95, 9000, submit=100 + i) for i in range(2)]
    for j in light + heavy:
        state.submit(j, j.submit_time)
    view.now = 200.0
    started = []
    for d in policy.schedule(view, state.vcs[0]):
        apply_decision(state, d, view.now)
        started.append(d.job.job_id)
    assert started == ["l0", "l1", "h0"]


def test_horus_one_queue_is_non_blocking_and_longest_waiting_first():
    """k = 1: a 2-GPU job at the head that does not fit one free GPU is skipped, not blocking."""
    policy = make_policy("horus", share=False)
    state, view = state_with(policy, [(job("r", 10, 1000), 0, 0b01)], gpus=2, cap=1)
    big, small = job("big", 10, 1000, gpus=2, submit=0), job("small", 10, 1000, submit=5)
    state.submit(big, 0)
    state.submit(small, 5)
    view.now = 10
    assert [d.job.job_id for d in policy.schedule(view, state.vcs[0])] == ["small"]


def test_horus_run_with_oom_failover():
    """Horus co-locates A and B (predicted 4,000 + 4,000 MiB); B truly needs 9,000, crashes 5 s
    after joining, is resubmitted with 9,000 MiB and waits for A (the inherited failover)."""
    from dlsched.models.failure import OutOfMemory

    a = job("a", 50, 4000, submit=0, duration=100, true_mem=4000)
    b = job("b", 30, 4000, submit=10, duration=50, true_mem=9000)
    res = Simulator(cluster(1, 1), make_policy("horus", share=True), config(2),
                    failure_model=OutOfMemory(delay=5)).run([a, b])
    assert times(res) == {"a": (0, 100), "b": (10, 150)}
    assert b.failures == 1 and b.pred_gpu_mem_mib == 9000


# -- PAB ------------------------------------------------------------------------------------------
def _pab(max_drop: float):
    a = job("a", 50, 1000, submit=0, duration=100)
    b = job("b", 50, 1000, submit=10, duration=50)
    # t_wait=0: the re-queue check alone (the profiling wait is tests/test_sharing_protocol.py's)
    policy = make_policy("pab", share=True, warmup=20, max_drop=max_drop, t_wait=0)
    res = Simulator(cluster(1, 1), policy, config(2), speed_model=TimeSlicedSpeed()).run([a, b])
    return policy, res, b


def test_pab_requeues_a_job_whose_observed_rate_dropped_too_far():
    """B joins A at 10; both run at 0.5. At 30 (warm-up 20 s) B's rate 0.5 is a 50 % drop, more
    than 40 %: B is re-queued (10 s of work done, 40 left) and waits for an idle GPU. A has done
    10 + 10 = 20 by 30, runs alone, ends at 110; B runs 110-150."""
    policy, res, b = _pab(0.4)
    assert times(res) == {"a": (0, 110), "b": (10, 150)}
    assert policy.requeued == 1 and b.preemptions == 1


def test_pab_keeps_a_pair_whose_drop_is_within_the_bound():
    """Same, bound 50 %: a drop of exactly 50 % is kept. B (50 s at 0.5) ends at 110; A has
    90 - 50 = 40 left and ends at 150."""
    policy, res, _ = _pab(0.5)
    assert times(res) == {"a": (0, 150), "b": (10, 110)}
    assert policy.requeued == 0


# -- FFD-util -------------------------------------------------------------------------------------
def test_ffd_util_decreasing_order_and_utilisation_bound_by_hand():
    """One GPU, A (50 %) runs from 0. At 10, C (60 %) and B (30 %) arrive: C is tried first
    (decreasing) but 110 % > 100 %; B fits (80 %). Time-sliced: B (40 s at 0.5) ends at 90, A
    then has 50 s left and ends at 140; C never fits beside A and runs 140-160."""
    jobs = [job("a", 50, 1000, submit=0, duration=100), job("b", 30, 1000, submit=10, duration=40),
            job("c", 60, 1000, submit=10, duration=20)]
    res = Simulator(cluster(1, 1), make_policy("ffd-util", share=True), config(3),
                    speed_model=TimeSlicedSpeed()).run(jobs)
    assert times(res) == {"a": (0, 140), "b": (10, 90), "c": (140, 160)}


# -- the pairing family (Co-scheML's Algorithm 1) ---------------------------------------------------
def _pairs(name: str, speed_model=None, **options) -> dict[str, int]:
    """GPU 0 runs A (90 %, 3,000 MiB), GPU 1 runs B (20 %, 3,000); waiting: C (80 %, 3,000) and
    D (10 %, 8,000), GPUs of 10,000 MiB. True utilisation of C and D is the other way round
    (10 and 80 %), true memory 3,000 each. Returns waiting job -> GPU it was paired onto."""
    policy = make_policy(name, share=True, **options)
    a, b = job("a", 90, 3000, true_util=90, true_mem=3000), job("b", 20, 3000, true_util=20, true_mem=3000)
    state, view = state_with(policy, [(a, 0, 0b01), (b, 0, 0b10)])
    view.truth = Physics(state, speed_model)  # the engine's ground truth (what an oracle is granted)
    c = job("c", 80, 3000, submit=1, true_util=10, true_mem=3000)
    d = job("d", 10, 8000, submit=2, true_util=80, true_mem=3000)
    state.submit(c, 1)
    state.submit(d, 2)
    view.now = 5
    out = {}
    for decision in policy.schedule(view, state.vcs[0]):
        assert isinstance(decision, Start) and decision.shared
        apply_decision(state, decision, view.now)
        (_, mask), = decision.placement
        out[decision.job.job_id] = mask.bit_length() - 1
    state.check_invariants()
    return out


def test_coscheml_least_predicted_interference_with_oom_check():
    """Summed utilisation (the curve is monotone): B+D 30 is best but 3,000 + 8,000 MiB > 10,000;
    then A+D / B+C at 100: A+D fails memory too, B+C fits -> C joins B. D stays queued."""
    assert _pairs("coscheml", model="horus-paper-curve") == {"c": 1}


def test_coscheml_default_model_is_the_pair_forest_fitted_on_the_available_profiles(tmp_path, monkeypatch):
    """Co-scheML's own model by default: the random forest, fitted on ../shared's Lucid + Gavel
    when found, else on the built-in table; ``model=`` picks another, ``profiles=`` the data."""
    from dlsched.models.colocation_table import builtin_table
    from dlsched.predictors.interference.base import JobProfile
    from dlsched.predictors.interference.pair_forest import PairForest
    from dlsched.profiles import location
    from dlsched.sched.policies.coscheml import profile_source
    from dlsched.sched.sharing.curve import CurveSlowdown

    monkeypatch.setattr(location, "candidate_dirs", lambda: [tmp_path / "none", tmp_path / "half"])
    (tmp_path / "half" / "lucid").mkdir(parents=True)  # a folder without both sets does not count
    assert profile_source() == "builtin" and profile_source("x.json") == "x.json"
    (tmp_path / "half" / "gavel").mkdir()
    assert profile_source() == str((tmp_path / "half").resolve())

    policy = make_policy("coscheml", share=True, profiles="builtin")
    assert isinstance(policy.model, PairForest)
    light, heavy = JobProfile("", 10.0, 2000.0, 32), JobProfile("", 95.0, 8000.0, 32)
    ref = PairForest().fit(builtin_table().observations())
    assert policy.model.slowdown(light, [heavy]) == pytest.approx(ref.slowdown(light, [heavy]))
    assert isinstance(make_policy("coscheml", share=True, model="horus-paper-curve").model, CurveSlowdown)
    with pytest.raises(ValueError, match="unknown interference model 'nope'"):
        make_policy("coscheml", model="nope")


def test_loadbalance_least_summed_utilisation_without_oom_check():
    assert _pairs("loadbalance") == {"d": 1, "c": 0}


def test_mystic_least_similar_first():
    """Similarity 1 - (|du| + |dm|) / 2: A-D 0.35 first (D to GPU 0), then B-C 0.70 (C to GPU 1)."""
    assert _pairs("mystic") == {"d": 0, "c": 1}


def test_oracle_pairs_by_true_profiles():
    """With the built-in colocation truth (these jobs have no table type: its curve on true
    utilisation) B+C = 30 is best (C to GPU 1), then A+D = 170 with true memory 3,000 + 3,000:
    D to GPU 0 -- where predictions would have kept D out (always pairing, ``min_combined=0``).
    By default the oracle declines A+D: at 170 % the pair does less than 1.25 jobs' work."""
    from dlsched.models.colocation import ColocationSpeed

    assert _pairs("oracle-pairing", ColocationSpeed(), min_combined=0) == {"c": 1, "d": 0}
    assert _pairs("oracle-pairing", ColocationSpeed()) == {"c": 1}


def _oracle_choice(speed_model) -> dict[str, int]:
    """A (type p, 90 % busy) runs on GPU 0, B (type q, 10 %) on GPU 1; C (type r, 50 %) arrives
    and is paired: waiting job -> the GPU it joined."""
    from dlsched.core.job import Job

    jobs = [Job(n, "v", 1, t, 100, model_name=m, batch_size=1, gpu_util=u, gpu_mem_mib=1000)
            for n, t, m, u in (("a", 0, "p", 90.0), ("b", 1, "q", 10.0), ("c", 2, "r", 50.0))]
    for j in jobs:
        j.pred_gpu_util, j.pred_gpu_mem_mib = true_util(j), 1000

    class Joined:
        gpu: dict[str, int] = {}

        def stopped(self, job, vc, now, why):  # before its GPUs are released
            if job.job_id == "c":
                self.gpu["c"] = job.placement[0][1].bit_length() - 1

    seen = Joined()
    Simulator(cluster(1, 2), make_policy("oracle-pairing", share=True), config(2), speed_model=speed_model,
              observers=(seen,)).run(jobs)
    return seen.gpu


def test_the_oracle_pairs_by_the_engines_selected_truth():
    """The built-in table has none of these types: its curve (true utilisation) puts C beside
    the light B (60 % < 140 %). A table that measured r beside p at 1.1 and beside q at 3.0 is
    the engine's truth here: the oracle is granted that model and puts C beside A."""
    from dlsched.models.colocation import ColocationSpeed
    from dlsched.models.colocation_table import ColocationTable, JobType
    from dlsched.sched.sharing.curve import CurveSlowdown

    assert _oracle_choice(ColocationSpeed()) == {"c": 1}
    types = [JobType(m, m, 1, {"T": u}, 1000) for m, u in (("p", 90.0), ("q", 10.0), ("r", 50.0))]
    pairs = {"T": {(2, 0): 1.1, (0, 2): 1.1, (2, 1): 3.0, (1, 2): 3.0}}
    measured = ColocationSpeed(ColocationTable("hand", types, pairs), fallback=CurveSlowdown())
    assert _oracle_choice(measured) == {"c": 0}


def test_the_oracle_without_pair_truth_keeps_arrival_order():
    """With no pair model in the engine (no speed model: no interference) every pair is worth
    the same; the first running job's GPU is taken."""
    assert _oracle_choice(None) == {"c": 0}


def test_random_pairing_is_seeded_and_never_breaks_the_oom_check():
    first = _pairs("random-pairing", seed=3)
    assert list(first) == ["c"] and first == _pairs("random-pairing", seed=3)


def test_pairing_takes_idle_gpus_first_and_pairs_only_when_none_is_left():
    """Co-scheML on 2 GPUs: A at 0 and B at 1 each take an idle GPU; C at 2 joins one of them."""
    jobs = [job(n, 30, 1000, submit=t, duration=100) for t, n in enumerate("abc")]
    res = Simulator(cluster(1, 2), make_policy("coscheml", share=True), config(2),
                    speed_model=TimeSlicedSpeed()).run(jobs)
    placed = {j.job_id: j.start_time for j in res.jobs}
    assert placed == {"a": 0, "b": 1, "c": 2}
    assert res.extra["avg_slowdown"] > 1


@pytest.mark.parametrize("name", ["horus", "horus-f", "obp", "pab", "ffd-util", "coscheml", "binpack",
                                  "loadbalance", "mystic", "random-pairing"])
def test_policies_run_on_predictions_only(name):
    """A simulation with ground truth hidden: a non-oracle policy reading truth would raise."""
    jobs = [job(f"j{i}", 20 + 7 * i % 70, 1500 + 500 * (i % 5), submit=3 * i, duration=50 + 10 * (i % 7),
                true_util=30, true_mem=2000) for i in range(30)]
    res = Simulator(cluster(2, 2), make_policy(name, share=True), config(3),
                    speed_model=TimeSlicedSpeed()).run(jobs)
    assert all(j.end_time > 0 for j in res.jobs)
