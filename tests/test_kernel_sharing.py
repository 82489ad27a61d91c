"""GPU sharing end to end: a speed model whose co-runner sets change mid-run, OOM failover,
and ground truth kept from policies."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job, OracleAccessError
from dlsched.kernel.decide import apply as apply_decision
from dlsched.models.failure import OutOfMemory
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.sched.protocols import PolicyBase
from dlsched.sim import SimConfig, SimulationError, Simulator
from dlsched.sim.config import no_overhead


def one_gpu(memory_mib: int = 16 * 1024) -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1, gpu_type=GpuType("T", memory_mib))


def config(**kw) -> SimConfig:
    return SimConfig(check_invariants=True, preemption_overhead=no_overhead, **kw)


def times(result) -> dict:
    return {j.job_id: (j.start_time, j.end_time) for j in result.jobs}


def test_time_slicing_by_hand():
    """A runs alone 0-20; B joins its GPU at 20: both at half speed. B (50 s of work) ends at
    120; A has 80 - 50 = 30 s left and runs alone again: it ends at 150."""
    a, b = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 20, 50)
    a.pred_gpu_mem_mib = b.pred_gpu_mem_mib = 4000
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                    speed_model=TimeSlicedSpeed()).run([a, b])
    assert times(res) == {"a": (0, 150), "b": (20, 120)}
    assert res.extra["avg_slowdown"] == pytest.approx((150 / 100 + 100 / 50) / 2)


def test_three_jobs_on_one_gpu_respeed_on_every_change():
    """Cap 3: A alone 0-10 (10 done), A+B 10-20 (5 each), A+B+C from 20 at 1/3 each.
    B has 45 left, C 30, A 85: C ends first at 20 + 90 = 110 (A 55 left, B 15 left);
    then halves: B ends at 110 + 30 = 140 (A 40 left); A ends at 180."""
    jobs = [Job("a", "v", 1, 0, 100), Job("b", "v", 1, 10, 50), Job("c", "v", 1, 20, 30)]
    for j in jobs:
        j.pred_gpu_mem_mib = 1000
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=3),
                    speed_model=TimeSlicedSpeed()).run(jobs)
    assert times(res) == {"a": (0, 180), "b": (10, 140), "c": (20, 110)}


def test_no_sharing_without_a_memory_prediction_or_above_the_cap():
    a, b = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 20, 50)
    a.pred_gpu_mem_mib = 4000  # b has no prediction: it never joins a busy GPU
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=2)).run([a, b])
    assert times(res) == {"a": (0, 100), "b": (100, 150)}
    a, b = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 20, 50)
    a.pred_gpu_mem_mib = b.pred_gpu_mem_mib = 4000
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config()).run([a, b])  # cap 1
    assert times(res) == {"a": (0, 100), "b": (100, 150)}


def test_oom_failure_and_resubmission_with_a_corrected_request():
    """Predictions say A and B fit one 16 GiB GPU (10,000 + 4,000 MiB); truly B needs 9,000:
    it crashes 10 s after joining (t=30), is resubmitted with its observed memory, no longer
    fits beside A, and runs alone when A ends at 100."""
    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=10_000)
    b = Job("b", "v", 1, 20, 50, gpu_mem_mib=9_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib = 10_000, 4_000
    failed = []
    policy = make_policy("fifo", share=True)
    inner = policy.job_failed
    policy.job_failed = lambda job, now, reason: (failed.append((job.job_id, now, reason)), inner(job, now, reason))
    res = Simulator(one_gpu(), policy, config(max_jobs_per_gpu=2), failure_model=OutOfMemory(delay=10)).run([a, b])
    assert times(res) == {"a": (0, 100), "b": (20, 150)}
    assert [(j, t) for j, t, _ in failed] == [("b", 30)] and "out of memory" in failed[0][2]
    assert b.failures == 1 and b.pred_gpu_mem_mib == 9_000 and b.queue_delay == 70
    assert res.extra["failures"] == 1 and res.extra["jobs_failed_at_least_once"] == 1


def test_the_crash_report_comes_with_the_crash_not_with_the_start():
    """B's start dooms it (10,000 + 9,000 true MiB on 16 GiB): the failure is due 10 s later, but
    its observed memory is known only once it has crashed -- a pass in between sees nothing."""
    import math

    from dlsched.kernel.decisions import Start
    from dlsched.kernel.state import ClusterState
    from dlsched.sim.physics import Physics

    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=10_000)
    b = Job("b", "v", 1, 20, 50, gpu_mem_mib=9_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib = 10_000, 4_000
    state = ClusterState(one_gpu(), new_queue=make_policy("fifo").new_queue, max_jobs_per_gpu=2)
    physics = Physics(state, failure_model=OutOfMemory(delay=10))
    for j, t in ((a, 0), (b, 20)):
        state.submit(j, t)
        apply_decision(state, Start(j, ((0, 1),), True), t, physics)
    (due, job, reason), = physics.failures_due
    assert (due, job) == (30, b) and math.isnan(b.observed_mem_mib)
    physics.failing(b, due, reason)
    state.fail(b, due, reason)
    assert b.observed_mem_mib == 9_000 and math.isnan(a.observed_mem_mib)


def test_the_failover_correction_does_not_leak_into_the_next_run():
    """The failover's corrected request is an observation of this run: simulating the same jobs
    again starts from the predictions (B joins A again and crashes again), not from 9,000 MiB."""
    runs = []
    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=10_000)
    b = Job("b", "v", 1, 20, 50, gpu_mem_mib=9_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib = 10_000, 4_000
    for _ in range(2):
        res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                        failure_model=OutOfMemory(delay=10)).run([a, b])
        runs.append((times(res), res.extra["failures"], b.pred_gpu_mem_mib, b.prior_gpu_mem_mib))
    assert runs[0] == runs[1] == ({"a": (0, 100), "b": (20, 150)}, 1, 9_000, 4_000)
    b.reset()
    assert b.pred_gpu_mem_mib == 4_000


def test_an_oom_observes_the_under_predicted_partner_too():
    """The culprit is the partner: A (predicted 4,000 MiB) truly needs 12,000; B (predicted 4,000,
    truly 5,000) joins at 10 (8,000 predicted fits 16 GiB), truly 17,000 > 16,384: B crashes at 15.
    The crash shows A's peak: A's prediction becomes 12,000 (an observation, prior kept), so B
    (corrected to 5,000) no longer fits beside A and waits for A's end at 100. Correcting B alone
    (4,000 + 5,000 fits) would re-place B beside A until max_failures."""
    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=12_000)
    b = Job("b", "v", 1, 10, 50, gpu_mem_mib=5_000)
    a.pred_gpu_mem_mib = b.pred_gpu_mem_mib = 4_000
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                    failure_model=OutOfMemory(delay=5)).run([a, b])
    assert times(res) == {"a": (0, 100), "b": (10, 150)}
    assert b.failures == 1 and a.failures == 0 and res.extra["failures"] == 1
    assert (a.pred_gpu_mem_mib, a.prior_gpu_mem_mib, a.observed_at) == (12_000, 4_000, 15.0)
    assert b.pred_gpu_mem_mib == 5_000
    a.reset()  # an observation, not a new prediction: the next run starts from the prior again
    assert (a.pred_gpu_mem_mib, a.observed_at) == (4_000, -1.0)


def test_an_oom_corrects_only_the_partners_it_shows_under_predicted():
    """Three jobs per GPU: A (predicted 4,000, truly 12,000) and B (predicted 6,000, truly 2,000)
    run; C (4,000, truly 5,000) joins at 20: 14,000 predicted, 19,000 true > 16,384, C crashes at
    25. A's prediction becomes its observed 12,000; B's over-prediction stays (the crash says
    nothing against it). C (now 5,000) no longer fits: 23,000 beside A and B, still 17,000 beside
    A once B ends at 50; it runs after A, 100-110."""
    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=12_000)
    b = Job("b", "v", 1, 0, 50, gpu_mem_mib=2_000)
    c = Job("c", "v", 1, 20, 10, gpu_mem_mib=5_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib, c.pred_gpu_mem_mib = 4_000, 6_000, 4_000
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=3),
                    failure_model=OutOfMemory(delay=5)).run([a, b, c])
    assert times(res) == {"a": (0, 100), "b": (0, 50), "c": (20, 110)}
    assert (a.pred_gpu_mem_mib, a.observed_at) == (12_000, 25.0)
    assert (b.pred_gpu_mem_mib, b.observed_at) == (6_000, -1.0)
    assert (c.failures, c.pred_gpu_mem_mib) == (1, 5_000)


def test_a_job_that_never_fits_its_gpu_stops_with_a_clear_error():
    big = Job("big", "v", 1, 0, 10, gpu_mem_mib=20_000)
    with pytest.raises(SimulationError, match="failed 3 times"):
        Simulator(one_gpu(), make_policy("fifo"), config(max_failures=2),
                  failure_model=OutOfMemory(delay=1)).run([big])


class _Peeker(PolicyBase):
    """A policy that reads truth off the job (its public truth names raise for every policy)."""

    name = "peeker"
    oracle = False
    preemptive = False

    def __init__(self, attr: str) -> None:
        from dlsched.registry import make_placer

        self.placer = make_placer("consolidate")
        self.attr = attr

    def new_queue(self):
        from dlsched.kernel.queues import ArrivalQueue

        return ArrivalQueue()

    def schedule(self, view, vc):
        from dlsched.kernel.decisions import Start

        job = vc.queue.head()
        getattr(job, self.attr)  # reaching for truth
        yield Start(job, self.placer.place(view, vc, job).placement)


@pytest.mark.parametrize("attr", ["duration", "remaining", "gpu_util", "gpu_mem_mib", "status"])
@pytest.mark.parametrize("oracle", [False, True])
def test_a_policy_reading_truth_off_the_job_fails_loudly(attr, oracle):
    """No switch: the job's truth names raise whatever runs; an oracle's grant is its view."""
    peeker = _Peeker(attr)
    peeker.oracle = oracle
    with pytest.raises(OracleAccessError, match="view.duration, view.remaining, view.measured"):
        Simulator(one_gpu(), peeker).run([Job("a", "v", 1, 0, 5)])


def test_policies_see_no_future_jobs():
    seen = []

    class Recording(PolicyBase):
        name = "rec"

        def __init__(self):
            from dlsched.registry import make_placer

            self.placer = make_placer("consolidate")

        def new_queue(self):
            from dlsched.kernel.queues import ArrivalQueue

            return ArrivalQueue()

        def prepare(self, view, *rest):
            assert not rest  # the backend hands over the view only, never the job list
            seen.append(len(view.state.jobs))

        def job_submitted(self, job, now):
            seen.append((job.job_id, now, len(view_jobs())))

        def schedule(self, view, vc):
            from dlsched.kernel.decisions import Start

            while (job := vc.queue.head()) is not None:
                fit = self.placer.place(view, vc, job)
                if not fit.fits:
                    return
                yield Start(job, fit.placement)

    sim = Simulator(one_gpu(), Recording())

    def view_jobs():
        return sim.state.jobs

    sim.run([Job("a", "v", 1, 0, 5), Job("b", "v", 1, 3, 5)])
    assert seen == [0, ("a", 0, 0), ("b", 3, 1)]


class _TruthReader(_Peeker):
    """Reads truth: through the kernel's state (``where="state"``: it keeps none) or through
    the view (``"view"``: the physics the engine hands an oracle's view)."""

    def __init__(self, attr: str, where: str) -> None:
        super().__init__(attr)
        self.where = where
        self.seen: list = []

    def schedule(self, view, vc):
        from dlsched.kernel.decisions import Start

        job = vc.queue.head()
        if self.where == "state":
            getattr(view.state, self.attr)
        elif self.attr == "speed_model":
            self.seen.append(view.speed_model())
        elif self.attr in ("duration", "remaining"):
            self.seen.append(getattr(view, self.attr)(job))
        else:  # measured: gpu_util, gpu_mem_mib, status
            self.seen.append(getattr(view.measured(job), self.attr))
        yield Start(job, self.placer.place(view, vc, job).placement)


@pytest.mark.parametrize("attr", ["speed_model", "gpu_true_mem", "failure_model", "failures_due",
                                  "preemption_overhead"])
@pytest.mark.parametrize("oracle", [False, True])
def test_the_kernel_state_holds_no_truth_for_any_policy(attr, oracle):
    reader = _TruthReader(attr, "state")
    reader.oracle = oracle
    with pytest.raises(AttributeError, match=attr):
        Simulator(one_gpu(), reader).run([Job("a", "v", 1, 0, 5)])


@pytest.mark.parametrize("attr", ["speed_model", "remaining", "duration", "gpu_util", "gpu_mem_mib", "status"])
def test_an_oracle_reads_truth_from_the_physics_through_its_view(attr):
    from dlsched.models.speed import TimeSlicedSpeed

    with pytest.raises(OracleAccessError, match="not an oracle"):
        Simulator(one_gpu(), _TruthReader(attr, "view")).run([Job("a", "v", 1, 0, 5)])
    reader = _TruthReader(attr, "view")
    reader.oracle = True  # the explicit grant
    model = TimeSlicedSpeed()
    job = Job("a", "v", 1, 0, 5, gpu_util=40.0, gpu_mem_mib=100.0, status="COMPLETED")
    sim = Simulator(one_gpu(), reader, speed_model=model)
    sim.run([job])
    expected = {"speed_model": model, "remaining": 5.0, "duration": 5, "gpu_util": 40.0, "gpu_mem_mib": 100.0,
                "status": "COMPLETED"}[attr]
    assert job.end_time == 5 and reader.seen == [expected]
    assert sim.view.truth is sim.physics
