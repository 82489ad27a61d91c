"""First fit: the lowest-numbered node that can hold the job; wide jobs fill nodes in order."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import greedy_span, lowest, nodes_with_at_least, take_gpus


class FirstFitPlacer:
    name = "first-fit"
    single_node_only = False  # a job that fits one node may span nodes when no single node has room

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        """1 for the VC's first node, falling linearly to 0 for its last."""
        return 1.0 - view.node_local[node] / max(1, len(vc.nodes))

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        if need <= vc.max_node_gpus:
            m = nodes_with_at_least(vc, need)
            if m:
                node = vc.nodes[lowest(m)]
                return fits(((node, take_gpus(view, node, need)),))
            if self.single_node_only:
                return NO_ROOM
        pl = greedy_span(view, vc, job, most_free_first=False)
        return fits(pl) if pl else NO_ROOM
