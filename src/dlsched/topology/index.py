"""Incremental per-node index of what topology placement needs: who runs on each node (profile,
placement, footprint) and each node's placement signature, kept in step with the kernel.

It is a kernel observer. The kernel calls ``started`` *before* it books the placement, so a start
is only noted and read back (``job.placement``) at the next query or transition ("flush"); every
query flushes first, so a caller never sees a stale node. A node's cached signature and its
scratch results (placements mapped on it) are dropped only when that node changes: a job starts
or stops on it, or it is powered, cordoned, added or removed. Nothing is rebuilt per decision.

The signature of a node is what its DRB mapping and utility depend on: its graph, its free GPUs
and its co-runners' classes (job type, sockets held on this node, whether they cross its SMP bus
or the network). Nodes with equal signatures get equal mappings, so results are shared between
them (all idle nodes of one kind are mapped once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlsched.core.job import Job, JobState
from dlsched.kernel.state import ClusterState, VcState
from dlsched.topology.effects import footprint
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.machines import NodeGraphs
from dlsched.topology.profile import CoRunner, job_profile

_LIVE = (JobState.RUNNING, JobState.ASSUMED)


class TopologyIndex:
    """Per-node co-runner records, signatures and scratch caches (a kernel observer)."""

    def __init__(self, profile_of: Callable[[Job], JobProfile] = job_profile) -> None:
        self.profile_of = profile_of
        self.state: ClusterState | None = None
        self.graphs = NodeGraphs()
        self.records: dict[Job, CoRunner] = {}
        self.on_node: list[dict[Job, CoRunner]] = []
        self._sig: list[tuple | None] = []
        self.node_scratch: list[dict] = []   # per node, see ``scratch`` (read directly only after ``flush``)
        self._pending: list[Job] = []
        self._grown = False   # a node was announced (add_node) but not yet booked here

    # -- set-up ------------------------------------------------------------------------------
    def attach(self, state: ClusterState) -> None:
        """Start from ``state`` (running jobs included): the engine calls this before the run."""
        self.state = state
        self.graphs = NodeGraphs().sync(state.node_specs)
        self.records = {}
        self.on_node = [{} for _ in state.node_ids]
        self._sig = [None] * len(state.node_ids)
        self.node_scratch = [{} for _ in state.node_ids]
        self._pending = []
        self._grown = False
        for vc in state.vcs:
            for job in vc.running:
                self._add(job)

    @classmethod
    def rebuilt(cls, state: ClusterState, profile_of: Callable[[Job], JobProfile] = job_profile) -> TopologyIndex:
        """A fresh index of ``state`` built from scratch (the reference the tests compare with)."""
        index = cls(profile_of)
        index.attach(state)
        return index

    # -- observer protocol (called before the kernel changes occupancy) -----------------------
    def started(self, job: Job, vc: VcState, now: float) -> None:
        self._pending.append(job)

    def stopped(self, job: Job, vc: VcState, now: float, why: str) -> None:
        self.flush()
        rec = self.records.pop(job, None)
        if rec is not None:
            for node, _ in rec.placement:
                del self.on_node[node][job]
                self._touch(node)

    def node_changed(self, node: int, now: float) -> None:
        self.flush()
        if node < len(self._sig):
            self._touch(node)
        else:  # a node being added: the kernel books it right after this call
            self._grown = True

    # -- queries --------------------------------------------------------------------------------
    def flush(self) -> None:
        """Book the starts the kernel has carried out since the last query."""
        if self._grown:
            self._grow()
        if self._pending:
            pending, self._pending = self._pending, []
            for job in pending:
                if job.state in _LIVE and job.placement:
                    if job not in self.records:
                        self._add(job)
                elif job.state is JobState.PENDING:   # asked from inside the start: not booked yet
                    self._pending.append(job)

    def co_runners(self, nodes: Iterable[int]) -> list[CoRunner]:
        """Running jobs on any of ``nodes``, each once, ordered by job id (a stable order for the
        utility's floating-point sums)."""
        self.flush()
        on_node = self.on_node
        seen: dict[Job, CoRunner] = {}
        for node in nodes:
            seen.update(on_node[node])
        return sorted(seen.values(), key=_job_id) if len(seen) > 1 else list(seen.values())

    def free_mask(self, node: int) -> int:
        state = self.state
        if not state.is_open(node):
            return 0
        return ~state.node_mask[node] & ((1 << state.node_gpus[node]) - 1)

    def signature(self, node: int) -> tuple:
        """(graph, free GPUs, co-runner classes) of ``node``, cached until the node changes."""
        self.flush()
        sig = self._sig[node]
        if sig is None:
            classes = []
            for rec in self.on_node[node].values():
                fp = rec.footprint
                local = tuple(sorted(k[2] for k in fp if k[0] == "s" and k[1] == node))
                classes.append((rec.profile.type_key, local, ("smp", node) in fp, ("net",) in fp))
            sig = (id(self.graphs[node]), self.free_mask(node), tuple(sorted(classes)))
            self._sig[node] = sig
        return sig

    def scratch(self, node: int) -> dict:
        """A dict for results that hold while ``node`` is unchanged (emptied when it changes)."""
        self.flush()
        return self.node_scratch[node]

    def snapshot(self) -> list[tuple[dict[str, tuple], tuple]]:
        """Per node: {job id: (type, placement, footprint)} and the signature (for equality tests)."""
        self.flush()
        return [({r.job_id: (r.profile.type_key, r.placement, r.footprint) for r in recs.values()},
                 self.signature(node)) for node, recs in enumerate(self.on_node)]

    # -- bookkeeping ------------------------------------------------------------------------
    def _add(self, job: Job) -> None:
        placement = tuple(job.placement)
        rec = CoRunner(job.job_id, self.profile_of(job), placement, footprint(placement, self.graphs))
        self.records[job] = rec
        for node, _ in placement:
            self.on_node[node][job] = rec
            self._touch(node)

    def _touch(self, node: int) -> None:
        self._sig[node] = None
        if self.node_scratch[node]:
            self.node_scratch[node] = {}

    def _grow(self) -> None:
        """Make room for nodes the kernel added since the last call."""
        self._grown = False
        specs = self.state.node_specs
        self.graphs.sync(specs)
        while len(self.on_node) < len(specs):
            self.on_node.append({})
            self._sig.append(None)
            self.node_scratch.append({})


def _job_id(rec: CoRunner) -> str:
    return rec.job_id
