"""The placement algorithm's view of a cluster: free GPUs per machine and running placements.

Deliberately independent of any simulator: the experiment loop here and the main simulator
(``dlsched.sim``) both feed it through ``allocate``/``release`` (or build one from bitmasks
with :meth:`ClusterState.from_masks`). Each machine carries a version counter that moves on
every change, so per-machine results can be cached until the machine changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlsched.topology.effects import Placement, bits, footprint
from dlsched.topology.graph import MachineGraph, machine_graph
from dlsched.topology.jobgraph import JobProfile


@dataclass(slots=True)
class Running:
    profile: JobProfile
    placement: tuple[tuple[int, int], ...]
    footprint: frozenset


class ClusterState:
    """Machines (graphs shared between identical machines), free bitmasks, running jobs."""

    def __init__(self, graphs: Sequence[MachineGraph]) -> None:
        self.graphs = list(graphs)
        self.free = [(1 << g.gpus) - 1 for g in self.graphs]
        self.running: dict[str, Running] = {}
        self.on_machine: list[set[str]] = [set() for _ in self.graphs]
        self.version = [0] * len(self.graphs)

    @classmethod
    def homogeneous(cls, machines: int, preset: str = "minsky") -> ClusterState:
        mg = machine_graph(preset)
        return cls([mg] * machines)

    @classmethod
    def from_masks(cls, graphs: Sequence[MachineGraph], free_masks: Sequence[int],
                   running: Sequence[tuple[JobProfile, Placement]] = ()) -> ClusterState:
        """Build from a snapshot: per-machine free-GPU bitmasks plus running (profile, placement)."""
        st = cls(graphs)
        for p, pl in running:
            st._add(p, tuple(pl))
        st.free = list(free_masks)
        return st

    @property
    def machines(self) -> int:
        return len(self.graphs)

    def free_count(self, m: int) -> int:
        return self.free[m].bit_count()

    def allocate(self, p: JobProfile, placement: Placement) -> None:
        pl = tuple(placement)
        for m, mask in pl:
            if mask & ~self.free[m]:
                raise ValueError(f"job {p.job_id}: GPUs {bits(mask & ~self.free[m])} of machine {m} are busy")
        for m, mask in pl:
            self.free[m] &= ~mask
        self._add(p, pl)

    def _add(self, p: JobProfile, pl: tuple[tuple[int, int], ...]) -> None:
        if p.job_id in self.running:
            raise ValueError(f"job {p.job_id} already runs")
        self.running[p.job_id] = Running(p, pl, footprint(pl, self.graphs))
        for m, _ in pl:
            self.on_machine[m].add(p.job_id)
            self.version[m] += 1

    def release(self, job_id: str) -> Running:
        r = self.running.pop(job_id)
        for m, mask in r.placement:
            self.free[m] |= mask
            self.on_machine[m].discard(job_id)
            self.version[m] += 1
        return r

    def co_runners(self, machines: Sequence[int]) -> list[Running]:
        """Running jobs on any of ``machines`` (each once)."""
        seen: dict[str, Running] = {}
        for m in machines:
            for jid in self.on_machine[m]:
                seen[jid] = self.running[jid]
        return [seen[k] for k in sorted(seen)]
