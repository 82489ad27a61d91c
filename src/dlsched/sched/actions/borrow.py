"""Borrow: a VC whose head job does not fit on its own nodes starts it on another VC's idle GPUs.

The lender is found by the policy's own placer on the lender's nodes; it must have no job
waiting, and every queue between borrower / lender and their nearest common ancestor must stay
within its borrow / lend limit (in GPUs of any type, or per GPU type: the kernel's
:meth:`QuotaManager.loan <dlsched.kernel.quotas.QuotaManager.loan>`). Only the head borrows: a
blocked head is not overtaken (the policy's no-backfill rule), and the next head may borrow
after it. The loan is booked by the kernel's manager (:meth:`~dlsched.kernel.quotas.QuotaManager.book_loan`)
before the dispatcher starts the job.
"""

from __future__ import annotations

from dlsched.kernel.decide import Decider
from dlsched.kernel.quotas import QuotaManager
from dlsched.kernel.state import VcState
from dlsched.sched.actions.head import FITS, head_of


def lender_nodes(quotas: QuotaManager, vc: VcState, other: VcState, g: int) -> list[int] | None:
    """Nodes of ``other`` to close before its placer looks for ``g`` GPUs for ``vc``'s head:
    those whose GPU type the loan's limits leave too little room for (per-type limits are
    checked before the placer picks, so that a disallowed type it would prefer does not hide
    an allowed one). [] when every type is allowed; None when no type is."""
    paths = quotas.tree.below_common(vc.name, other.name)
    if paths is None:
        return None
    specs = quotas.state.node_specs
    types = {specs[n].gpu_type.name for n in other.nodes}
    room = quotas.allowance(paths, types)
    ok = {t for t in types if room[t] >= g}
    if not ok:  # a placement across types may still fit the room left of several
        ok = {t for t in types if room[t] > 0}
        if sum(room[t] for t in ok) < g:
            return None
    if len(ok) == len(types):
        return []
    return [n for n in other.nodes if specs[n].gpu_type.name not in ok]


def borrow(quotas: QuotaManager, decider: Decider, vc: VcState, now: float) -> None:
    """Let ``vc``'s blocked heads borrow, one after the other, until one finds no lender (or a
    head fits at home after all and its pass decides nothing)."""
    state, view, place = quotas.state, decider.view, decider.policy.placer.place
    specs = quotas.specs
    spec = specs[vc.vid]
    while vc.pending:
        head = head_of(vc, now)
        if place(view, vc, head).status is FITS:
            if not decider.pass_over(vc, now):  # fits at home after all
                break
            continue
        g = head.gpus
        if spec.borrow_types is None and spec.borrow_limit is not None and \
                quotas.out_total[vc.name] + g > spec.borrow_limit:
            break
        lender = None
        for other in sorted(state.vcs, key=lambda o: (-o.free, o.vid)):
            if other is vc or other.pending or other.free < g or other.vid >= len(specs) \
                    or not specs[other.vid].may_lend:
                continue
            closed = lender_nodes(quotas, vc, other, g)
            if closed is None:
                continue
            if closed:
                with state.as_if(closed=closed):
                    fit = place(view, other, head)
            else:
                fit = place(view, other, head)
            if fit.status is not FITS:
                continue
            want = quotas.types_of(fit.placement)
            loan = quotas.loan(vc.name, other.name, want)
            if loan is not None:
                lender = (other, fit.placement, loan[0], loan[1], want)
                break
        if lender is None:
            break
        other, placement, outs, ins, want = lender
        quotas.book_loan(head, outs, ins, want)
        decider.start_borrowed(head, other, placement, now)
