"""The job record in four parts: the request, the predictions, the ground truth and the kernel's
run record.

* **request** (what was submitted; any policy may read it): ``job_id``, ``user``, ``name``,
  ``gpus``, ``submit_time`` and ``index`` (position in the trace) in slots; ``vc``, ``cpus``,
  ``model_name``, ``batch_size``, ``onnx_ref``, ``min_utility`` and the training metadata the
  resource predictors use -- ``optimizer`` ("" = the predictor's default, Adam), ``amp`` (mixed
  precision, default off), ``seq_len`` (0 = the model's own default), ``attention`` ("" = fused;
  eager / fused / memory_efficient), ``stack`` (software-stack label, "" = unknown) and the pod
  shape ``gpus_per_pod`` (0 = unknown: one piece, placed as the policy likes; k: the job is
  ``gpus // k`` pods of k GPUs, each on one node: a gang, ``dlsched.sched.pods``) and its max
  runtime ``time_limit_s`` (None = none; the kernel kills it once it has run that long,
  ``dlsched.kernel.limits``) -- in a shared :class:`JobSpec`.
* **predictions** (any policy may read and set them): ``pred_duration`` and ``priority`` in
  slots (queue orders read them on every pass); ``pred_gpu_util``, ``pred_gpu_mem_mib``, the
  priors an observation replaced at ``observed_at`` (-1: not yet; :mod:`dlsched.sim.observe`)
  and what failures revealed (``failures``, ``last_failure``, ``observed_mem_mib``) in a
  :class:`Predicted`.
* **ground truth** (what the simulated backend runs the job by): the true duration and the
  remaining run time (slots ``_duration``, ``_remaining``, ``_start_remaining``) and the
  measured utilisation (0-100), measured peak memory and final status in the trace (a shared
  :class:`Measured` in slot ``_measured``). It has one door, :mod:`dlsched.core.truth`, used by
  the loaders and workloads that supply it, the simulated backend (``dlsched.sim``) and its
  ground-truth models (``dlsched.models``), metrics and experiments. A job carries truth only
  where a trace or a workload supplied it: the live service's jobs have none (NaN). The public
  names ``duration``, ``remaining``, ``gpu_util``, ``gpu_mem_mib`` and ``status`` always raise
  :class:`OracleAccessError` -- whatever runs, with no switch to flip: a policy reads the
  predictions, an oracle policy its view's truth grant (``view.duration``, ``view.remaining``,
  ``view.measured``, ``view.speed_model``; :mod:`dlsched.kernel.view`), and an estimator the run
  time a *finished* job revealed (:func:`dlsched.core.truth.revealed_duration`, a per-job check).
  ``tests/test_truth_access.py`` checks statically that policies, predictors, the kernel and the
  live service neither import the truth module nor read the truth slots.
* **run record**, owned by the kernel (``dlsched.kernel.state``): state, times, placement,
  speed, sequence numbers, attained GPU-seconds -- all slots.

Why the split has this shape: a million jobs must fit in memory and the kernel's loop must not
slow down. What the kernel, the simulated backend or a queue order touches on every pass is a
slot (28 of them, 256 bytes a job; 46 and 400 before), the truth slots included: moving them to
an object of their own would cost a pointer hop on every finish the engine schedules and an
object per job. The rest lives in immutable NamedTuple side records read through properties
whose getter is a C ``attrgetter`` (no Python frame: the kernel loop runs no more bytecodes) and
written copy-on-write (a record is never changed in place). Equal request and truth records are
one object (the built-in workload's 1M jobs hold ~7,400 and 3); a job holds a
:class:`Predicted` of its own only once something was predicted or observed for it.
"""
from __future__ import annotations

from enum import IntEnum
from operator import attrgetter
from typing import NamedTuple


class OracleAccessError(PermissionError):
    """Something reached for ground truth through a door that does not lead to it: a job's public
    truth name, a view's truth without the oracle grant, or an unfinished job's run time."""


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


_CREATED = JobState.CREATED
_NAN = float("nan")


class JobSpec(NamedTuple):
    """The request beyond what the kernel reads on every pass: the VC (read once, when the job is
    bound to it), CPUs and how the job trains (what the resource and duration predictors read).
    Immutable and shared: jobs that asked for the same thing hold one record (the built-in
    workload's 1M jobs hold ~7,400)."""

    vc: str = ""
    cpus: int = 0
    model_name: str = ""
    batch_size: int = 0
    onnx_ref: str = ""
    min_utility: float = _NAN
    optimizer: str = ""
    amp: bool = False
    seq_len: int = 0
    attention: str = ""
    stack: str = ""
    gpus_per_pod: int = 0   # the pod shape: 0 unknown (one piece), k = pods of k GPUs, one node each
    time_limit_s: float | None = None   # max runtime: killed when it has run this long (None: no limit)


class Measured(NamedTuple):
    """Ground truth beyond the run time: measured utilisation (0-100), measured peak memory and
    the trace's final status. Immutable and shared like :class:`JobSpec`."""

    gpu_util: float = _NAN
    gpu_mem_mib: float = _NAN
    status: str = ""


