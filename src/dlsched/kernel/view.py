"""The read-only view a policy decides on.

:class:`ClusterView` lists everything a policy or placement plug-in may read: the clock,
per-node occupancy (free and busy GPU masks, GPU counts and memory, holders, open or not), the
VCs, the job cap per GPU, the indexes the plug-ins declared, and (for oracles) ground truth.
:class:`SchedulingView` implements it for the simulator, the live service and the start-time
estimate alike; policies never reach the :class:`~dlsched.kernel.state.ClusterState` behind it
(``tests/test_view.py`` checks ``sched/`` for that).

Hot paths read the per-node facts in the same list objects the state keeps up to date (bound
once when the view is made: the state never rebinds them), so a read costs what a read of the
state did. They are read-only by convention: a policy changes the cluster only by yielding
decisions. Everything else a policy may read about a job is on the job itself (request and
predictions); its public truth names always raise :class:`~dlsched.core.job.OracleAccessError`.
Ground truth is not the kernel's (it neither imports :mod:`dlsched.core.truth` nor reads the
truth slots; ``tests/test_truth_access.py``): true durations, remaining times, measured resources
and the speed model come from ``truth``, the physics a simulated driver hands an oracle's view
(:class:`dlsched.sim.physics.Physics`); the live service has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from dlsched.core.cluster import NodeSpec
from dlsched.core.job import Job, OracleAccessError
from dlsched.kernel.state import ClusterState, VcState

__all__ = ["ClusterView", "MissingIndexError", "OracleAccessError", "SchedulingView", "VcView"]


@runtime_checkable
class VcView(Protocol):
    """The facts of one VC a policy reads (a :class:`VcState`, handed over as is for speed;
    policies read these and never assign them). Node bits of ``buckets`` and ``share_nodes``
    are VC-local indices: ``nodes[local]`` is the global node index."""

    name: str
    vid: int
    nodes: list[int]
    total_gpus: int
    free: int
    max_node_gpus: int
    gpus_per_node: int
    buckets: list[int]
    share_nodes: int
    queue: Any
    running: dict[Job, None]
    busy: int
    pending: int


@runtime_checkable
class ClusterView(Protocol):
    """What policies and placement plug-ins may read. The sequences are the kernel's own,
    indexed by global node index, read-only by convention."""

    now: float
    oracle: bool
    compat_tick: bool               # Helios-compatible 1 s tick between passes (preemptive runs)
    max_jobs_per_gpu: int           # the per-GPU job cap (1: exclusive GPUs)
    node_free: Sequence[int]        # GPUs open to new jobs (0 while off, cordoned or removed)
    node_mask: Sequence[int]        # bit g: GPU g holds at least one job
    node_gpus: Sequence[int]
    node_mem: Sequence[float]       # memory of each GPU of the node (MiB)
    node_slot: Sequence[int]        # the node's VC id while open to new jobs, else -1
    node_local: Sequence[int]       # the node's index inside its VC
    node_specs: Sequence[NodeSpec]
    node_holders: Sequence[Mapping[Job, int]]   # job -> mask of the node's GPUs it holds
    gpu_count: Sequence[Sequence[int]]          # sharing only: holders per GPU

    def vc(self, name: str) -> VcView: ...

    def gpu_holders(self, node: int, gpu: int) -> list[Job]: ...

    def gpu_free_mem(self, node: int, gpu: int) -> float: ...

    def room_mask(self, node: int) -> int: ...

    def index(self, name: str) -> Any: ...

    def wake_at(self, time: float, vc: VcView) -> None: ...

    def duration(self, job: Job) -> float: ...

    def remaining(self, job: Job) -> float: ...

    def measured(self, job: Job) -> Any: ...

    def speed_model(self) -> Any: ...


class MissingIndexError(LookupError):
    """A plug-in read an index it did not declare (``needs_indexes``), so no driver made it."""


class SchedulingView:
    """What a policy may look at: the clock, occupancy, queues, declared indexes and (for
    oracles) truth. ``state`` is the driver's handle on the kernel, not for policies."""

    __slots__ = ("_wakeups", "compat_tick", "gpu_count", "indexes", "max_jobs_per_gpu", "node_free", "node_gpus",
                 "node_holders", "node_local", "node_mask", "node_mem", "node_slot", "node_specs", "now", "oracle",
                 "state", "truth")

    def __init__(self, state: ClusterState, oracle: bool, compat_tick: bool = False,
                 indexes: Mapping[str, Any] | None = None, truth: Any = None) -> None:
        self.state = state
        self.truth = truth  # the simulated driver's physics (oracles only): remaining(job, now), speed_model
        self.now = 0.0
        self.oracle = oracle
        self.compat_tick = compat_tick
        self._wakeups: list[tuple[float, int]] = []
        self.indexes: Mapping[str, Any] = dict(indexes or {})  # made by the driver (sched/indexes.py)
        self.max_jobs_per_gpu = state.cap
        # the state's own lists (it appends to them and never rebinds them)
        self.node_free = state.node_free
        self.node_mask = state.node_mask
        self.node_gpus = state.node_gpus
        self.node_mem = state.node_mem
        self.node_slot = state.node_slot
        self.node_local = state.node_local
        self.node_specs = state.node_specs
        self.node_holders = state.node_holders
        self.gpu_count = state.gpu_count

    # occupancy ---------------------------------------------------------------------------
    def vc(self, name: str) -> VcState:
        return self.state.vcs[self.state.vc_index[name]]

    def gpu_holders(self, node: int, gpu: int) -> list[Job]:
        return self.state.gpu_holders(node, gpu)

    def gpu_free_mem(self, node: int, gpu: int) -> float:
        """Memory left on a GPU according to its holders' *predicted* memory."""
        return self.state.gpu_free_mem(node, gpu)

    def room_mask(self, node: int) -> int:
        """GPUs of ``node`` that may take one more job: free ones, plus (sharing) those below the cap."""
        return self.state.room_mask(node)

    def index(self, name: str) -> Any:
        """The index ``name`` the driver made for this state because a plug-in declared it."""
        try:
            return self.indexes[name]
        except KeyError:
            raise MissingIndexError(f"no index {name!r} on this view: a plug-in that reads it declares it "
                                    f"in needs_indexes (made: {', '.join(self.indexes) or 'none'})") from None

    # truth, for oracle policies only ---------------------------------------------------
    def _physics(self, job: Job, what: str) -> Any:
        """The driver's physics, for an oracle's view that has one (else OracleAccessError)."""
        if not self.oracle:
            raise OracleAccessError(f"policy is not an oracle: {what} of {job.job_id} is hidden")
        if self.truth is None:
            raise OracleAccessError(f"this driver has no ground truth: {what} of {job.job_id} is unknown")
        return self.truth

    def duration(self, job: Job) -> float:
        """True duration (solo seconds), from the driver's physics."""
        return self._physics(job, "true duration").duration(job)

    def remaining(self, job: Job) -> float:
        """True remaining run time now (solo seconds), from the driver's physics."""
        return self._physics(job, "remaining time").remaining(job, self.now)

    def measured(self, job: Job) -> Any:
        """Measured utilisation, peak memory and final status (a :class:`~dlsched.core.job.Measured`),
        from the driver's physics."""
        return self._physics(job, "measured resources").measured(job)

    def speed_model(self):
        """The ground-truth speed model the engine runs (e.g. ``--speed-model colocation`` with
        its pair table; None: no model or no physics), so an oracle knows the same truth the
        engine applies."""
        if not self.oracle:
            raise OracleAccessError("policy is not an oracle: the ground-truth speed model is hidden")
        return None if self.truth is None else self.truth.speed_model

    # timers ------------------------------------------------------------------------------
    def wake_at(self, time: float, vc: VcState) -> None:
        """Ask for another scheduling pass of ``vc`` at ``time`` (e.g. a periodic re-sort)."""
        self._wakeups.append((time, vc.vid))
