"""First fit that keeps a job on one node when it fits one: the lowest-numbered node with enough
free GPUs, its lowest free GPU ids. Only a job wider than any node spans nodes (in node order).

This is the FCFS baseline's placement in Amaral et al. (SC'17, Sec. 5.2): "first machine with
room, lowest GPU ids". Plain ``first-fit`` would instead split a small job over several nodes
when no single node has room, where FCFS waits.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.gpus import greedy_span, lowest, nodes_with_at_least, take_gpus
from dlsched.sched.placers.first_fit import FirstFitPlacer

_FITS = Status.FITS


class FirstFitNodePlacer(FirstFitPlacer):
    name = "first-fit-node"

    def fast_place(self, view: SchedulingView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        if need <= vc.max_node_gpus:
            m = nodes_with_at_least(vc, need)
            if not m:
                return NO_ROOM
            node = vc.nodes[lowest(m)]
            return Fit(_FITS, ((node, take_gpus(view, node, need)),))
        pl = greedy_span(view, vc, job, most_free_first=False)
        return Fit(_FITS, pl) if pl else NO_ROOM
