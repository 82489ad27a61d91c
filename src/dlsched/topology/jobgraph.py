"""Job side of the mapping: batch-size classes, the communication graph and the job profile.

Sec. 4.1.1: the job graph has one vertex per GPU (task) and edges weighted by communication
volume. Sec. 5.1: Caffe is data parallel, so every GPU talks to every other with the same
weight, which depends only on the batch-size class: 4 for the smallest batches down to 1 for
the largest. Sec. 4.2: the profile holds the solo time and co-scheduled behaviour (our
co-scheduled times come from :mod:`dlsched.topology.effects`) plus the minimum utility
(Table 1), below which TOPO-AWARE-P postpones the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class BatchClass(IntEnum):
    """Sec. 2/3: tiny, small, medium, big. Boundaries follow Fig. 4: batch 1-2 gains up to
    1.30x from pack, batch 8 about 1.20x, from 16 up pack and spread are even."""

    TINY = 0     # 1-2
    SMALL = 1    # 3-8
    MEDIUM = 2   # 9-32
    BIG = 3      # > 32


def batch_class(batch_size: int) -> BatchClass:
    if batch_size <= 2:
        return BatchClass.TINY
    if batch_size <= 8:
        return BatchClass.SMALL
    if batch_size <= 32:
        return BatchClass.MEDIUM
    return BatchClass.BIG


# Sec. 5.1: "for different batch sizes, different weights are used, ranging from 4 to 1,
# where 4 represents the smallest batch size and 1 the largest one".
COMM_WEIGHT = {BatchClass.TINY: 4, BatchClass.SMALL: 3, BatchClass.MEDIUM: 2, BatchClass.BIG: 1}
MODELS = ("alexnet", "caffenet", "googlenet")   # A, C (CaffeRef), G of Table 1


@dataclass(slots=True)
class JobProfile:
    """What the scheduler knows about a job (Sec. 4.2).

    ``solo_time`` is the run time alone on the best placement; ``min_utility`` the Table-1
    threshold; ``slo_slowdown`` the largest acceptable execution slowdown over the solo time
    (used only to count SLO violations in the experiments).
    """

    job_id: str
    model: str
    batch_size: int
    gpus: int
    solo_time: float
    min_utility: float = 0.5
    arrival: float = 0.0
    slo_slowdown: float = 1.2
    single_node: bool = True
    # derived at construction (read in the placement search's inner loops):
    batch_class: BatchClass = field(init=False, repr=False, compare=False)
    type_key: tuple[str, int, int] = field(init=False, repr=False, compare=False)
    """Everything the utility depends on besides the cluster: jobs with the same key get the
    same placement on the same machine state (the placement caches rely on it)."""

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose from {MODELS}")
        if self.gpus < 1:
            raise ValueError("a job needs at least one GPU")
        self.batch_class = batch_class(self.batch_size)
        self.type_key = (self.model, int(self.batch_class), self.gpus)

    @property
    def comm_weight(self) -> int:
        return COMM_WEIGHT[self.batch_class]


@dataclass(frozen=True, slots=True)
class CommGraph:
    """Job communication graph: ``edges`` are (task_a, task_b, weight)."""

    tasks: int
    edges: tuple[tuple[int, int, int], ...]

    def weight(self, a: int, b: int) -> int:
        for x, y, w in self.edges:
            if {x, y} == {a, b}:
                return w
        return 0


def comm_graph(profile: JobProfile) -> CommGraph:
    """Data-parallel all-to-all graph with the batch-class weight on every edge (Sec. 5.1)."""
    w = profile.comm_weight
    n = profile.gpus
    return CommGraph(n, tuple((a, b, w) for a in range(n) for b in range(a + 1, n)))
