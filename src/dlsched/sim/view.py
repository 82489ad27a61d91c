"""The read-only view a policy decides on.

The same view type serves the simulator and the live service. A policy that does not declare
itself an oracle gets an error if it asks for a job's true duration or remaining time: it must
use predictions (``job.pred_duration``, ``job.priority``) instead.
"""

from __future__ import annotations

from dlsched.core.job import Job, JobState
from dlsched.sim.state import ClusterState, VcState


class OracleAccessError(PermissionError):
    """A non-oracle policy asked for a job's true duration."""


class SchedulingView:
    """What a policy may look at: the clock, occupancy, queues, and (for oracles) truth."""

    __slots__ = ("state", "now", "oracle", "compat_tick", "_wakeups")

    def __init__(self, state: ClusterState, oracle: bool, compat_tick: bool = False) -> None:
        self.state = state
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

    def vc(self, name: str) -> VcState:
        return self.state.vcs[self.state.vc_index[name]]

    # truth, for oracle policies only ---------------------------------------------------
    def duration(self, job: Job) -> float:
        if not self.oracle:
            raise OracleAccessError(f"policy is not an oracle: true duration of {job.job_id} is hidden")
        return job.duration

    def remaining(self, job: Job) -> float:
        """True remaining run time now (solo seconds)."""
        if not self.oracle:
            raise OracleAccessError(f"policy is not an oracle: remaining time of {job.job_id} is hidden")
        if job.state is JobState.RUNNING:
            left = job.remaining - (self.now - job.run_since) * job.speed
            return left if left > 0.0 else 0.0
        return job.remaining

    # timers ------------------------------------------------------------------------------
    def wake_at(self, time: float, vc: VcState) -> None:
        """Ask for another scheduling pass of ``vc`` at ``time`` (e.g. a periodic re-sort)."""
        self._wakeups.append((time, vc.vid))
