"""TOPO-AWARE and TOPO-AWARE-P (Amaral et al., SC'17) as placement plug-ins.

* **score**: the utility U (Eq. 2-5, in (0, 1]) of the DRB mapping of the job on the node, less
  a tie-breaker below U's rounding step that prefers fuller nodes; **gpus** picks that mapping.
* **permit** (TOPO-AWARE-P only): POSTPONE when U < the job's minimum utility (its own, else
  Table 1's 0.5 for multi-GPU and 0.3 for single-GPU jobs).
* **fast_place** (when the plug-in is the whole pipeline): the paper's decision in one pass over
  the candidate nodes, ranked by U, then fullest node, then lowest index; a job wider than any
  node takes the fewest nodes (most free GPUs first), DRB inside each (multi-node fallback).
* **observer**: a :class:`~dlsched.topology.index.TopologyIndex` follows every start and stop,
  so a decision reads per-node records and cached signatures instead of rebuilding anything.
  The driver attaches the plug-in to its state (:func:`dlsched.sched.indexes.attach_plugins`);
  a decision before that fails loudly rather than read an index of no state.

Alg. 1 scans the queue and postpones what it cannot place; a job *type* that could not be placed
(or was postponed) is not tried again in the same pass (same instant, no job stopped since):
starting jobs only takes GPUs and adds co-runners, so it would not fare better, and later jobs of
that type are passed over without a second postponement. The default ground-truth speed model of
runs with these placers is ``topology`` (``default_speed_model``).
"""

from __future__ import annotations

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, Status
from dlsched.kernel.state import ClusterState, VcState
from dlsched.kernel.stop import FINAL, StopReason
from dlsched.kernel.view import ClusterView
from dlsched.topology.index import TopologyIndex
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.mapping import TopologyMapper
from dlsched.topology.profile import job_profile
from dlsched.topology.utility import ALPHA

_FITS, _UNSCHED, _POSTPONE = Status.FITS, Status.UNSCHEDULABLE, Status.POSTPONE
TIE = 1e-10   # fullness tie-breaker in ``score``: below the 1e-9 rounding step of U
SKIPPED = Fit(_UNSCHED, None, "a job of the same type could not be placed earlier in this pass")


