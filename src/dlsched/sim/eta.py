"""Start-time estimates ("when will my job start?"): a forecast of the current state.

The estimate copies the cluster as it is now into a twin (:mod:`dlsched.sim.twin`: same nodes,
VCs, cordons, power, GPU-sharing cap, same placements of the running jobs) and runs the
simulator's engine on it under the *same* policy (:mod:`dlsched.sim.forecast`: its queue order
and its placement pipeline, through the kernel's handlers), with durations taken from
predictions only:

* a running job ends after its predicted duration minus the time it has run since its last start;
  a job that has outrun its prediction is expected to run ``overrun`` x its elapsed time more
  (long-running jobs tend to run long: a prediction that was too short says little else);
* a waiting job runs for its predicted duration (``job.pred_duration``: QSSF's estimator sets it)
  or, where it has none, what ``predict(job)`` says;
* a job with a max runtime (``time_limit_s``) is killed at its limit, as in a simulation.

Nothing of the ground truth is read: the twins' "true" durations *are* the predictions
(:func:`~dlsched.core.truth.forecast`). No job arrives in the forward run (later arrivals are
unknown), the policy's hooks are not called (its estimator must not learn from predicted ends)
and a placement plug-in that keeps an index gets a fresh copy bound to the twin. The ETA of a
waiting job is the time its twin starts; a job that never starts in the forward run (its VC
cannot hold it) gets ``inf``. With perfect predictions, no later arrivals and no ground-truth
speed effects the ETA equals the actual start (``tests/test_eta.py``).

**Queues that borrow.** When a :class:`~dlsched.kernel.quotas.QuotaManager` runs on the state (the
simulator installs one for queues that may borrow, docs/queues.md), the twin runs one too, as the
simulator does: after each instant's passes, ``rebalance`` lends idle GPUs to blocked heads and
reclaims them for lenders. The twin's manager gets the same queue tree and half-life, the decayed
usage each queue has at ``now`` (the order in which blocked queues borrow and are reclaimed) and
the loans of the jobs running on borrowed GPUs; a reclaimed twin keeps its work and redoes
``preemption_overhead(job)`` seconds (the run's checkpoint cost; none when not given). Without
the manager a job whose queue would borrow gets the start of fixed VCs: too late. ``queues=``
replaces the state's queues in the twin (a what-if on quotas, :mod:`dlsched.sim.whatif`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlsched.core.job import Job
from dlsched.kernel.quotas import (
    DEFAULT_HALF_LIFE,
    QueueSpec,
    QueueTree,
    QuotaManager,
    borrowing_possible,
    check_leaves_are_vcs,
)
from dlsched.kernel.state import ClusterState
from dlsched.sim.forecast import EtaResult, ForwardRun
from dlsched.sim.twin import (
    check_borrowing,
    copy_cordons,
    copy_job,
    copy_state,
    copy_usage,
    fork_policy,
    queue_specs_of,
    quota_manager_of,
)

__all__ = ["Calibration", "EtaEstimator", "EtaResult", "ForwardRun", "predicted_remaining", "quota_manager_of"]


class Calibration:
    """Scale for predicted durations so that their *sum* matches what finished jobs really ran.

    Duration predictors aim at a typical job (QSSF's are about right in the median and about 2.5x
    short in the sum on the built-in workload, whose durations are heavy-tailed), while a start
    time is a sum of the durations ahead. ``factor`` = run time of the finished jobs / their
    predictions (1 until ``min_jobs`` have finished; clipped to [``lo``, ``hi``])."""

    def __init__(self, min_jobs: int = 50, lo: float = 0.1, hi: float = 10.0) -> None:
        self.min_jobs, self.lo, self.hi = min_jobs, lo, hi
        self.jobs = 0
        self.predicted = 0.0
        self.actual = 0.0

    def observe(self, predicted: float, actual: float) -> None:
        """A finished job: its prediction and the time it really ran (an observation, not truth)."""
        if predicted > 0 and actual >= 0:  # NaN predictions compare False
            self.jobs += 1
            self.predicted += predicted
            self.actual += actual

    @property
    def factor(self) -> float:
        if self.jobs < self.min_jobs or self.predicted <= 0:
            return 1.0
        return min(self.hi, max(self.lo, self.actual / self.predicted))


def predicted_remaining(job: Job, now: float, duration: float, overrun: float) -> tuple[float, bool]:
    """(predicted remaining seconds, whether the job has outrun its prediction)."""
    since = job.run_since if job.run_since >= 0 else now
    elapsed = max(0.0, now - since)
    left = duration - elapsed
    if left > 0.0:
        return left, False
    return overrun * elapsed, True


class EtaEstimator:
    """Forward simulations of a state under one policy: ``estimate(state, now)`` -> :class:`EtaResult`.

    ``predict(job) -> seconds`` is used for jobs without a prediction of their own (default: the
    mean of the predictions the state holds, else ``default_duration``); a :class:`Calibration`
    scales every prediction. ``overrun``: see the
    module docstring. ``max_events``: a bound on the forward run's finish events (the jobs not
    started by then get ``inf``; None: no bound). ``duration_of(job) -> seconds`` replaces every
    prediction: only the accuracy experiment uses it, with the true durations, to tell how much of
    the error comes from predictions and how much from what the forward run cannot know.
    ``queues``/``half_life``: the queues of the forward run (None: those of the manager running
    on the state; see the module docstring); ``preemption_overhead(job)``: seconds a twin
    preempted in the forward run redoes."""

    def __init__(self, policy, predict: Callable[[Job], float] | None = None, overrun: float = 0.5,
                 default_duration: float = 3600.0, max_events: int | None = None,
                 duration_of: Callable[[Job], float] | None = None,
                 calibration: Calibration | None = None, resubmit: bool = False,
                 queues: tuple[QueueSpec, ...] | None = None, half_life: float | None = None,
                 preemption_overhead: Callable[[Job], float] | None = None) -> None:
        if not overrun >= 0:
            raise ValueError(f"overrun must be >= 0, got {overrun}")
        self.policy = policy
        self.predict = predict
        self.duration_of = duration_of   # replaces every prediction (experiments' true-duration diagnostic)
        self.calibration = calibration   # scales every prediction (None: as predicted)
        self.overrun = float(overrun)
        self.default_duration = float(default_duration)
        self.max_events = max_events
        # the copy's policy is not the one that queued the jobs (a what-if, sim/whatif.py): its
        # submission hook gives each waiting twin its own keys (QSSF's priority) from predictions
        self.resubmit = resubmit
        # None: the queues the state runs (its QuotaManager, if any); a tuple: these instead
        # (``()``: fixed VCs); half_life: theirs (None: the state manager's, else the default)
        self.queues = None if queues is None else tuple(queues)
        self.half_life = half_life
        self.preemption_overhead = preemption_overhead   # seconds a reclaimed twin redoes

    def _durations(self, jobs: Iterable[Job]) -> tuple[dict[Job, float], int]:
        if self.duration_of is not None:
            return {job: float(self.duration_of(job)) for job in jobs}, 0
        out: dict[Job, float] = {}
        missing: list[Job] = []
        for job in jobs:
            d = job.pred_duration
            if d >= 0:  # NaN (no prediction) compares False
                out[job] = float(d)
            else:
                missing.append(job)
        if missing:
            if self.predict is not None:
                for job in missing:
                    out[job] = max(0.0, float(self.predict(job)))
            else:
                fallback = sum(out.values()) / len(out) if out else self.default_duration
                for job in missing:
                    out[job] = fallback
        factor = self.calibration.factor if self.calibration is not None else 1.0
        if factor != 1.0:
            out = {job: d * factor for job, d in out.items()}
        return out, len(missing)

    def estimate(self, state: ClusterState, now: float, only: Iterable[Job] | None = None) -> EtaResult:
        """ETAs at ``now`` of every waiting job of ``state`` (or of those in ``only``)."""
        return self.snapshot(state, now, only).run()

    def snapshot(self, state: ClusterState, now: float, only: Iterable[Job] | None = None) -> ForwardRun:
        """Copy what the forward run needs from ``state`` (the live service holds its lock for this
        part only; :meth:`ForwardRun.run` touches nothing of the original)."""
        running = [j for vc in state.vcs for j in vc.running]
        waiting = sorted((j for vc in state.vcs for j in vc.queue), key=lambda j: j.enq_seq)
        durations, unpredicted = self._durations([*running, *waiting])
        twin = copy_state(state, cordons=False)   # cordoned after the running jobs restart below
        policy, indexes = fork_policy(self.policy, twin, now)
        quotas = self._quotas(state, twin, policy, now)
        new_queue = policy.new_queue
        for vc in twin.vcs:
            vc.queue = new_queue()
        run = ForwardRun(twin, policy, now, EtaResult(now, unpredicted=unpredicted), self.max_events, indexes,
                         quotas, self.preemption_overhead)
        if any(j.time_limit_s is not None for j in (*running, *waiting)):
            twin.add_observer(run.limits)   # max runtimes: armed at each start, the restarts below too
        hosts = state.hosts
        twin.begin(now)
        shared = twin.cap > 1
        vcs = twin.vcs
        submit, start, overrun = twin.submit, twin.start, self.overrun
        for job in running:
            left, over = predicted_remaining(job, now, durations[job], overrun)
            run.result.overrun += over
            twin_job = copy_job(job, left)
            twin_job.attained = job.attained_at(now)   # its runs so far, this one included (it restarts at now)
            twin_job.vc_state = vcs[job.vc_state.vid]
            submit(twin_job, now)
            host = hosts.get(job) if hosts else None
            if host is None:
                start(twin_job, job.placement, now, shared)
            else:   # it runs on GPUs another VC lends: the same loan in the copy
                twin.start_borrowed(twin_job, vcs[host.vid], job.placement, now)
                if quotas is not None:
                    quotas.adopt(twin_job)
            run.push_end(twin_job, now + left)
        copy_cordons(state, twin)
        origin = run.origin
        on_submit = getattr(policy, "job_submitted", None) if self.resubmit else None
        for job in waiting:
            twin_job = copy_job(job, durations[job])
            twin_job.vc_state = vcs[job.vc_state.vid]
            if on_submit is not None:
                on_submit(twin_job, now)
            submit(twin_job, now)
            origin[twin_job] = job
        run.wanted = set(only) if only is not None else None
        return run

    def _quotas(self, state: ClusterState, twin: ClusterState, policy, now: float) -> QuotaManager | None:
        """The copy's queue manager (made before any twin is submitted, so that it observes them
        all), or None: fixed VCs with no job on borrowed GPUs."""
        source = quota_manager_of(state)
        if self.queues is None:
            specs = queue_specs_of(source) if source is not None else ()
        else:
            specs = self.queues
        may_borrow = bool(specs) and borrowing_possible(specs)
        if not may_borrow and not state.hosts:
            if self.queues:   # given queues name VCs though none may borrow: a misspelt VC would change nothing
                check_leaves_are_vcs(QueueTree(specs), state)
            return None
        if may_borrow and self.queues is not None:   # the state's own manager was checked by its driver
            check_borrowing(policy, state)
        half_life = self.half_life or (source.half_life if source is not None else DEFAULT_HALF_LIFE)
        manager = QuotaManager(specs, twin, half_life)   # ValueError: a queue that names no VC, a cycle
        copy_usage(manager, source, [vc.name for vc in state.vcs], now)
        return manager
