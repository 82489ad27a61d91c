"""The simulated backend's physics: how fast a running job progresses and when it crashes.

The kernel (:class:`~dlsched.kernel.state.ClusterState`) only books occupancy and the run record;
what a start or a stop *does* to the jobs' ground truth is decided here, by the simulated driver,
after each transition: a started job's rate under the speed model (and its co-runners' re-rates),
a failure the failure model arms, the work booked on a stop (``_settle``), the preemption
overhead, the progress a crash loses. The live service has none of this: its jobs run for real.

Truth lives in the jobs' truth slots (``_remaining``: solo seconds left as of ``run_since``;
``speed``, the current rate, is the run record's), written only here while a run goes on: the
simulated side owns the truth, and this hot loop reads and writes the slots by name (everyone else
through :mod:`dlsched.core.truth`). Oracle views read it through :meth:`duration`,
:meth:`remaining`, :meth:`measured` and :attr:`speed_model` (the engine hands this object to an
oracle's view as its ``truth``).

Every method runs *after* the kernel's transition. A stop's co-runners are found from the
placement recorded at the start (the kernel clears ``job.placement`` on release): the other
holders of those GPUs are the same jobs, in the same order, as before the release.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dlsched.core.job import Job, JobState, Measured
from dlsched.kernel.state import ClusterState
from dlsched.models.failure import true_gpu_mem

_RUNNING, _FINISHED = JobState.RUNNING, JobState.FINISHED
_NOTHING: tuple = ()


class Physics:
    """Ground truth of one simulated run over ``state``: optional speed model, failure model
    and preemption overhead (seconds a preempted job redoes)."""

    __slots__ = ("state", "speed_model", "failure_model", "overhead", "plain", "failures_due", "placed")

    def __init__(self, state: ClusterState, speed_model=None, failure_model=None,
                 preemption_overhead: Callable[[Job], float] | None = None) -> None:
        self.state = state
        self.speed_model = speed_model
        self.failure_model = failure_model
        self.overhead = preemption_overhead
        # no model: every job runs at its solo speed, a start or finish moves no other job
        self.plain = speed_model is None and failure_model is None
        self.failures_due: list[tuple[float, Job, str]] = []  # (time, job, reason), drained by the backend
        self.placed: dict[Job, tuple] = {}  # speed model: running job -> placement (its co-runners after a stop)

    # -- truth, for the engine and oracle views ---------------------------------------------
    @staticmethod
    def duration(job: Job) -> float:
        """True duration of ``job`` (solo seconds)."""
        return job._duration

    @staticmethod
    def measured(job: Job) -> Measured:
        """Measured utilisation, peak memory and final status of ``job``."""
        return job._measured

    def remaining(self, job: Job, now: float) -> float:
        """True remaining run time of ``job`` at ``now`` (solo seconds)."""
        if job.state is _RUNNING:
            left = job._remaining - (now - job.run_since) * job.speed
            return left if left > 0.0 else 0.0
        return 0.0 if job.state is _FINISHED else job._remaining

    def gpu_true_mem(self, node: int, gpu: int) -> float:
        """True memory of the GPU's holders (MiB)."""
        return true_gpu_mem(self.state, node, gpu)

    # -- after each kernel transition --------------------------------------------------------
    def started(self, job: Job, now: float) -> Sequence[Job]:
        """``job`` started: a failure may be armed (``failures_due``), the job gets its rate and
        co-runners whose set changed are re-rated. Returns the jobs whose finish moved, the
        started job first."""
        job._start_remaining = job._remaining  # a crash returns here
        if self.failure_model is not None:
            self.failures_due.extend(self.failure_model.on_start(job, self.state, now))
        model = self.speed_model
        if model is None:
            return (job,)
        self.placed[job] = job.placement
        job.speed = model.rate(job, self.state)
        return [job, *self._respeed(self._co_runners(job, model.scope), now)]

    def finished(self, job: Job, now: float) -> Sequence[Job]:
        """``job`` completed: its co-runners whose rate changed (their finish moves)."""
        if self.speed_model is None:
            return _NOTHING
        return self._respeed(self._co_runners(job, self.speed_model.scope), now)

    def preempted(self, job: Job, now: float) -> Sequence[Job]:
        """``job`` was checkpointed and stopped: book its work, add the overhead it redoes;
        returns co-runners whose rate changed."""
        self._settle(job, now)
        if self.overhead is not None:
            job._remaining += self.overhead(job)
        return self._stopped(job, now)

    def failing(self, job: Job, now: float, reason: str) -> None:
        """``job`` crashes now (before the kernel frees its GPUs): the failure model reads the
        crash report (who filled the GPU)."""
        if self.failure_model is not None:
            self.failure_model.failed(job, self.state, now, reason)

    def failed(self, job: Job, now: float) -> Sequence[Job]:
        """``job`` crashed and was stopped: its progress since the start is lost; returns
        co-runners whose rate changed."""
        job._remaining = job._start_remaining
        return self._stopped(job, now)

    def _stopped(self, job: Job, now: float) -> Sequence[Job]:
        job.speed = 1.0
        model = self.speed_model
        if model is None:
            return _NOTHING
        affected = self._co_runners(job, model.scope)
        return self._respeed(affected, now) if affected else _NOTHING

    # -- speed bookkeeping ----------------------------------------------------------------------
    def _co_runners(self, job: Job, scope: str) -> list[Job]:
        """Running jobs on ``job``'s node (``scope="node"``) or GPUs (``"gpu"``) of its placement;
        a stopped job's placement is the one recorded at its start."""
        placement = job.placement if job.state is _RUNNING else self.placed.pop(job, None)
        holders = self.state.node_holders
        seen: dict[Job, None] = {}
        for node, mask in placement or ():
            for other, m in holders[node].items():
                if other is not job and (scope == "node" or m & mask):
                    seen[other] = None
        return list(seen)

    @staticmethod
    def _settle(job: Job, now: float) -> None:
        """Book the work done since ``run_since`` into the remaining time."""
        job._remaining -= (now - job.run_since) * job.speed
        if job._remaining < 0.0:
            job._remaining = 0.0
        job.run_since = now

    def _respeed(self, jobs: list[Job], now: float) -> list[Job]:
        model, state = self.speed_model, self.state
        changed = []
        for other in jobs:
            if other.state is not _RUNNING:
                continue
            new = model.rate(other, state)
            if new != other.speed:
                self._settle(other, now)
                other.speed = new
                other.epoch += 1
                changed.append(other)
        return changed
