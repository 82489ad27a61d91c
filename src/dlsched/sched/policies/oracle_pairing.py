"""The co-location oracle (upper bound): pairs with the least *true* interference.

It reads ground truth -- the engine's pair slowdowns and each job's true memory -- so it declares
``oracle = True`` (the explicit grant). Its truth is the engine's own ground-truth speed model,
taken from the view at every pass (:meth:`~dlsched.kernel.view.ClusterView.speed_model`, the
kernel's grant to oracles): with ``--speed-model colocation`` the selected pair table (built in,
``--profiles`` folder or ``.json``), ``pair(job, other, gpu) -> s(job | other)``. A model
without pair slowdowns (none, time-sliced, topology) tells pairs apart by nothing: every pair is
worth the same and the first running job's GPU in running order is taken. Its OOM check uses the
true memory, so it never crashes a job.

It may **decline** a pair: when the two jobs together would deliver less than ``min_combined``
(1.25 by default) times one job's solo work per second (``1/s(a|b) + 1/s(b|a)``, true slowdowns),
the waiting job waits for an idle GPU instead. Always pairing (``min_combined=0``) made it lose
to no sharing on some seeds (a pair only just above time slicing stretches a long job for
little gain), so it was no upper bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.pairing_base import PairingParams, PairingPolicy


@dataclass(frozen=True, slots=True)
class OracleParams(PairingParams):
    """The oracle's options: the pairing window, and the least combined normalised speed of a
    pair worth running together (below it the jobs wait for idle GPUs)."""

    min_combined: float = field(default=1.25, metadata={"help": "oracle-pairing: the least combined normalised "
                                                               "speed of a pair worth running together."})

    def __post_init__(self) -> None:
        PairingParams.__post_init__(self)
        if not 0 <= self.min_combined < float("inf"):
            raise ValueError(f"--param min_combined must be a finite number >= 0, got {self.min_combined}")


class OraclePairingPolicy(PairingPolicy):
    """Oracle pairing: the least true interference (the engine's pair truth), true memory."""

    name = "oracle-pairing"
    Params = OracleParams
    oracle = True

    def __init__(self, placer, backfill: bool = False, window: int = 64, min_combined: float = 1.25) -> None:
        super().__init__(placer, backfill, window)
        if min_combined < 0:
            raise ValueError(f"the oracle's min_combined must be >= 0, got {min_combined}")
        self.min_combined = float(min_combined)
        self.truth = None  # the engine's speed model, granted at each pass
        self._keys: dict[str, str] = {}

    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        truth = view.speed_model()
        if truth is not self.truth:
            pairs = callable(getattr(truth, "pair", None)) and hasattr(truth, "table")
            self.truth = truth if pairs else None
            self._keys = {}
        return super().schedule(view, vc)

    def memory(self, job: Job, capacity: float) -> float:
        m = job._measured.gpu_mem_mib
        return m if m == m else super().memory(job, capacity)

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        truth = self.truth
        if truth is None:
            return 0.0
        gpu = self._keys.get(gpu_type)
        if gpu is None:
            gpu = self._keys[gpu_type] = truth.table.gpu_key(gpu_type)
        s_w, s_r = truth.pair(waiting, running, gpu), truth.pair(running, waiting, gpu)
        if 1.0 / s_w + 1.0 / s_r < self.min_combined:
            return float("inf")  # declined: not worth running together
        return s_w + s_r
