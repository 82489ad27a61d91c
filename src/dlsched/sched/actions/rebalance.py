"""One instant's rebalance between queues: reclaim for lenders whose head is blocked, then let
blocked heads borrow, the queue with the least decayed usage per weight first.

The simulator's engine, its forecast and the live kernel (``Kernel(rebalance=rebalance)``) call
:func:`rebalance` after an instant's passes. Every decision goes through the kernel's one
dispatcher (``decider``) and reaches its backend as a pass's decisions do: the simulator's
schedules finishes, the live kernel's log turns a borrowed start into a ``Bind`` on the
lender's node and a reclaim into an ``Evict`` (``decider.assume``).
"""

from __future__ import annotations

from dlsched.kernel.decide import Decider
from dlsched.kernel.quotas import QuotaManager
from dlsched.sched.actions.borrow import borrow
from dlsched.sched.actions.head import FITS, head_of
from dlsched.sched.actions.reclaim import reclaim


def rebalance(quotas: QuotaManager, decider: Decider, now: float) -> None:
    """Reclaim, then borrow, on the books of ``quotas``, deciding through ``decider``."""
    view, place = decider.view, decider.policy.placer.place
    vcs = quotas.state.vcs[:len(quotas.specs)]  # live, a VC whose first node just joined waits for a rebuild
    for vc in vcs:  # a borrowed job that ended freed GPUs of a VC the engine did not pass over
        if vc.pending and place(view, vc, head_of(vc, now)).status is FITS:
            decider.pass_over(vc, now)
    for vc in vcs:
        if vc.pending and quotas.in_total[vc.name]:
            reclaim(quotas, decider, vc, now)
    waiting = set(quotas.evicting.values())  # live: heads that wait for evictions in flight
    specs = quotas.specs
    borrowers = [vc for vc in vcs if vc.pending and specs[vc.vid].may_borrow and vc not in waiting]
    if len(borrowers) > 1:
        upw = quotas.usage_per_weight(now)
        borrowers.sort(key=lambda vc: quotas.tree.fair_key(vc.name, upw))
    for vc in borrowers:
        if vc.pending:
            borrow(quotas, decider, vc, now)
