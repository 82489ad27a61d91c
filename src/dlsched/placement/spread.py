"""Spread (load balance): the node with the most free GPUs, so load evens out across nodes
(fewer co-runners per node, more fragmentation). Wide jobs take the emptiest nodes first."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.placement.base import greedy_span, lowest, take_gpus
from dlsched.sim.decisions import Placement
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class SpreadPlacer:
    name = "spread"

    def place(self, view: SchedulingView, vc: VcState, job: Job) -> Placement | None:
        need = job.gpus
        if vc.free < need:
            return None
        for k in range(vc.max_node_gpus, need - 1, -1):
            if k > 0 and vc.buckets[k]:
                node = vc.node_lo + lowest(vc.buckets[k])
                return ((node, take_gpus(view, node, need)),)
        return greedy_span(view, vc, job, most_free_first=True)
