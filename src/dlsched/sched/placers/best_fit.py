"""Best fit: the node whose free GPUs fit the job most tightly; wide jobs take the fewest
nodes (wholly free ones first, the remainder best-fit)."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import greedy_span, lowest, take_gpus, tightest_node


def tightness(view: ClusterView, vc: VcState, job: Job, node: int) -> float:
    """1 when the job fills the node's free GPUs exactly, towards 0 as more stay free."""
    left = view.node_free[node] - job.gpus
    return 1.0 - max(0, left) / max(1, vc.max_node_gpus)


class BestFitPlacer:
    name = "best-fit"
    score_by_free = True  # score() depends on the node's free GPU count only (for one job)

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        return tightness(view, vc, job, node)

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        buckets, top, nodes = vc.buckets, vc.max_node_gpus, vc.nodes
        if need <= top:
            node = tightest_node(vc, need)
            if node >= 0:
                return fits(((node, take_gpus(view, node, need)),))
            pl = greedy_span(view, vc, job, most_free_first=True)
            return fits(pl) if pl else NO_ROOM
        # wide job: the largest free blocks first while they fit, then best fit for the rest
        out: list[tuple[int, int]] = []
        got = used = 0
        for k in range(top, 0, -1):
            m = buckets[k]
            while m and need - got >= k:
                local = lowest(m)
                m ^= 1 << local
                node = nodes[local]
                out.append((node, take_gpus(view, node, k)))
                used |= 1 << local
                got += k
            if got == need:
                return fits(tuple(out))
        rest = need - got
        for k in range(rest, top + 1):
            m = buckets[k] & ~used
            if m:
                node = nodes[lowest(m)]
                out.append((node, take_gpus(view, node, rest)))
                return fits(tuple(out))
        pl = greedy_span(view, vc, job, most_free_first=True)
        return fits(pl) if pl else NO_ROOM
