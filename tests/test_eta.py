"""Start-time estimates by forward simulation (dlsched.sim.eta): hand-checked, exact with perfect
predictions, never touching the real state or the ground truth."""

from __future__ import annotations

import math
import random

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.experiments.dlsched.eta import EtaSampler, Sample, accuracy_rows, sample_times
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sim.config import SimConfig
from dlsched.sim.engine import Simulator
from dlsched.sim.eta import EtaEstimator, predicted_remaining


def job(jid: str, submit: float, gpus: int, duration: float, pred: float | None = None) -> Job:
    j = Job(jid, "v", gpus, submit, duration)
    j.pred_duration = duration if pred is None else pred
    return j


def hand_jobs() -> list[Job]:
    # 2 nodes x 4 GPUs, FIFO without backfill:
    #   a (4 GPUs, 100 s) and b (4, 50) start at 0; c (8, 30) waits for both: 100 -> 130;
    #   d (2, 10) and e (4, 20) queue behind c: both start at 130 on different nodes;
    #   f (4, 5) needs a whole node: d's node frees at 140.
    return [job("a", 0, 4, 100), job("b", 0, 4, 50), job("c", 1, 8, 30), job("d", 2, 2, 10),
            job("e", 3, 4, 20), job("f", 4, 4, 5)]


def run_with_sampler(jobs, policy, times, nodes=2, gpus=4):
    cluster = ClusterSpec.from_vc_sizes({"v": nodes}, gpus_per_node=gpus)
    sampler = EtaSampler(EtaEstimator(policy), times)
    Simulator(cluster, policy, SimConfig(check_invariants=True), observers=(sampler,)).run(jobs)
    return sampler


def test_hand_checked_example_etas_equal_the_actual_starts():
    jobs = hand_jobs()
    sampler = run_with_sampler(jobs, make_policy("fifo"), [10.0])
    got = {s.job.job_id: s.eta for s in sampler.samples}
    assert got == {"c": 100.0, "d": 130.0, "e": 130.0, "f": 140.0}
    starts = {j.job_id: j.start_time for j in jobs}
    assert all(starts[k] == v for k, v in got.items())
    assert sampler.refreshes == 1


def test_running_jobs_count_by_their_predicted_remaining_time():
    # a ran 10 s of its predicted 100: 90 left; c needs a's node too -> ETA 100 at t = 10
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 2}, gpus_per_node=4), new_queue=make_policy("fifo").new_queue)
    a, b, c = job("a", 0, 4, 999, pred=100), job("b", 0, 4, 999, pred=50), job("c", 1, 8, 999, pred=30)
    for j, node in ((a, 0), (b, 1)):
        state.submit(j, 0.0)
        state.start(j, ((node, 0b1111),), 0.0)
    state.submit(c, 1.0)
    res = EtaEstimator(make_policy("fifo")).estimate(state, 10.0)  # 999 s, the truth, is never read
    assert res.by_id() == {"c": 100.0}
    # the real state is untouched
    state.check_invariants()
    assert c.state.name == "PENDING" and a.state.name == "RUNNING" and state.n_pending == 1


def test_a_job_past_its_prediction_is_expected_to_run_overrun_times_its_elapsed_time():
    j = job("a", 0, 1, 500, pred=100)
    j.run_since = 0.0
    assert predicted_remaining(j, 40.0, 100.0, 0.5) == (60.0, False)
    assert predicted_remaining(j, 200.0, 100.0, 0.5) == (100.0, True)
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)
    state.submit(j, 0.0)
    state.start(j, ((0, 1),), 0.0)
    w = job("w", 1, 1, 10)
    state.submit(w, 1.0)
    res = EtaEstimator(make_policy("fifo"), overrun=0.25).estimate(state, 200.0)
    assert res.by_id() == {"w": 250.0} and res.overrun == 1


def test_a_job_that_cannot_start_in_the_forward_run_gets_inf():
    spec = ClusterSpec.from_vc_sizes({"v": 2}, gpus_per_node=4)
    state = ClusterState(spec, new_queue=make_policy("fifo").new_queue)
    state.cordon(1)
    big = job("big", 0, 8, 10)
    state.submit(big, 0.0)
    res = EtaEstimator(make_policy("fifo")).estimate(state, 5.0)
    assert res.eta[big] == math.inf


def test_missing_predictions_use_the_given_predictor_and_are_counted():
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)
    a = Job("a", "v", 1, 0.0, 1000.0)   # no prediction
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    w = Job("w", "v", 1, 1.0, 1000.0)
    state.submit(w, 1.0)
    res = EtaEstimator(make_policy("fifo"), predict=lambda j: 70.0).estimate(state, 20.0)
    assert res.unpredicted == 2 and res.by_id() == {"w": 70.0}
    res = EtaEstimator(make_policy("fifo"), default_duration=40.0).estimate(state, 20.0)
    assert res.by_id() == {"w": 40.0}


