"""The job record: what a policy may see, the ground truth it may not, and runtime state.

A job carries three kinds of fields:

* **request and predictions** (any policy may read them): ``job_id``, ``user``, ``name``,
  ``vc``, ``gpus``, ``cpus``, ``submit_time``, ``model_name``, ``batch_size``, ``onnx_ref``,
  ``min_utility``, ``pred_duration``, ``pred_gpu_util``, ``pred_gpu_mem_mib``, ``priority``, and the
  training metadata the resource predictors use: ``optimizer`` ("" = the predictor's default,
  Adam), ``amp`` (mixed precision, default off), ``seq_len`` (0 = the model's own default),
  ``attention`` ("" = fused; eager / fused / memory_efficient) and ``stack`` (software-stack
  label for the memory context, "" = unknown).
  ``prior_gpu_util`` / ``prior_gpu_mem_mib`` keep the predictions an observation replaced at
  ``observed_at`` (-1: not yet; :mod:`dlsched.sim.observe`).
* **ground truth** (the engine and the ground-truth models read it; a policy only through an
  explicit oracle grant): ``duration``, ``remaining``, ``gpu_util`` (measured, 0-100),
  ``gpu_mem_mib`` (measured peak) and ``status`` (final status in the trace). They live in
  underscore slots; the public names are guarded properties. While a simulation runs a policy
  that is not an oracle, :func:`truth_hidden` is active and reading one of them for a job that
  has not finished raises :class:`OracleAccessError` (a finished job's run time has been
  observed, so estimators may learn from it).
* **runtime state**, owned by the kernel (``dlsched.kernel.state``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum


class OracleAccessError(PermissionError):
    """A policy that is not an oracle reached for ground truth."""


class JobState(IntEnum):
    """Life cycle of a job inside one simulation or the live service.

    ``ASSUMED`` holds resources before the backend confirmed the start (the live service's
    bind); the simulator assumes and confirms in one step.
    """

    CREATED = 0
    PENDING = 1
    RUNNING = 2
    FINISHED = 3
    ASSUMED = 4


_FINISHED = JobState.FINISHED
_CREATED = JobState.CREATED
_NAN = float("nan")


def _truth(slot: str, what: str) -> property:
    """A guarded public name for the ground-truth slot ``slot``."""
    def get(self: Job):
        if Job.truth_is_hidden and self.state is not _FINISHED:
            raise OracleAccessError(f"the policy is not an oracle: the {what} of job {self.job_id} is hidden "
                                    "(use its predictions, or declare the policy an oracle)")
        return getattr(self, slot)

    def set_(self: Job, value) -> None:
        setattr(self, slot, value)

    return property(get, set_, doc=f"Ground truth: {what} (guarded while a non-oracle policy runs).")


class Job:
    """One job. ``__slots__`` keeps a million of them small and attribute access fast."""

    truth_is_hidden = False  # class-wide switch, flipped by :func:`truth_hidden`

    __slots__ = (
        "index", "job_id", "user", "name", "vc", "gpus", "cpus", "submit_time",
        "model_name", "batch_size", "onnx_ref", "min_utility",
        "pred_duration", "pred_gpu_util", "pred_gpu_mem_mib", "priority", "optimizer", "amp", "seq_len",
        "attention", "stack",
        # ground truth (guarded public names below)
        "_duration", "_remaining", "_start_remaining", "_gpu_util", "_gpu_mem_mib", "_status",
        # runtime state (owned by the kernel)
        "state", "start_time", "end_time", "run_since", "preemptions", "failures",
        "queue_delay", "wait_since", "placement", "speed", "epoch", "enq_seq", "run_seq", "vc_state",
        "last_failure", "observed_mem_mib", "attained",
        # predictions replaced by observation (dlsched.sim.observe): the priors and when (-1: never)
        "prior_gpu_util", "prior_gpu_mem_mib", "observed_at",
    )

    def __init__(
        self,
        job_id: str,
        vc: str,
        gpus: int,
        submit_time: float,
        duration: float,
        *,
        user: str = "",
        name: str = "",
        cpus: int = 0,
        status: str = "",
        model_name: str = "",
        batch_size: int = 0,
        onnx_ref: str = "",
        gpu_util: float = float("nan"),
        gpu_mem_mib: float = float("nan"),
        min_utility: float = float("nan"),
        index: int = -1,
        optimizer: str = "",
        amp: bool = False,
        seq_len: int = 0,
        attention: str = "",
        stack: str = "",
    ) -> None:
        self.index = index
        self.job_id = job_id
        self.user = user
        self.name = name
        self.vc = vc
        self.gpus = gpus
        self.cpus = cpus
        self.submit_time = submit_time
        self._duration = duration
        self._status = status
        self.model_name = model_name
        self.batch_size = batch_size
        self.onnx_ref = onnx_ref
        self._gpu_util = gpu_util
        self._gpu_mem_mib = gpu_mem_mib
        self.min_utility = min_utility
        self.optimizer = optimizer
        self.amp = amp
        self.seq_len = seq_len
        self.attention = attention
        self.stack = stack
        self.pred_duration = _NAN
        self.pred_gpu_util = _NAN
        self.pred_gpu_mem_mib = _NAN
        self.priority = _NAN
        self.prior_gpu_util = self.prior_gpu_mem_mib = _NAN
        self.observed_at = -1.0
        self.reset()

    duration = _truth("_duration", "true duration")
    remaining = _truth("_remaining", "true remaining run time")
    gpu_util = _truth("_gpu_util", "measured GPU utilisation")
    gpu_mem_mib = _truth("_gpu_mem_mib", "measured GPU memory")
    status = _truth("_status", "final status")

    def reset(self) -> None:
        """Clear runtime state so the same job list can be simulated again."""
        self.state = _CREATED
        self.start_time = -1.0
        self.end_time = -1.0
        self._remaining = float(self._duration)
        self._start_remaining = self._remaining  # remaining time at the last start (a failure returns to it)
        self.run_since = -1.0
        self.preemptions = 0
        self.failures = 0        # starts that ended in a failure (each one an attempt)
        self.queue_delay = 0.0
        self.wait_since = -1.0
        self.placement = None
        self.speed = 1.0
        self.epoch = 0      # bumped whenever a scheduled finish/failure event becomes stale
        self.enq_seq = 0    # order of (re-)entry into the pending queue
        self.run_seq = 0    # order of the last start
        self.vc_state = None  # the kernel's VcState of this job's VC while it is scheduled
        self.last_failure = ""
        self.observed_mem_mib = _NAN  # memory seen when the job failed (e.g. OOM report)
        self.attained = 0.0      # GPU-seconds of its runs that were cut short (booked at preempt / fail)
        if self.observed_at >= 0:  # an observation replaced the predictions: back to the priors
            self.pred_gpu_util, self.pred_gpu_mem_mib = self.prior_gpu_util, self.prior_gpu_mem_mib
            self.prior_gpu_util = self.prior_gpu_mem_mib = _NAN
            self.observed_at = -1.0

    def attained_at(self, now: float) -> float:
        """GPU-seconds the job has held GPUs by ``now`` over all its runs: the runs cut short
        (``attained``, booked by the kernel at preempt and fail) plus the current or the last run
        (to ``now`` while it runs, to its end once finished). The finish books nothing: it is the
        simulator's hottest transition, and the last run is known from ``run_since``/``end_time``."""
        state = self.state
        if state is JobState.RUNNING or state is JobState.ASSUMED:
            return self.attained + self.gpus * max(now - self.run_since, 0.0)
        if state is JobState.FINISHED and self.run_since >= 0:
            return self.attained + self.gpus * max(self.end_time - self.run_since, 0.0)
        return self.attained

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (f"Job({self.job_id!r}, vc={self.vc!r}, gpus={self.gpus}, submit={self.submit_time}, "
                f"state={self.state.name})")


@contextmanager
def truth_hidden(hide: bool = True) -> Iterator[None]:
    """Hide ground truth from policies for the duration of the block (restored afterwards)."""
    before = Job.truth_is_hidden
    Job.truth_is_hidden = hide
    try:
        yield
    finally:
        Job.truth_is_hidden = before
