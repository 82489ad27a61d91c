"""TOPO-AWARE and TOPO-AWARE-P (Amaral et al., SC'17) as placers of the main simulator.

The topology package decides on its own snapshot type; this adapter builds that snapshot
from the engine's view of the job's VC (free-GPU masks, running jobs and their placements)
and maps a :class:`~dlsched.core.job.Job` to the paper's job profile. The paper profiles
AlexNet, CaffeNet and GoogLeNet only: other models are treated as GoogLeNet (the least
communication-bound of the three); a job without a batch size is taken as batch 32.
Nodes without a topology get the ``default_topology`` preset.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.core.topology import NodeTopology, preset_topology
from dlsched.kernel.decisions import NO_ROOM, Fit, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import SchedulingView

PAPER_MODELS = ("alexnet", "caffenet", "googlenet")


class TopoAwarePlacement:
    """``postpone=True`` is TOPO-AWARE-P: wait rather than accept a placement below the job's
    minimum utility."""

    def __init__(self, postpone: bool = False, min_utility: float = 0.5, default_topology: str = "dgx1") -> None:
        from dlsched.topology import TopoAwarePlacer

        self.name = "topo-aware-p" if postpone else "topo-aware"
        self.min_utility = min_utility
        self.default_topology = default_topology
        self._inner = TopoAwarePlacer(postpone=postpone)
        self._graphs: dict[int, object] = {}
        self._profiles: dict[Job, object] = {}

    def _graph(self, topo: NodeTopology | None, gpus: int):
        from dlsched.topology.graph import build_machine_graph

        if topo is None:
            topo = preset_topology(self.default_topology, gpus)
        key = id(topo)
        if key not in self._graphs:
            self._graphs[key] = (topo, build_machine_graph(topo))
        return self._graphs[key][1]

    def profile(self, job: Job, per_node: int):
        from dlsched.topology import JobProfile

        prof = self._profiles.get(job)
        if prof is None:
            model = job.model_name.lower() if job.model_name.lower() in PAPER_MODELS else "googlenet"
            solo = job.pred_duration if job.pred_duration == job.pred_duration else 1.0
            prof = JobProfile(job.job_id, model, job.batch_size or 32, job.gpus, max(solo, 1.0),
                              self.min_utility, job.submit_time, single_node=job.gpus <= per_node)
            self._profiles[job] = prof
        return prof

    def fast_place(self, view: SchedulingView, vc: VcState, job: Job) -> Fit:
        from dlsched.topology import ClusterState

        if vc.free < job.gpus:
            return NO_ROOM
        state = view.state
        specs = state.node_specs
        nodes = vc.nodes
        local = {n: i for i, n in enumerate(nodes)}
        graphs = [self._graph(specs[n].topology, state.node_gpus[n]) for n in nodes]
        free = [(~state.node_mask[n] & ((1 << state.node_gpus[n]) - 1)) if state.node_open[n] else 0
                for n in nodes]
        running = [(self.profile(r, vc.max_node_gpus), tuple((local[n], m) for n, m in r.placement))
                   for r in vc.running]
        self._inner._machine_sig.clear()  # keyed by per-snapshot version counters: stale across snapshots
        decision = self._inner.decide(ClusterState.from_masks(graphs, free, running), self.profile(job, vc.max_node_gpus))
        if decision.placement is None:
            return NO_ROOM
        placement = tuple((nodes[m], mask) for m, mask in decision.placement)
        if decision.postponed:
            return Fit(Status.POSTPONE, placement, f"utility {decision.utility:.3f} below the job's minimum "
                       f"{self.profile(job, vc.max_node_gpus).min_utility:.2f}", decision.utility)
        return Fit(Status.FITS, placement, "", decision.utility)
