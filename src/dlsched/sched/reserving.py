"""The part ``easy`` and ``conservative`` share: parameters, the queue order they borrow, estimates.

A reserving policy is a queue order (any non-preemptive ordering policy of the registry: fifo,
qssf, fairshare, las, sjf ...; its queue, hooks and observers are used as they are) plus a rule
for which later jobs may start ahead of a waiting one. The order's own pass is never run: the
subclass walks the order and decides. Estimates and the record of reservations are
:mod:`dlsched.sched.reservations`; the policies read the view, the jobs' requests (time limits)
and predictions only, never the truth, except with ``estimate=truth`` (then the policy is an
oracle: the view grants it the truth and the live service refuses it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from dlsched.core.job import Job
from dlsched.kernel.view import ClusterView
from dlsched.sched import order_table
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.overrun_stops import OverrunStops
from dlsched.sched.protocols import PolicyBase
from dlsched.sched.reservations import CORRECTIONS, ESTIMATES, Estimates, ReservationBook

OVERRUNS = ("run", "stop")


@dataclass(frozen=True, slots=True)
class BackfillParams:
    """The queue order, the run-time estimate, the EASY++ correction and what an overrun does."""

    order: str = field(default="fifo", metadata={
        "help": "easy/conservative: the queue order, any non-preemptive ordering policy (fifo, qssf, fairshare, "
                "las, sjf...)."})
    estimate: str = field(default="prediction", metadata={
        "help": "easy/conservative: run-time estimate: limit (the job's time limit), prediction (QSSF's online "
                "estimator), capped (prediction capped by the limit), truth (oracle)."})
    correction: str = field(default="off", metadata={
        "help": "easy/conservative: a running job past its estimate: off (taken to end now), double (EASY++: "
                "doubled until ahead), limit (moved to its time limit)."})
    on_overrun: str = field(default="run", metadata={
        "help": "easy/conservative: a backfilled job that outlives its estimate: run (the reservation moves); "
                "stop (checkpointed and re-queued once a reservation it was let in ahead of, plus stop_grace, is due "
                "and that job still cannot start)."})
    stop_grace: float = field(default=0.0, metadata={
        "help": "easy/conservative with on_overrun=stop: seconds after the reserved start at which an "
                "overrunning backfilled job is stopped."})
    lam: float = field(default=0.1, metadata={"help": "QSSF: weight of the rolling estimate P_R (1-lam on the GBDT)."})
    refit_every: float = field(default=86400.0,
                               metadata={"help": "QSSF: refit the GBDT every this many simulated s."})
    half_life: float = 7 * 86400.0

    def __post_init__(self) -> None:
        if self.estimate not in ESTIMATES:
            raise ValueError(f"--param estimate must be one of {', '.join(ESTIMATES)}, got {self.estimate!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"--param correction must be one of {', '.join(CORRECTIONS)}, got {self.correction!r}")
        if self.on_overrun not in OVERRUNS:
            raise ValueError(f"--param on_overrun must be run or stop, got {self.on_overrun!r}")
        if not (self.stop_grace >= 0.0 and math.isfinite(self.stop_grace)):
            raise ValueError(f"--param stop_grace must be a number of seconds >= 0, got {self.stop_grace!r}")
        order_policy(self.order)


def order_policy(name: str) -> type:
    """The ordering class ``name`` names; ValueError for one that is not a non-preemptive queue order."""
    POLICIES = order_table.policies()
    cls = POLICIES.get(name) if name in POLICIES else None
    if cls is None or not issubclass(cls, OrderingPolicy) or cls.preemptive or issubclass(cls, ReservingPolicy):
        usable = [n for n in POLICIES if _is_order(n)]
        raise ValueError(f"--param order={name!r} is not a queue order; choose from {', '.join(usable)}")
    return cls


def _is_order(name: str) -> bool:
    POLICIES = order_table.policies()
    try:
        cls = POLICIES[name]
    except (ImportError, AttributeError):   # pragma: no cover - a broken plug-in entry
        return False
    return isinstance(cls, type) and issubclass(cls, OrderingPolicy) and not cls.preemptive \
        and not issubclass(cls, ReservingPolicy)


class ReservingPolicy(PolicyBase):
    """Base of ``easy`` and ``conservative``: the borrowed order, estimates, the book."""

    name = "reserving"
    Params = BackfillParams
    reserves = True   # holds reservations: refused with queues that borrow (run/build.py)
    exclusive_only = True   # refuses a sharing placement (a shared GPU has no single job whose end frees it)

    @staticmethod
    def from_params(params: BackfillParams, context) -> dict:
        """The order's own options from the fields of the same name (its ``from_params`` when it has one)."""
        cls = order_policy(params.order)
        inner: dict = {}
        own = getattr(cls, "Params", None)
        if own is not None:
            names = {f.name for f in dataclasses.fields(own)}
            values = own(**{n: getattr(params, n) for n in names if hasattr(params, n)})
            build = getattr(cls, "from_params", None)
            inner = build(values, context) if build is not None else \
                {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
        opts = {"order": params.order, "estimate": params.estimate, "correction": params.correction,
                "on_overrun": params.on_overrun, "stop_grace": params.stop_grace, "order_options": inner}
        if params.estimate == "prediction" or params.estimate == "capped":
            opts.update(lam=params.lam, refit_every=params.refit_every, origin=context.origin)
        return opts

    def __init__(self, placer, backfill: bool = False, order: str = "fifo", estimate: str = "prediction",
                 correction: str = "off", on_overrun: str = "run", order_options: dict | None = None,
                 lam: float = 0.1, refit_every: float = 86400.0, origin=None, stop_grace: float = 0.0) -> None:
        if backfill:
            raise ValueError(f"{self.name} backfills by its reservations: leave out --backfill (greedy backfill)")
        if getattr(placer, "share", False):
            raise ValueError(f"{self.name}: reservations need exclusive GPUs (--max-jobs-per-gpu 1); a shared "
                             f"GPU has no single job whose end frees it")
        BackfillParams(order=order, estimate=estimate, correction=correction, on_overrun=on_overrun,
                       stop_grace=stop_grace)
        self.on_overrun, self.stop_grace = on_overrun, float(stop_grace)
        self.stops = OverrunStops(self.stop_grace)   # on_overrun=stop: the backfilled jobs to stop if they overrun
        self.placer = placer
        self.placement_name = placer.name
        self.order = order_policy(order)(placer, **(order_options or {}))
        self.estimates = Estimates(estimate, correction)
        self.oracle = estimate == "truth" or self.order.oracle
        self.book = ReservationBook()
        self.estimator = None
        self.own_estimator = False
        if estimate in ("prediction", "capped"):
            self.estimator = getattr(self.order, "estimator", None)
            if self.estimator is None:
                from dlsched.predictors.duration.online import OnlineDurationEstimator

                self.estimator = OnlineDurationEstimator(refit_every=refit_every, lam=lam, origin=origin)
                self.own_estimator = True

    # -- what the order brings --------------------------------------------------------------
    @property
    def observers(self) -> tuple:
        return tuple(getattr(self.order, "observers", ()))

    @property
    def needs_indexes(self) -> tuple[str, ...]:   # type: ignore[override]
        return tuple(getattr(self.order, "needs_indexes", ()))

    def new_queue(self):
        return self.order.new_queue()

    def key(self, job: Job):
        """The order's sort key (the live service ranks a waiting pod by it)."""
        return self.order.key(job)

    def prepare(self, view: ClusterView) -> None:
        self.order.prepare(view)
        if self.own_estimator:
            self.estimator.reset()
        self.book.clear()
        self.estimates.clear()
        self.stops.clear()

    def job_submitted(self, job: Job, now: float) -> None:
        hook = self.order.job_submitted
        if hook is not None:
            hook(job, now)
        if self.estimator is not None and math.isnan(job.pred_duration):
            self.estimator.estimate(job, now)

    def job_finished(self, job: Job, now: float) -> None:
        hook = self.order.job_finished
        if hook is not None:
            hook(job, now)
        if self.own_estimator:
            self.estimator.observe_finished(job, now)
        self.estimates.ended(job)

    def job_failed(self, job: Job, now: float, reason: str) -> None:
        self.order.job_failed(job, now, reason)

    def validate_trace(self, jobs: list[Job]) -> None:
        """The order's checks; ``estimate=limit`` needs a limit on every job (else one job without
        one would hold back everything behind it for ever)."""
        self.order.validate_trace(jobs)
        if self.estimates.kind == "limit":
            missing = [j.job_id for j in jobs if j.time_limit_s is None]
            if missing:
                raise ValueError(f"{self.name}: --param estimate=limit needs a time limit on every job; {len(missing)} "
                                 f"of {len(jobs)} have none (e.g. {missing[:3]}): give the trace a time_limit "
                                 f"column or draw limits with --time-limits")

    # -- shared by the passes ---------------------------------------------------------------
    def pass_order(self, view: ClusterView, vc) -> list[Job]:
        """The waiting jobs of ``vc`` in the order's order at this instant (the pass begins: the
        VC's earlier reservations are void)."""
        book = self.book
        if book.keep is not None:   # a bounded (live) book drops the records of jobs gone unstarted
            book.waiting(vc.vid, vc.queue)
        book.begin(vc.vid)
        begin = getattr(self.order, "begin_pass", None)
        if begin is not None:
            begin(view)
        queue = vc.queue
        reorder = queue.pass_order
        return reorder(view.now) if reorder is not None else list(queue)

    def summary(self) -> dict:
        """``summary.json``'s ``reservations`` entry (runner.run_one adds it)."""
        return self.book.summary(self.estimates.n_corrected)