class TopoAwarePlacement:
    """TOPO-AWARE: topology utility as a score, the DRB mapping as the GPU pick."""

    name = "topo-aware"
    postpone = False
    default_speed_model = "topology"

    def __init__(self, alpha: tuple[float, float, float] = ALPHA) -> None:
        self.index = TopologyIndex(self._known_profile)
        self.mapper = TopologyMapper(self.index, alpha)
        self._profiles: dict[Job, tuple[JobProfile, tuple]] = {}
        self._skip: dict[int, tuple[float, int, dict]] = {}
        self._stops = 0

    # -- kernel observer -------------------------------------------------------------------
    def attach(self, state: ClusterState) -> None:
        self.index.attach(state)
        self._profiles.clear()
        self._skip.clear()

    def started(self, job: Job, vc: VcState, now: float) -> None:
        self.index.started(job, vc, now)

    def stopped(self, job: Job, vc: VcState, now: float, why: StopReason) -> None:
        self.index.stopped(job, vc, now, why)
        self._stops += 1
        if why in FINAL:
            self._profiles.pop(job, None)

    def node_changed(self, node: int, now: float) -> None:
        self.index.node_changed(node, now)
        self._stops += 1

    def _not_attached(self) -> None:
        if self.index.state is None:
            raise RuntimeError(f"placement {self.name}: not attached to a cluster state (a driver attaches "
                               "placement observers with dlsched.sched.indexes.attach_plugins)")

    def _known_profile(self, job: Job) -> JobProfile:
        """The index's profile of a started job: the one this plug-in made placing it, if any."""
        entry = self._profiles.get(job)
        return entry[0] if entry is not None else job_profile(job)

    def profile(self, job: Job, vc: VcState) -> JobProfile:
        return self._entry(job, vc)[0]

    def _entry(self, job: Job, vc: VcState) -> tuple[JobProfile, tuple]:
        """The job's profile and its kind (what Alg. 1's same-type skip compares), cached."""
        entry = self._profiles.get(job)
        if entry is None:
            p = job_profile(job, vc.max_node_gpus)
            entry = self._profiles[job] = (p, (p.type_key, p.min_utility, p.single_node))
        return entry

    # -- pipeline stages ----------------------------------------------------------------------
    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        if self.index.state is None:
            self._not_attached()
        free = self.index.free_mask(node).bit_count()
        if free < job.gpus:
            return 0.0
        u = self.mapper.on_node(node, self.profile(job, vc))[0]
        return max(0.0, round(u, 9) - TIE * free / max(1, vc.max_node_gpus))

    def gpus(self, view: ClusterView, vc: VcState, job: Job, node: int, room: int) -> int:
        if self.index.state is None:
            self._not_attached()
        if self.index.free_mask(node).bit_count() < job.gpus:
            return 0
        mask = self.mapper.on_node(node, self.profile(job, vc))[1]
        return mask if not mask & ~room else 0

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        """The whole decision when this plug-in is the only one (see the module docstring)."""
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        state = self.index.state
        if state is None:
            self._not_attached()
        p, kind = self._entry(job, vc)
        entry = self._skip.get(vc.vid)
        if entry is None or entry[0] != view.now or entry[1] != self._stops:
            entry = self._skip[vc.vid] = (view.now, self._stops, {})
        skip = entry[2]
        if kind in skip:
            return SKIPPED
        fit = self._single(state, vc, p) if p.single_node else self._spread(vc, p)
        if fit.status is _FITS and self.postpone and fit.score < p.min_utility:
            fit = self._postponed(p, fit)
        if fit.status is not _FITS:
            skip[kind] = None
        return fit

    # -- internals -------------------------------------------------------------------------------
    def _single(self, state: ClusterState, vc: VcState, p: JobProfile) -> Fit:
        """Best node by (utility rounded to 1e-9, fewest free GPUs, lowest index): the mapper's
        best-first search over the nodes with room (most of them ranked by bounds alone)."""
        need = p.gpus
        buckets, nodes = vc.buckets, vc.nodes
        candidates = [(k, local, nodes[local]) for k in range(need, vc.max_node_gpus + 1) if buckets[k]
                      for local in set_bits(buckets[k])]
        if not candidates:
            return Fit(_UNSCHED, None, "no node has enough free GPUs")
        node, (u, mask, _) = self.mapper.best(p, candidates)
        return Fit(_FITS, ((node, mask),), "", u)

    def _spread(self, vc: VcState, p: JobProfile) -> Fit:
        """A job wider than any node: most free GPUs first, lowest index on ties."""
        order = [vc.nodes[local] for k in range(vc.max_node_gpus, 0, -1) for local in set_bits(vc.buckets[k])]
        out = self.mapper.spread(p, order)
        if out is None:
            return Fit(_UNSCHED, None, f"{p.gpus} GPUs needed, {vc.free} free in VC {vc.name}")
        placement, parts = out
        return Fit(_FITS, placement, "", parts.utility)

    def _postponed(self, p: JobProfile, fit: Fit) -> Fit:
        return Fit(_POSTPONE, fit.placement, f"utility {fit.score:.3f} below the job's minimum "
                   f"{p.min_utility:.2f}", fit.score, fit.shared)


class TopoAwarePostponing(TopoAwarePlacement):
    """TOPO-AWARE-P: TOPO-AWARE that waits rather than accept a placement below the job's minimum
    utility."""

    name = "topo-aware-p"
    postpone = True

    def permit(self, view: ClusterView, vc: VcState, job: Job, fit: Fit) -> Fit:
        """POSTPONE a fit whose placement's utility is below the job's minimum."""
        if self.index.state is None:
            self._not_attached()
        p = self.profile(job, vc)
        placement = fit.placement
        if len(placement) == 1 and self.index.free_mask(placement[0][0]).bit_count() >= p.gpus:
            u, mask, _ = self.mapper.on_node(placement[0][0], p)
            if mask != placement[0][1]:
                u = self.mapper.utility_of(p, placement).utility
        else:
            u = self.mapper.utility_of(p, placement).utility
        if u < p.min_utility:
            return self._postponed(p, fit._replace(score=u))
        return fit
