"""Best fit: the node whose free GPUs fit the job most tightly; wide jobs take the fewest
nodes (wholly free ones first, the remainder best-fit)."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.placement.base import greedy_span, lowest, take_gpus
from dlsched.sim.decisions import Placement
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class BestFitPlacer:
    name = "best-fit"

    def place(self, view: SchedulingView, vc: VcState, job: Job) -> Placement | None:
        need = job.gpus
        if vc.free < need:
            return None
        buckets, top = vc.buckets, vc.max_node_gpus
        if need <= top:
            for k in range(need, top + 1):
                if buckets[k]:
                    node = vc.node_lo + lowest(buckets[k])
                    return ((node, take_gpus(view, node, need)),)
            return greedy_span(view, vc, job, most_free_first=True)
        # wide job: the largest free blocks first while they fit, then best fit for the rest
        out: list[tuple[int, int]] = []
        got = used = 0
        for k in range(top, 0, -1):
            m = buckets[k]
            while m and need - got >= k:
                local = lowest(m)
                m ^= 1 << local
                node = vc.node_lo + local
                out.append((node, take_gpus(view, node, k)))
                used |= 1 << local
                got += k
            if got == need:
                return tuple(out)
        rest = need - got
        for k in range(rest, top + 1):
            m = buckets[k] & ~used
            if m:
                node = vc.node_lo + lowest(m)
                out.append((node, take_gpus(view, node, rest)))
                return tuple(out)
        return greedy_span(view, vc, job, most_free_first=True)
