"""The contract every interference model follows, and the two trivial baselines.

A model answers one question: *how much slower does job ``a`` run when it shares a GPU with
``others``?* — a slowdown factor ``s >= 1`` (``s = 1 / normalised speed``). Policies ask it with
**predicted** profiles (what they may see); the simulator's ground-truth speed model answers the
same question from **measured** pair tables. Keeping one profile type for both lets a lookup
table of measurements double as an oracle policy's model and as the engine's truth.

Models are scikit-learn style estimators: hyper-parameters in ``__init__``, ``fit(pairs)`` learns
attributes ending in ``_``, ``slowdown`` is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from dlsched.predictors.interference.combine import combine_pairwise


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


@runtime_checkable
class InterferenceModel(Protocol):
    """Predicts the slowdown of a job from its co-runners on one GPU."""

    name: str

    def fit(self, pairs: Sequence[PairObservation]) -> "InterferenceModel":
        """Learn from measured pairs; returns ``self``."""
        ...

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        """Slowdown factor (>= 1) of ``a`` while ``others`` share its GPU (1.0 when alone)."""
        ...


class ConstantSlowdown:
    """Baseline: every co-located pair slows each job ``factor`` times (1 = no interference,
    2 = plain time slicing of two jobs). Alone, a job runs at full speed; three or more jobs
    combine by :func:`combine_pairwise` (``factor`` 2 with two co-runners gives 3)."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self.name = f"constant-{factor:g}"

    def fit(self, pairs: Sequence[PairObservation]) -> "ConstantSlowdown":
        return self

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        return combine_pairwise([self.factor] * len(others))
