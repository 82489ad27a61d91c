"""The read-only view a policy decides on.

The same view type serves the simulator and the live service. It exposes occupancy (nodes,
GPUs with their holders and predicted memory, VCs and queues) and the clock; ground truth
(true durations and remaining times, the engine's ground-truth speed model) only to policies that
declare themselves oracles — that declaration is the explicit grant. Remaining times and the
speed model are not the kernel's: they come from ``truth``, the physics a simulated driver hands
an oracle's view (:class:`dlsched.sim.physics.Physics`); the live service has none. Everything else about a job that a policy may read is on the
job itself (request and predictions); its truth fields raise
:class:`~dlsched.core.job.OracleAccessError` while a non-oracle policy runs.
"""

from __future__ import annotations

from dlsched.core.job import Job, OracleAccessError
from dlsched.kernel.state import ClusterState, VcState

__all__ = ["OracleAccessError", "SchedulingView"]


class SchedulingView:
    """What a policy may look at: the clock, occupancy, queues, and (for oracles) truth."""

    __slots__ = ("state", "now", "oracle", "compat_tick", "_wakeups", "truth")

    def __init__(self, state: ClusterState, oracle: bool, compat_tick: bool = False, truth=None) -> None:
        self.state = state
        self.truth = truth  # the simulated driver's physics (oracles only): remaining(job, now), speed_model
        self.now = 0.0
        self.oracle = oracle
        self.compat_tick = compat_tick
        self._wakeups: list[tuple[float, int]] = []

    # occupancy ---------------------------------------------------------------------------
    @property
    def node_free(self) -> list[int]:
        return self.state.node_free

    @property
    def node_mask(self) -> list[int]:
        return self.state.node_mask

    @property
    def node_gpus(self) -> list[int]:
        return self.state.node_gpus

    @property
    def max_jobs_per_gpu(self) -> int:
        return self.state.cap

    def vc(self, name: str) -> VcState:
        return self.state.vcs[self.state.vc_index[name]]

    def gpu_holders(self, node: int, gpu: int) -> list[Job]:
        return self.state.gpu_holders(node, gpu)

    def gpu_free_mem(self, node: int, gpu: int) -> float:
        """Memory left on a GPU according to its holders' *predicted* memory."""
        return self.state.gpu_free_mem(node, gpu)

    def room_mask(self, node: int) -> int:
        return self.state.room_mask(node)

    # truth, for oracle policies only ---------------------------------------------------
    def duration(self, job: Job) -> float:
        if not self.oracle:
            raise OracleAccessError(f"policy is not an oracle: true duration of {job.job_id} is hidden")
        return job._duration

    def remaining(self, job: Job) -> float:
        """True remaining run time now (solo seconds), from the driver's physics."""
        if not self.oracle:
            raise OracleAccessError(f"policy is not an oracle: remaining time of {job.job_id} is hidden")
        if self.truth is None:
            raise OracleAccessError(f"this driver has no ground truth: remaining time of {job.job_id} is unknown")
        return self.truth.remaining(job, self.now)

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