def random_jobs(n: int, seed: int, span: float = 2000.0) -> list[Job]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        g = rng.choice([1, 1, 1, 2, 2, 4, 8, 12])
        out.append(job(f"j{i:03d}", round(rng.uniform(0, span)), g, rng.randint(20, 900)))
    return out


@pytest.mark.parametrize("placement", ["consolidate", "best-fit"])
def test_fifo_perfect_predictions_every_sampled_eta_is_the_actual_start(placement):
    # FIFO without backfill: later arrivals queue behind, so every ETA is exact at every sample
    jobs = random_jobs(80, seed=3)
    sampler = run_with_sampler(jobs, make_policy("fifo", placement), sample_times(jobs, 12), nodes=3)
    assert len(sampler.samples) > 40
    for s in sampler.samples:
        assert s.eta == pytest.approx(s.job.start_time, abs=1e-6), s.job.job_id


def test_qssf_perfect_priorities_after_the_last_arrival_every_eta_is_exact():
    jobs = random_jobs(60, seed=5, span=300.0)
    prio = {j.job_id: j.pred_duration for j in jobs}
    policy = make_policy("qssf", priorities=prio)
    sampler = run_with_sampler(jobs, policy, [301.0, 900.0, 2500.0], nodes=4)
    assert len(sampler.samples) > 20
    for s in sampler.samples:
        assert s.eta == pytest.approx(s.job.start_time, abs=1e-6), s.job.job_id


def test_qssf_with_its_online_estimator_runs_untouched_by_the_forward_runs():
    # the same run with and without ETA sampling makes the same decisions: the forward runs never
    # teach or advance the policy's estimator
    def starts(sample: bool) -> dict:
        jobs = random_jobs(120, seed=8, span=4000.0)
        for j in jobs:
            j.pred_duration = math.nan
        policy = make_policy("qssf")
        cluster = ClusterSpec.from_vc_sizes({"v": 2}, gpus_per_node=8)
        obs = (EtaSampler(EtaEstimator(policy), sample_times(jobs, 20)),) if sample else ()
        Simulator(cluster, policy, observers=obs).run(jobs)
        return {j.job_id: j.start_time for j in jobs}, obs

    plain, _ = starts(False)
    sampled, (sampler,) = starts(True)
    assert plain == sampled
    assert sampler.refreshes > 5 and all(s.eta >= s.at for s in sampler.samples)


def test_accuracy_rows_by_group_hand_checked():
    a, b, c = Job("a", "v", 1, 0, 1), Job("b", "v", 4, 0, 1), Job("c", "v", 16, 0, 1)
    a.start_time, b.start_time, c.start_time = 1000.0, 10000.0, 20000.0
    samples = [Sample(a, 0.0, 1050.0, 5000.0),        # error 50 s: within 10 % of 1000 s and within 1 h
               Sample(b, 0.0, 14000.0, 10000.0),      # error 4000 s: neither
               Sample(c, 0.0, math.inf, 21000.0)]     # never
    rows = {(r["method"][:7], r["group"]): r for r in accuracy_rows(samples)}
    fwd = rows[("forward", "all")]
    assert fwd["estimates"] == 3 and fwd["never"] == 1
    assert fwd["median_abs_error_h"] == pytest.approx(4000 / 3600)
    assert fwd["median_wait_h"] == pytest.approx(10000 / 3600)
    assert fwd["within_10pct"] == pytest.approx(1 / 3) and fwd["within_1h"] == pytest.approx(1 / 3)
    assert rows[("forward", "1 GPU")]["median_abs_error_h"] == pytest.approx(50 / 3600)
    assert rows[("naive (", "2-8 GPUs")]["median_abs_error_h"] == 0.0
    assert rows[("naive (", ">8 GPUs")]["within_1h"] == pytest.approx(1.0)


def test_sample_times_are_bounded():
    jobs = [job("a", 0, 1, 1), job("b", 100, 1, 1)]
    assert sample_times(jobs, 3) == [25.0, 50.0, 75.0]
    with pytest.raises(ValueError, match="--samples"):
        sample_times(jobs, 0)
    with pytest.raises(ValueError, match="--samples"):
        sample_times(jobs, 10**6)


def test_a_sample_that_finds_no_waiting_job_looks_again_at_the_next_instants():
    # sample time 0.5: the callback runs at the next transition (c's arrival at 1) and sees the
    # state of instant 0: nothing waits. It looks again at the next instant (d's arrival at 2):
    # c waits since 1, so the estimate is taken as of t = 1, the last change
    jobs = hand_jobs()
    sampler = run_with_sampler(jobs, make_policy("fifo"), [0.5])
    assert sampler.probes == 1 and sampler.refreshes == 1
    assert [(s.job.job_id, s.at, s.eta) for s in sampler.samples] == [("c", 1.0, 100.0)]


