"""Spread (load balance): the node with the most free GPUs, so load evens out across nodes
(fewer co-runners per node, more fragmentation). Wide jobs take the emptiest nodes first."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import greedy_span, lowest, take_gpus


class SpreadPlacer:
    name = "spread"

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        """Share of the node's GPUs still free: emptier nodes score higher."""
        return view.node_free[node] / max(1, vc.max_node_gpus)

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        for k in range(vc.max_node_gpus, need - 1, -1):
            if k > 0 and vc.buckets[k]:
                node = vc.nodes[lowest(vc.buckets[k])]
                return fits(((node, take_gpus(view, node, need)),))
        pl = greedy_span(view, vc, job, most_free_first=True)
        return fits(pl) if pl else NO_ROOM