class Predicted(NamedTuple):
    """Predicted GPU utilisation and memory, and what running the job revealed to correct them:
    the predictions an observation replaced (:mod:`dlsched.sim.observe`: the priors and when,
    ``observed_at`` -1: never), how many starts ended in a failure (each one an attempt), the
    last failure's reason and the memory seen when it failed (e.g. an OOM report). A job gets
    one of its own once any of these is set; until then it shares "nothing predicted"."""

    pred_gpu_util: float = _NAN
    pred_gpu_mem_mib: float = _NAN
    prior_gpu_util: float = _NAN
    prior_gpu_mem_mib: float = _NAN
    observed_at: float = -1.0
    failures: int = 0
    last_failure: str = ""
    observed_mem_mib: float = _NAN


NO_SPEC, NO_MEASURE, NO_PREDICTION = JobSpec(), Measured(), Predicted()
# side slot -> (record type, its shared "nothing known" value)
SIDE_RECORDS: dict[str, tuple[type, tuple]] = {
    "_spec": (JobSpec, NO_SPEC), "_measured": (Measured, NO_MEASURE),
    "_predicted": (Predicted, NO_PREDICTION),
}
_INTERNED: dict[tuple, tuple] = {}
_INTERN_MAX = 1 << 16  # distinct records kept for sharing; past it the table starts afresh


def intern(record: tuple) -> tuple:
    """The shared record equal to ``record`` with the same value types (1 and 1.0 stay apart),
    so that jobs which asked for the same thing cost one record."""
    if len(_INTERNED) >= _INTERN_MAX:
        _INTERNED.clear()
    return _INTERNED.setdefault((record, tuple(map(type, record))), record)


_BY_VC: dict[str, JobSpec] = {}
_CHANGED: dict[tuple, tuple] = {}  # (field, value, record, their types) -> the shared record with that change


def _vc_spec(vc: str) -> JobSpec:
    """The shared request record of a job that asked for nothing beyond its VC."""
    spec = _BY_VC.get(vc)
    if spec is None:
        if len(_BY_VC) >= _INTERN_MAX:
            _BY_VC.clear()
        spec = _BY_VC[vc] = intern(NO_SPEC._replace(vc=vc))
    return spec


def _side(slot: str, field: str, shared: bool) -> property:
    """Public name ``field`` of the side record in ``slot``: read in C, written copy-on-write (the
    shared record is never changed). A ``shared`` record's change is shared too (moving every job
    to one VC keeps one record per kind), memoised: such a change is made for many jobs at once."""
    def set_(self: Job, value) -> None:
        setattr(self, slot, getattr(self, slot)._replace(**{field: value}))

    def set_shared(self: Job, value) -> None:
        old = getattr(self, slot)
        key = (field, value, type(value), old, tuple(map(type, old)))  # types: 1 and 1.0 stay apart
        record = _CHANGED.get(key)
        if record is None:
            if len(_CHANGED) >= _INTERN_MAX:
                _CHANGED.clear()
            record = _CHANGED[key] = intern(old._replace(**{field: value}))
        setattr(self, slot, record)

    return property(attrgetter(f"{slot}.{field}"), set_shared if shared else set_,
                    doc=f"``{field}`` of the job's {slot[1:]} record.")


