"""What is measured of jobs on a GPU: one job alone (:class:`JobProfile`) and two jobs sharing it
(:class:`PairObservation`).

These types sit in ``core`` because both sides of the profile data use them: the readers of the
measured tables (:mod:`dlsched.profiles`) produce them and the interference models
(:mod:`dlsched.predictors.interference`) and the ground-truth co-location model
(:mod:`dlsched.models.colocation`) consume them. With the types here, neither package imports the
other to name them (the readers used to import ``predictors.interference.base``, which imports
the readers: a package cycle).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobProfile:
    """What is known of one job running alone: its model type and resource use.

    ``model`` is the architecture name as the profile sets spell it (``"ResNet-50"``), or ``""``
    when unknown. ``gpu_util`` is in percent (0-100), ``gpu_mem_mib`` the peak memory.
    ``mem_util`` (memory-bandwidth utilisation, percent) is NaN when not measured; so are
    ``gpu_util`` and ``gpu_mem_mib`` for profile sets that only measured throughput (Gavel).
    ``speed`` is the isolated training throughput in samples/s on the profiled GPU (NaN if
    unknown); ``dataset`` the training data set as the profile set names it.

    Profiles with NaN fields never compare equal (NaN != NaN): identify a job by :attr:`key`.
    """

    model: str
    gpu_util: float
    gpu_mem_mib: float
    batch_size: int = 0
    amp: bool = False
    mem_util: float = float("nan")
    speed: float = float("nan")
    dataset: str = ""

    @property
    def key(self) -> tuple[str, int, bool]:
        """The job configuration (model, batch size, AMP): what a measured table is keyed by."""
        return (self.model, int(self.batch_size), bool(self.amp))


@dataclass(frozen=True)
class PairObservation:
    """One measured co-location: both jobs' profiles, the GPU type and each job's slowdown.

    ``censored_a``/``censored_b``: the measurement of that side was clipped at the isolated
    throughput, so its true slowdown is at most the recorded one (Gavel V100). ``feasible`` is
    False when the pair could not run together (out of memory, or never measured); its slowdowns
    are then ``inf``. ``gpu_type`` is ``""`` when the profile set does not record it (Lucid).
    """

    a: JobProfile
    b: JobProfile
    gpu_type: str
    slowdown_a: float
    slowdown_b: float
    censored_a: bool = False
    censored_b: bool = False
    feasible: bool = True
