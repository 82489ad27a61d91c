"""Shortest remaining time first with the true remaining time (oracle, preemptive).

Every pass ranks pending and running jobs of the VC by remaining time (pending first on
ties, each in queue/start order, as the Helios reference's stable sort does) and hands out
the VC's GPU quota greedily; running jobs that fall outside it are preempted (they pay the
kernel's checkpoint overhead), pending jobs inside it are placed in rank order.

Preemption guards (``sched/preemption.py``: ``min_run_s``, ``max_evictions``, ``grace_s``): a
protected running job keeps its GPUs -- they come off the quota before the greedy pass -- and
the pass asks for a wake-up when a minimum run time it respected ends. With the defaults the
pass is exactly the unguarded one (the Helios fidelity runs stay exact).

The unguarded cut is incremental (``sched/policies/srtf_order.py``): pending jobs are ranked once
per queue entry and the cut merges per-GPU-count heaps, so a pass costs what it starts, preempts
and keeps running, not the length of the queue. ``SrtfPolicy.incremental = False`` is the general
path, a full sort of every pending and running job per pass (the equivalence test runs both).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.policies.srtf_order import RankQueue, greedy_cut
from dlsched.sched.preemption import GUARD_HELP, MIN_RUN, EvictionGuard, check_guards
from dlsched.sched.protocols import PolicyBase

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
# pending jobs: true remaining time, then queue order (a truth slot: an oracle's module may name it)
_by_remaining = attrgetter("_remaining", "enq_seq")
_remaining = attrgetter("_remaining")
_new_start = tuple.__new__


@dataclass(frozen=True, slots=True)
class SrtfParams:
    """SRTF's options."""

    # -- preemption guards (sched/preemption.py) -----------------------------------------
    min_run_s: float = field(default=0.0, metadata={"help": GUARD_HELP["min_run_s"]})
    max_evictions: int | None = field(default=None, metadata={"help": GUARD_HELP["max_evictions"]})
    grace_s: float = field(default=0.0, metadata={"help": GUARD_HELP["grace_s"]})
    # -- end of preemption guards ----------------------------------------------------------

    def __post_init__(self) -> None:
        check_guards(self.min_run_s, self.max_evictions, self.grace_s)


class SrtfPolicy(PolicyBase):
    name = "srtf"
    oracle = True  # the grant: reads true remaining times
    preemptive = True
    Params = SrtfParams
    incremental = True  # the shortcut's switch: False = sort every pending and running job per pass

    def __init__(self, placer, backfill: bool = False, min_run_s: float = 0.0,
                 max_evictions: int | None = None, grace_s: float = 0.0) -> None:
        self.placer = placer
        self.placement_name = placer.name
        self.guard = EvictionGuard(min_run_s, max_evictions, grace_s)

    def prepare(self, view: ClusterView) -> None:
        self.guard.reset()

    def new_queue(self) -> ArrivalQueue | RankQueue:
        return RankQueue() if self.incremental else ArrivalQueue()

    # -- the rank: true remaining time (srtf-pred overrides these two with predictions) --------
    def pending_order(self, view: ClusterView, vc: VcState) -> list[Job]:
        """The pending jobs in rank order (the pass when everything fits the quota)."""
        return sorted(vc.queue, key=_by_remaining)

    def candidates(self, view: ClusterView, vc: VcState) -> list[tuple[float, int, int, Job]]:
        """Pending and running jobs as sorted ``(remaining, is_running, queue/start order, job)``:
        pending first on ties, each in queue/start order (the reference's stable sort)."""
        now = view.now
        cands = [(j._remaining, 0, j.enq_seq, j) for j in vc.queue]
        # true remaining of running jobs, inlined (same as view.remaining; this is the hot loop)
        for j in vc.running:
            left = j._remaining - (now - j.run_since) * j.speed
            cands.append((max(0.0, left), 1, j.run_seq, j))
        cands.sort()  # never compares jobs
        return cands

    def pending_key(self, now: float):
        """A pending job's rank key (fixed while it waits): its true remaining time."""
        return _remaining

    def running_ranked(self, view: ClusterView, vc: VcState) -> list[tuple[float, int, int, Job]]:
        """The running jobs as sorted ``(remaining, 1, start order, job)``."""
        now = view.now
        ranked = []
        for j in vc.running:
            left = j._remaining - (now - j.run_since) * j.speed
            ranked.append((left if left > 0.0 else 0.0, 1, j.run_seq, j))  # noqa: FURB136 -- hot loop: no call
        ranked.sort()
        return ranked

    # -- the pass ------------------------------------------------------------------------------
    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        quota = vc.total_gpus
        if vc.queue.gpus + vc.busy <= quota:
            # everything fits the quota: nobody is preempted, pending jobs go in rank order
            order = self.pending_order(view, vc)
        else:
            guard = self.guard
            if not guard.active and isinstance(vc.queue, RankQueue):
                preempt, order = greedy_cut(vc.queue, self.pending_key(view.now), self.running_ranked(view, vc),
                                            quota)
            elif guard.active:
                preempt, order = self._guarded_cut(view, vc, self.candidates(view, vc))
            else:
                preempt, order = [], []
                for left, is_running, _, job in self.candidates(view, vc):
                    if job.gpus <= quota:
                        quota -= job.gpus
                        if not is_running:
                            order.append(job)
                    elif is_running:
                        preempt.append((left, job))
            for left, job in preempt:
                decision = guard.evict(job, f"{self.name}: {left:.0f} s remaining ranks outside VC "
                                            f"{vc.name}'s {vc.total_gpus} GPUs", order[0] if order else None)
                if decision is not None:
                    yield decision
        place = self.placer.place
        record = self.guard.started if self.guard.min_run_s > 0 else None
        now = view.now
        for job in order:
            status, placement, reason, _, shared = place(view, vc, job)
            if status is _FITS:
                if record is not None:
                    record(job, now)
                yield _new_start(Start, (job, placement, shared))  # = Start(job, placement, shared), C-level
            elif status is _POSTPONE:
                yield Postpone(job, reason)

    def _guarded_cut(self, view: ClusterView, vc: VcState, cands: list) -> tuple[list, list[Job]]:
        """The greedy cut with guards: protected running jobs keep their GPUs (taken off the
        quota first); the others compete in rank order as without guards. A protected job that
        the unguarded cut would have evicted in this pass is a refused eviction; for a minimum
        run time the pass asks to be run again when it ends."""
        guard = self.guard
        now = view.now
        protected = {}
        for _, is_running, _, job in cands:
            if is_running:
                why = guard.protection(job, now)
                if why is not None:
                    protected[job] = why
        total = vc.total_gpus
        quota = total - sum(j.gpus for j in protected)
        unguarded = total  # what the unguarded cut would have left at this rank
        preempt, order = [], []
        for left, is_running, _, job in cands:
            gpus = job.gpus
            inside = gpus <= unguarded
            if inside:
                unguarded -= gpus
            why = protected.get(job)
            if why is not None:
                if not inside and guard.refuse(job, why) and why == MIN_RUN:
                    view.wake_at(guard.protected_until(job), vc)
            elif gpus <= quota:
                quota -= gpus
                if not is_running:
                    order.append(job)
            elif is_running:
                preempt.append((left, job))
        return preempt, order
