"""What the paper's experiments record about each job beyond the engine's outcome: where it ran,
the topology utility its placement got (under any policy, so FCFS and Best-Fit can be judged by
TOPO-AWARE's yardstick), its placement factor, and how often it was postponed.

:class:`PlacementAudit` is a kernel observer. The kernel announces a start before booking it, so
the audit reads a started job's placement at the next transition; the state is then exactly the
one right after that start, and the utility is computed with the co-runners present at the start
(the job itself left out).
"""

from __future__ import annotations

from collections.abc import Iterator

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone
from dlsched.kernel.state import ClusterState, VcState
from dlsched.kernel.view import SchedulingView
from dlsched.topology.effects import placement_factor
from dlsched.topology.index import TopologyIndex
from dlsched.topology.profile import job_profile
from dlsched.topology.utility import ALPHA, utility


class PlacementAudit:
    """Per job id: ``placement``, ``utility`` at its (last) start and ``factor`` (pack vs spread)."""

    def __init__(self, alpha: tuple[float, float, float] = ALPHA) -> None:
        self.alpha = alpha
        self.index = TopologyIndex()
        self.placement: dict[str, tuple[tuple[int, int], ...]] = {}
        self.utility: dict[str, float] = {}
        self.factor: dict[str, float] = {}
        self._pending: list[Job] = []

    def attach(self, state: ClusterState) -> None:
        self.index.attach(state)
        self.placement.clear()
        self.utility.clear()
        self.factor.clear()
        self._pending = []

    def started(self, job: Job, vc: VcState, now: float) -> None:
        self.resolve()
        self._pending.append(job)
        self.index.started(job, vc, now)

    def stopped(self, job: Job, vc: VcState, now: float, why: str) -> None:
        self.resolve()
        self.index.stopped(job, vc, now, why)

    def node_changed(self, node: int, now: float) -> None:
        self.resolve()
        self.index.node_changed(node, now)

    def resolve(self) -> None:
        """Record the starts announced since the last transition (their placements are booked now)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        index = self.index
        for job in pending:
            if not job.placement:
                continue
            placement = tuple(job.placement)
            co = [r for r in index.co_runners(node for node, _ in placement) if r.job_id != job.job_id]
            p = job_profile(job)
            self.placement[job.job_id] = placement
            self.utility[job.job_id] = utility(p, placement, index.graphs, co, self.alpha).utility
            self.factor[job.job_id] = placement_factor(p, placement, index.graphs)


class PostponeCounter:
    """A policy wrapper that counts the postponements it yields, per job id; everything else is
    the wrapped policy's."""

    def __init__(self, policy) -> None:
        self._policy = policy
        self.counts: dict[str, int] = {}

    def __getattr__(self, name: str):
        return getattr(self._policy, name)

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterator[Decision]:
        counts = self.counts
        for decision in self._policy.schedule(view, vc):
            if type(decision) is Postpone:
                counts[decision.job.job_id] = counts.get(decision.job.job_id, 0) + 1
            yield decision
