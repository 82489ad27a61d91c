"""Topology speed model: where a job's GPUs sit and who shares its buses (Amaral et al., SC'17, Sec. 3).

``rate = 1 / (placement factor x interference factor)``, the formulas of
:mod:`dlsched.topology.effects`:

* placement factor (Sec. 3.2, Fig. 4): pack vs spread, by model, batch and interconnect; 1 for a
  best (packed) placement, up to the paper's cross-socket slowdown, twice that across machines;
* interference (Sec. 3.3, Fig. 6): every running job on the job's nodes whose footprint (sockets
  held, SMP bus crossed, network used) overlaps the job's slows it by 0.30 x sensitivity(victim)
  x demand(aggressor), summed and capped at 60 %.

Scope ``"node"``: the kernel asks again for every job on a node whose set of jobs changed.
Multi-node jobs are covered: their footprint includes the network, and their co-runners are the
jobs on any of their nodes. Nodes that describe no topology get the preset of
:func:`dlsched.topology.machines.default_topology`. Only request fields are read (model, batch
size, GPUs), as :func:`dlsched.topology.profile.job_profile` maps them.
"""

from __future__ import annotations

from typing import NamedTuple

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.topology.effects import footprint, interference_factor, placement_factor
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.machines import NodeGraphs
from dlsched.topology.profile import job_profile

PRUNE_EVERY = 4096   # drop cached records of stopped jobs after this many new ones


class _Placed(NamedTuple):
    placement: tuple
    profile: JobProfile
    footprint: frozenset
    factor: float


class TopologySpeed:
    """Ground-truth speed of a job from its placement and its overlapping co-runners."""

    name = "topology"
    scope = "node"

    def __init__(self, cluster: ClusterSpec | None = None) -> None:
        self.graphs = NodeGraphs()
        self._state: ClusterState | None = None
        self._placed: dict[Job, _Placed] = {}
        self._added = 0

    def rate(self, job: Job, state: ClusterState) -> float:
        """Work seconds per wall second of ``job`` where it runs now (1 = solo, best placement)."""
        mine = self._record(job, state)
        holders = state.node_holders
        seen: set[Job] = {job}
        aggressors: list[JobProfile] = []
        for node, _ in job.placement:
            for other in holders[node]:
                if other in seen:
                    continue
                seen.add(other)
                rec = self._record(other, state)
                if rec.footprint & mine.footprint:
                    aggressors.append(rec.profile)
        slow = interference_factor(mine.profile, aggressors) if aggressors else 1.0
        return 1.0 / (mine.factor * slow)

    def _record(self, job: Job, state: ClusterState) -> _Placed:
        """Profile, footprint and placement factor of ``job``, cached while its placement holds."""
        if state is not self._state:  # a new run: nothing cached belongs to it
            self.graphs, self._placed, self._state = NodeGraphs(), {}, state
        rec = self._placed.get(job)
        placement = job.placement
        if rec is not None and rec.placement == placement:
            return rec
        if len(self.graphs) < len(state.node_specs):
            self.graphs.sync(state.node_specs)
        profile = job_profile(job)
        placement = tuple(placement)
        rec = _Placed(placement, profile, footprint(placement, self.graphs),
                      placement_factor(profile, placement, self.graphs))
        self._placed[job] = rec
        self._added += 1
        if self._added >= PRUNE_EVERY:
            self._added = 0
            self._placed = {j: r for j, r in self._placed.items() if j.placement is not None}
        return rec
