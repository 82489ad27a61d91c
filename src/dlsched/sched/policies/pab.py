"""Performance-aware bin packing (Horus §5.2's PAB baseline, after Gandiva/Optimus).

FIFO order; a job may join busy GPUs (the placement's capacity check, ``obp`` by default). After
a warm-up (60 s by default, the paper's 0-60 s) the scheduler looks at the job's *observed*
throughput -- in the simulator the kernel's current rate of the job, what a live system's
steps-per-second monitor reports -- and if it dropped by more than ``max_drop`` (50 %) against
running alone, the job is re-queued (preempted: it keeps its checkpoint) and from then on only
runs on idle GPUs, so that it does not bounce back next to the same partners.

The check runs in the scheduling pass the policy asks for at the end of the warm-up
(``view.wake_at``; the engine runs a requested pass even when nothing is pending).

**Profiling wait** (the paper's §6.1: PAB "incurs additional scheduling waiting time in order to
profile scheduled job's stable performance ... a total of n jobs multiply by T_wait"): after it
places a job the scheduler watches that job until it is stable, ``t_wait`` seconds (the warm-up,
60 s, by default), and places no other job of the VC meanwhile; the re-queue checks still run.
``t_wait=0`` gives the old, wait-free PAB; ``profile="shared"`` waits only after placements on
shared GPUs (the only ones the check can act on), ``"all"`` (default) after every placement, as
the paper counts it.

Preemption guards (``sched/preemption.py``): a job still inside its ``min_run_s`` when its check
comes due is checked again when the minimum run time ends; a job evicted ``max_evictions`` times
stays where it is. ``grace_s`` raises the simulator's preemption overhead to at least that.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field

from dlsched.core.job import Job, JobState
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.framework import PlacementPipeline
from dlsched.sched.policies.fifo import FifoPolicy
from dlsched.sched.preemption import GUARD_HELP, MIN_RUN, EvictionGuard, check_guards

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_RUNNING = JobState.RUNNING


@dataclass(frozen=True, slots=True)
class PabParams:
    """PAB's knobs: the warm-up (s) before the throughput check, the drop that re-queues a job,
    the profiling wait ``t_wait`` (s; None: the warm-up) and after which placements it applies
    (``all`` or ``shared``)."""

    warmup: float = field(default=60.0, metadata={"help": "pab: seconds a job runs before its throughput check."})
    max_drop: float = field(default=0.5, metadata={"help": "pab: the throughput drop (0-1) that re-queues a job."})
    t_wait: float | None = field(default=None, metadata={"help": "pab: the profiling wait in seconds (default: "
                                                                 "the warm-up)."})
    profile: str = field(default="all", metadata={"help": "pab: which placements are profiled: all or shared."})
    # -- preemption guards (sched/preemption.py) -----------------------------------------
    min_run_s: float = field(default=0.0, metadata={"help": GUARD_HELP["min_run_s"]})
    max_evictions: int | None = field(default=None, metadata={"help": GUARD_HELP["max_evictions"]})
    grace_s: float = field(default=0.0, metadata={"help": GUARD_HELP["grace_s"]})
    # -- end of preemption guards ----------------------------------------------------------

    def __post_init__(self) -> None:
        if not 0 <= self.warmup < float("inf"):
            raise ValueError(f"--param warmup must be a finite number >= 0 seconds, got {self.warmup}")
        if not 0 < self.max_drop < 1:
            raise ValueError(f"--param max_drop must be between 0 and 1 (exclusive), got {self.max_drop}")
        if self.t_wait is not None and not 0 <= self.t_wait < float("inf"):
            raise ValueError(f"--param t_wait must be a finite number >= 0 seconds, got {self.t_wait}")
        if self.profile not in ("all", "shared"):
            raise ValueError(f"--param profile must be 'all' or 'shared', got {self.profile!r}")
        check_guards(self.min_run_s, self.max_evictions, self.grace_s)


class PabPolicy(FifoPolicy):
    """PAB: co-locate by memory, re-queue a job whose observed throughput drops > 50 %."""

    name = "pab"
    Params = PabParams
    default_placement = "obp"
    # It yields Preempt (re-queues a running job) without being ``preemptive`` in the engine's
    # sense (no Helios 1-s tick): the live service refuses it for the Preempt.
    requeues_running = True
    Params = PabParams

    def __init__(self, placer, backfill: bool = False, warmup: float = 60.0, max_drop: float = 0.5,
                 t_wait: float | None = None, profile: str = "all", min_run_s: float = 0.0,
                 max_evictions: int | None = None, grace_s: float = 0.0) -> None:
        super().__init__(placer, backfill)
        self.guard = EvictionGuard(min_run_s, max_evictions, grace_s)
        if warmup < 0 or not 0 < max_drop < 1:
            raise ValueError(f"PAB needs warmup >= 0 s and 0 < max_drop < 1, got {warmup}, {max_drop}")
        if profile not in ("all", "shared"):
            raise ValueError(f"PAB's profile must be 'all' or 'shared', got {profile!r}")
        self.warmup = warmup
        self.max_drop = max_drop
        self.t_wait = warmup if t_wait is None else float(t_wait)
        if self.t_wait < 0:
            raise ValueError(f"PAB's t_wait must be >= 0 s, got {self.t_wait}")
        self.profile = profile
        self.profiling_until: dict[int, float] = {}  # VC id -> end of the current profiling wait
        self.exclusive = PlacementPipeline(getattr(placer, "scorers", [(placer, 1.0)]),
                                           getattr(placer, "filters", ()), share=False)
        self.due: dict[int, list[tuple[float, int, Job]]] = {}
        self.solo_only: set[Job] = set()
        self.requeued = 0

    def prepare(self, view: ClusterView) -> None:
        self.profiling_until.clear()
        self.due.clear()
        self.solo_only.clear()
        self.requeued = 0
        self.guard.reset()

    def _checks(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        now = view.now
        heap = self.due.get(vc.vid)
        guard = self.guard
        floor = 1.0 - self.max_drop
        later = []
        while heap and heap[0][0] <= now:
            _, seq, job = heapq.heappop(heap)
            if job.state is _RUNNING and job.run_seq == seq and job.speed < floor:
                why = guard.protection(job, now) if guard.active else None
                if why is not None:
                    guard.refuse(job, why)
                    if why == MIN_RUN:  # check again when its minimum run time ends
                        later.append((guard.protected_until(job), seq, job))
                    continue
                decision = guard.evict(job, f"pab: throughput {job.speed:.0%} of running alone, "
                                            f"below {floor:.0%}")
                if decision is not None:
                    self.solo_only.add(job)
                    self.requeued += 1
                    yield decision
        for item in later:
            heapq.heappush(heap, item)
            view.wake_at(item[0], vc)

    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        now = view.now
        yield from self._checks(view, vc)
        if self.profiling_until.get(vc.vid, -1.0) > now:
            return  # still profiling the job placed last: its pass asked for a wake-up at the end
        queue = vc.queue
        guard_starts = self.guard.min_run_s > 0
        for job in list(queue) if self.backfill else iter(queue.head, None):
            placer = self.exclusive if job in self.solo_only else self.placer
            fit = placer.place(view, vc, job)
            if fit.status is _FITS:
                if guard_starts:
                    self.guard.started(job, now)
                yield Start(job, fit.placement, fit.shared)
                if fit.shared:  # applied by now: run_seq is this start's
                    heapq.heappush(self.due.setdefault(vc.vid, []),
                                   (now + self.warmup, job.run_seq, job))
                    if self.warmup > 0:
                        view.wake_at(now + self.warmup, vc)
                if self.t_wait > 0 and (fit.shared or self.profile == "all"):
                    self.profiling_until[vc.vid] = now + self.t_wait
                    view.wake_at(now + self.t_wait, vc)
                    return
                continue
            if fit.status is _POSTPONE:
                yield Postpone(job, fit.reason)
            if not self.backfill:
                return
