"""Reclaim: a lender whose head is blocked takes its guaranteed GPUs back from borrowing jobs.

When a VC's head job does not fit on its own nodes while other VCs' jobs hold some of them, and
its free GPUs plus those borrowed GPUs would be enough, borrowing jobs on its nodes are
preempted (checkpoint, the run's preemption overhead, back to their own queue with their
attained service) one by one until the head fits: the borrowing queue with the most decayed
usage per weight first, its most recently started job first; then the VC's policy pass runs
again. The books (who is evicting for whom, the reclaim counts) are the kernel's
:class:`~dlsched.kernel.quotas.QuotaManager`.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decide import Decider
from dlsched.kernel.quotas import QuotaManager
from dlsched.kernel.state import VcState
from dlsched.sched.actions.head import FITS, head_of


def borrowers_on(quotas: QuotaManager, vc: VcState, now: float) -> list[Job]:
    """Other VCs' jobs on ``vc``'s nodes in reclaim order: the borrowing queue with the most
    decayed usage per weight first, its most recently started job first. Jobs whose eviction
    is already asked for (live) are not candidates again."""
    upw = quotas.usage_per_weight(now)
    evicting = quotas.evicting
    return sorted((j for j, h in quotas.state.hosts.items() if h is vc and j not in evicting),
                  key=lambda j: (-upw[j.vc_state.name], -j.run_seq))


def fits_once_gone(quotas: QuotaManager, view, place, vc: VcState, head: Job, going: list[Job]) -> bool:
    """Whether ``head`` fits on ``vc``'s nodes once the jobs ``going`` (evictions in flight,
    live) have released their GPUs. With none going (always, in the simulator) it is the
    plain placement question."""
    if not going:
        return place(view, vc, head).status is FITS
    with quotas.state.as_if(released=going):
        return place(view, vc, head).status is FITS


def reclaim(quotas: QuotaManager, decider: Decider, vc: VcState, now: float) -> None:
    """Preempt borrowing jobs on ``vc``'s nodes until its blocked head fits, then pass over
    ``vc``. Live, a preemption is an eviction request: the victim keeps its GPUs until its
    pod is gone, so GPUs of evictions in flight count as becoming free (none is asked for
    twice, and no more victims than the head needs) and the head starts at the pass that
    follows the last ``JobEvicted``."""
    view, place = decider.view, decider.policy.placer.place
    assume = decider.assume
    while vc.pending and quotas.in_total[vc.name]:
        head = head_of(vc, now)
        if place(view, vc, head).status is FITS:
            break  # its own pass starts it (it was not dirty, or it became free just now)
        going = [j for j, lender in quotas.evicting.items() if lender is vc]
        if going and fits_once_gone(quotas, view, place, vc, head, going):
            break  # enough is on its way out
        if vc.free + quotas.in_total[vc.name] < head.gpus:
            break  # its own jobs hold the rest: reclaiming would not make it fit
        reason = f"reclaim for queue {vc.name}: its guaranteed GPUs are lent"
        for victim in borrowers_on(quotas, vc, now):
            # live (assume): it holds its GPUs until the driver reports it gone (or, a
            # nomination not bound yet, until the driver withdraws it)
            quotas.book_reclaim(victim, vc, in_flight=assume)
            if assume:
                going.append(victim)
            decider.reclaim(victim, now, reason, head)
            if fits_once_gone(quotas, view, place, vc, head, going):
                break
        if not decider.pass_over(vc, now):
            break
