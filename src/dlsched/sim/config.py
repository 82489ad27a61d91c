"""Simulation options. ``compat="helios"`` reproduces the HeliosArtifact simulator's quirks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dlsched.core.job import Job


def helios_checkpoint_overhead(job: Job) -> float:
    """HeliosArtifact's checkpoint/restart cost: 7 s (1 GPU), 30 s (<= 8 GPUs), 60 s (> 8)."""
    if job.gpus <= 1:
        return 7.0
    return 30.0 if job.gpus <= 8 else 60.0


def no_overhead(job: Job) -> float:
    return 0.0


COMPAT_MODES = ("none", "helios")


@dataclass(slots=True)
class SimConfig:
    """Knobs of the engine (not of policies).

    * ``preemption_overhead``: seconds of extra work a preempted job must redo.
    * ``compat``: ``"none"`` (exact event times) or ``"helios"``: a preempted-capable job
      (any job run by a preemptive policy) ends one tick after its remaining time reaches 0,
      as the reference's 1-second-tick SRTF does. Integer times are kept as they are.
    * ``check_invariants``: verify the whole cluster state after every scheduling pass
      (slow; always on in the test-suite). Double-booking is always rejected.
    * ``timeline_interval``: at most one timeline row per this many seconds.
    * ``max_jobs_per_gpu``: how many jobs one GPU may hold (1 = exclusive GPUs); the kernel
      enforces it.
    * ``queues``: the cluster file's queues (:class:`~dlsched.kernel.quotas.QueueSpec`); when
      one may borrow, VCs lend idle GPUs and reclaim them (empty: fixed VCs, as Helios).
    * ``max_failures``: a job that fails more often than this stops the simulation with an
      error (a job that can never run must not loop forever).
    """

    preemption_overhead: Callable[[Job], float] = helios_checkpoint_overhead
    compat: str = "none"
    check_invariants: bool = False
    timeline_interval: float = 60.0
    max_jobs_per_gpu: int = 1
    max_failures: int = 10
    queues: tuple = ()
    queue_half_life: float = 7 * 86400.0  # seconds: fair share between queues (cluster file)

    def __post_init__(self) -> None:
        if self.compat not in COMPAT_MODES:
            raise ValueError(f"unknown compat mode {self.compat!r}; choose from {', '.join(COMPAT_MODES)}")
        if self.max_jobs_per_gpu < 1:
            raise ValueError("max_jobs_per_gpu must be >= 1")
        if self.max_failures < 0:
            raise ValueError("max_failures must be >= 0")