def test_true_duration_diagnostic_matches_perfect_predictions():
    jobs = random_jobs(50, seed=11)
    policy = make_policy("fifo")
    cluster = ClusterSpec.from_vc_sizes({"v": 3}, gpus_per_node=4)
    truth = EtaEstimator(policy, duration_of=lambda j: j._duration)
    for j in jobs:
        j.pred_duration = j._duration * 2  # wrong predictions: only the diagnostic is exact
    sampler = EtaSampler(EtaEstimator(policy), sample_times(jobs, 10), truth=truth)
    Simulator(cluster, policy, observers=(sampler,)).run(jobs)
    assert sampler.samples
    assert all(s.eta_true == pytest.approx(s.job.start_time) for s in sampler.samples)
    assert any(s.eta != pytest.approx(s.job.start_time) for s in sampler.samples)
    rows = {(r["method"], r["group"]): r for r in accuracy_rows(sampler.samples)}
    diag = rows[("forward simulation, true durations (diagnostic)", "all")]
    assert diag["median_abs_error_h"] == 0.0 and diag["within_10pct"] == 1.0


def test_calibration_scales_predictions_by_observed_over_predicted():
    from dlsched.sim.eta import Calibration

    cal = Calibration(min_jobs=2)
    cal.observe(100.0, 300.0)
    assert cal.factor == 1.0                  # too few finished jobs yet
    cal.observe(100.0, 100.0)
    cal.observe(math.nan, 5000.0)             # no prediction: not counted
    assert cal.jobs == 2 and cal.factor == 2.0
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)
    a = job("a", 0, 1, 999, pred=50)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    b, c = job("b", 1, 1, 999, pred=30), job("c", 2, 1, 999, pred=10)
    state.submit(b, 1.0)
    state.submit(c, 2.0)
    # a is expected to run 2 x 50 = 100 s (ends at 100); b then 2 x 30 = 60 s: c starts at 160
    assert EtaEstimator(make_policy("fifo"), calibration=cal).estimate(state, 10.0).by_id() == {"b": 100.0, "c": 160.0}
    cal_far = Calibration(min_jobs=1, hi=1.5)
    cal_far.observe(1.0, 100.0)
    assert cal_far.factor == 1.5              # clipped


def test_a_placement_with_an_index_gets_a_fresh_copy_and_stays_exact():
    # topo-aware keeps an index of the running jobs (a kernel observer): the forward run binds a
    # new one to the copied state; the real run's index is left alone
    rng = random.Random(2)
    jobs = []
    for i in range(40):
        j = Job(f"t{i}", "v", rng.choice([1, 2, 4, 8]), float(rng.randint(0, 600)), float(rng.randint(50, 400)),
                model_name="alexnet", batch_size=16)
        j.pred_duration = j._duration
        jobs.append(j)
    policy = make_policy("fifo", "topo-aware")
    cluster = ClusterSpec.from_vc_sizes({"v": 2}, gpus_per_node=8, topology="dgx1")
    sampler = EtaSampler(EtaEstimator(policy), sample_times(jobs, 8))
    Simulator(cluster, policy, SimConfig(check_invariants=True), observers=(sampler,)).run(jobs)
    assert sampler.samples
    for s in sampler.samples:
        assert s.eta == pytest.approx(s.job.start_time, abs=1e-6), s.job.job_id


def test_max_events_bounds_the_forward_run():
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)
    a = job("a", 0, 1, 10)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    for i, t in enumerate((1.0, 2.0, 3.0)):
        state.submit(job(f"w{i}", t, 1, 10), t)
    full = EtaEstimator(make_policy("fifo")).estimate(state, 5.0).by_id()
    assert full == {"w0": 10.0, "w1": 20.0, "w2": 30.0}
    cut = EtaEstimator(make_policy("fifo"), max_events=1).estimate(state, 5.0)
    assert cut.by_id() == {"w0": 10.0, "w1": math.inf, "w2": math.inf} and cut.events == 1


def test_a_policy_that_keeps_waking_with_nothing_running_cannot_loop_forever():
    from dlsched.sched.policies.fifo import FifoPolicy

    class Sleepy(FifoPolicy):
        """Never starts anything; asks for another pass a second later, forever."""
        name = "sleepy"

        def schedule(self, view, vc):
            view.wake_at(view.now + 1.0, vc)
            return iter(())

    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)
    w = job("w", 0, 1, 10)
    state.submit(w, 0.0)
    res = EtaEstimator(Sleepy(make_policy("fifo").placer)).estimate(state, 0.0)
    assert res.by_id() == {"w": math.inf}


def test_only_some_jobs_stops_the_forward_run_once_they_have_started():
    jobs = hand_jobs()
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 2}, gpus_per_node=4), new_queue=make_policy("fifo").new_queue)
    for j in jobs[:2]:
        state.submit(j, 0.0)
    state.start(jobs[0], ((0, 0b1111),), 0.0)
    state.start(jobs[1], ((1, 0b1111),), 0.0)
    for j in jobs[2:]:
        state.submit(j, j.submit_time)
    full = EtaEstimator(make_policy("fifo")).estimate(state, 10.0)
    assert full.by_id() == {"c": 100.0, "d": 130.0, "e": 130.0, "f": 140.0}
    part = EtaEstimator(make_policy("fifo")).estimate(state, 10.0, only=[jobs[2]])
    assert part.by_id() == {"c": 100.0} and part.events < full.events