class _Hidden:
    """A public truth name of :class:`Job`: reading or writing it always raises
    :class:`OracleAccessError`, for every policy and every driver (no switch turns it off). The
    message says where the value may be had instead."""

    __slots__ = ("name", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _refuse(self, job: Job) -> OracleAccessError:
        return OracleAccessError(
            f"the {self.what} of job {job.job_id} is ground truth, not a field of the job: a policy "
            f"reads its predictions (pred_duration, pred_gpu_util, pred_gpu_mem_mib), an oracle policy "
            f"(oracle = True) its view's truth (view.duration, view.remaining, view.measured), an "
            f"estimator the run time a finished job revealed (dlsched.core.truth.revealed_duration); "
            f"the simulated backend, loaders and experiments use dlsched.core.truth.{self.name}")

    def __get__(self, job: Job | None, owner: type | None = None):
        if job is None:
            return self
        raise self._refuse(job)

    def __set__(self, job: Job, value) -> None:
        raise self._refuse(job)


class Job:
    """One job: the kernel's handle on its request, predictions, truth and run record.

    ``__slots__`` keeps a million of them small and attribute access fast; what the kernel reads on
    every pass is a slot, the rest lives in the shared side records (:data:`SIDE_RECORDS`), read
    through properties of the same public names."""

    __slots__ = (
        # request (what was submitted); its VC and the rest in _spec
        "index", "job_id", "user", "name", "gpus", "submit_time", "_spec",
        # predictions: what queue orders read; GPU utilisation/memory and observation priors in _predicted
        "pred_duration", "priority", "_predicted",
        # ground truth, read through dlsched.core.truth only (the public names below always raise);
        # measured utilisation, memory and status in _measured
        "_duration", "_remaining", "_start_remaining", "_measured",
        # the kernel's run record (owned by dlsched.kernel.state); failures (count, last reason,
        # memory seen) live in _predicted, which they correct
        "state", "start_time", "end_time", "run_since", "preemptions",
        "queue_delay", "wait_since", "placement", "speed", "epoch", "enq_seq", "run_seq", "vc_state",
        "attained",
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
        gpu_util: float = _NAN,
        gpu_mem_mib: float = _NAN,
        min_utility: float = _NAN,
        index: int = -1,
        optimizer: str = "",
        amp: bool = False,
        seq_len: int = 0,
        attention: str = "",
        stack: str = "",
        gpus_per_pod: int = 0,
        time_limit_s: float | None = None,
    ) -> None:
        self.index = index
        self.job_id = job_id
        self.user = user
        self.name = name
        self.gpus = gpus
        self.submit_time = submit_time
        self._duration = duration
        if cpus or model_name or batch_size or onnx_ref or min_utility == min_utility or optimizer or amp \
                or seq_len or attention or stack or gpus_per_pod or time_limit_s is not None:
            if gpus_per_pod and (gpus_per_pod < 0 or gpus % gpus_per_pod):
                raise ValueError(f"job {job_id}: {gpus} GPUs are not whole pods of gpus_per_pod={gpus_per_pod}")
            self._spec = intern(JobSpec(vc, cpus, model_name, batch_size, onnx_ref, min_utility, optimizer, amp,
                                        seq_len, attention, stack, gpus_per_pod, time_limit_s))
        else:
            self._spec = _BY_VC.get(vc) or _vc_spec(vc)
        if status or gpu_util == gpu_util or gpu_mem_mib == gpu_mem_mib:  # NaN != NaN: nothing measured
            self._measured = intern(Measured(gpu_util, gpu_mem_mib, status))
        else:
            self._measured = NO_MEASURE
        self.pred_duration = _NAN
        self.priority = _NAN
        self._predicted = NO_PREDICTION
        self.reset()

    vc = _side("_spec", "vc", True)
    cpus = _side("_spec", "cpus", True)
    model_name = _side("_spec", "model_name", True)
    batch_size = _side("_spec", "batch_size", True)
    onnx_ref = _side("_spec", "onnx_ref", True)
    min_utility = _side("_spec", "min_utility", True)
    optimizer = _side("_spec", "optimizer", True)
    amp = _side("_spec", "amp", True)
    seq_len = _side("_spec", "seq_len", True)
    attention = _side("_spec", "attention", True)
    stack = _side("_spec", "stack", True)
    gpus_per_pod = _side("_spec", "gpus_per_pod", True)
    time_limit_s = _side("_spec", "time_limit_s", True)
    pred_gpu_util = _side("_predicted", "pred_gpu_util", False)
    pred_gpu_mem_mib = _side("_predicted", "pred_gpu_mem_mib", False)
    prior_gpu_util = _side("_predicted", "prior_gpu_util", False)
    prior_gpu_mem_mib = _side("_predicted", "prior_gpu_mem_mib", False)
    observed_at = _side("_predicted", "observed_at", False)
    failures = _side("_predicted", "failures", False)
    last_failure = _side("_predicted", "last_failure", False)
    observed_mem_mib = _side("_predicted", "observed_mem_mib", False)
    # ground truth has no public name on the job (dlsched.core.truth is its door)
    duration = _Hidden("true duration")
    remaining = _Hidden("true remaining run time")
    gpu_util = _Hidden("measured GPU utilisation")
    gpu_mem_mib = _Hidden("measured GPU memory")
    status = _Hidden("final status")

    def reset(self) -> None:
        """Clear runtime state so the same job list can be simulated again."""
        self.state = _CREATED
        self.start_time = -1.0
        self.end_time = -1.0
        self._remaining = float(self._duration)
        self._start_remaining = self._remaining  # remaining time at the last start (a failure returns to it)
        self.run_since = -1.0
        self.preemptions = 0
        self.queue_delay = 0.0
        self.wait_since = -1.0
        self.placement = None
        self.speed = 1.0
        self.epoch = 0      # bumped whenever a scheduled finish/failure event becomes stale
        self.enq_seq = 0    # order of (re-)entry into the pending queue
        self.run_seq = 0    # order of the last start
        self.vc_state = None  # the kernel's VcState of this job's VC while it is scheduled
        self.attained = 0.0      # GPU-seconds of its runs that were cut short (booked at preempt / fail)
        p = self._predicted  # no failure seen; an observation that replaced predictions: back to the priors
        if p is not NO_PREDICTION and (p.observed_at >= 0 or p.failures or p.last_failure
                                       or p.observed_mem_mib == p.observed_mem_mib):
            p = Predicted(p.prior_gpu_util, p.prior_gpu_mem_mib) if p.observed_at >= 0 else \
                Predicted(p.pred_gpu_util, p.pred_gpu_mem_mib, p.prior_gpu_util, p.prior_gpu_mem_mib)
            self._predicted = NO_PREDICTION if p == NO_PREDICTION else p

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

