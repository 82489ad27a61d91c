"""First fit: the lowest-numbered node that can hold the job; wide jobs fill nodes in order."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.placement.base import greedy_span, lowest, nodes_with_at_least, take_gpus
from dlsched.sim.decisions import Placement
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class FirstFitPlacer:
    name = "first-fit"

    def place(self, view: SchedulingView, vc: VcState, job: Job) -> Placement | None:
        need = job.gpus
        if vc.free < need:
            return None
        if need <= vc.max_node_gpus:
            m = nodes_with_at_least(vc, need)
            if m:
                node = vc.node_lo + lowest(m)
                return ((node, take_gpus(view, node, need)),)
        return greedy_span(view, vc, job, most_free_first=False)
