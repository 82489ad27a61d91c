"""Co-scheML's Algorithm 1 as a policy skeleton; subclasses say how good a pair is.

A pass over a VC:

1. **idle GPUs first** (lines 2-4): pending jobs in arrival order take idle GPUs, exclusively,
   through the placement (``spread`` by default: as many nodes as possible); a job that does not
   fit is skipped.
2. **pairs** (lines 5-12): when jobs still wait, every GPU running one single-GPU job alone
   (``find_exclusive_app``) is paired with every waiting single-GPU job (the first ``window`` of
   them in arrival order); the pairs are sorted by :meth:`PairingPolicy.pair_value` (lower is
   better) and taken greedily, each running job and each waiting job at most once, if
   :meth:`PairingPolicy.can_pair` (the OOM check: predicted memory of both fits the GPU).

A GPU therefore holds at most two jobs (Co-scheML pairs; the cluster's cap must be >= 2).
Multi-GPU jobs only ever take idle GPUs. Policies that do not predict OOM (Loadbalance, Mystic)
still check a job once it crashed: its corrected request is known then, as in the failover.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.framework import PlacementPipeline
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.sharing.load import pred_mem, too_small

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_DECLINE = float("inf")  # a pair_value that says "never run these two together"


@dataclass(frozen=True, slots=True)
class PairingParams:
    """The pairing policies' shared knob: how many waiting jobs (in arrival order) a pass
    considers for pairing."""

    window: int = field(default=64, metadata={"help": "Pairing policies: waiting jobs, in arrival order, a pass "
                                                      "considers for pairing."})

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"--param window must be >= 1 job, got {self.window}")


class PairingPolicy(OrderingPolicy):
    """Idle GPUs first, then the lowest-valued (running job, waiting job) pairs."""

    name = "pairing"
    Params = PairingParams
    key_attr = "submit_time"
    default_placement = "spread"
    oom_check = True       # predict OOM before pairing (Co-scheML does; Loadbalance, Mystic do not)

    def __init__(self, placer, backfill: bool = False, window: int = 64) -> None:
        super().__init__(placer, backfill)
        if window < 1:
            raise ValueError(f"the pairing window must be >= 1 job, got {window}")
        self.window = window
        self.exclusive = PlacementPipeline(getattr(placer, "scorers", [(placer, 1.0)]),
                                           getattr(placer, "filters", ()), share=False)

    # -- what subclasses define --------------------------------------------------------------
    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        """How bad it is to run ``waiting`` beside ``running`` (lower is better; ``inf``: decline
        the pair, the waiting job keeps waiting for an idle GPU)."""
        raise NotImplementedError

    def pair_values(self, pairs: list[tuple[Job, Job, str, float]]) -> list[float]:
        """:meth:`pair_value` of each (running, waiting, GPU type, capacity); a model that
        predicts many pairs at once overrides this."""
        return [self.pair_value(r, w, g, c) for r, w, g, c in pairs]

    def memory(self, job: Job, capacity: float) -> float:
        """The memory the OOM check counts for ``job`` (predicted; oracles override)."""
        return pred_mem(job, capacity)

    def can_pair(self, running: Job, waiting: Job, capacity: float) -> bool:
        if not (self.oom_check or running.failures or waiting.failures):
            return True
        return self.memory(running, capacity) + self.memory(waiting, capacity) <= capacity

    # -- the pass ----------------------------------------------------------------------------
    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        waiting: list[Job] = []
        exclusive = self.exclusive
        place = exclusive.place
        for job in list(vc.queue):
            if job.gpus <= vc.free:
                fit = place(view, vc, job)
                small = too_small(vc, job) if fit.status is _FITS else 0
                if small and any(small >> view.node_local[n] & 1 for n, _ in fit.placement):
                    # the placer's own rule chose GPUs smaller than the prediction (its bucket
                    # shortcut reads no memory): the stages, which keep the job off such nodes
                    fit = PlacementPipeline.place(exclusive, view, vc, job)
                if fit.status is _FITS:
                    yield Start(job, fit.placement)
                    continue
                if fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)
                    continue
            if job.gpus == 1 and len(waiting) < self.window:
                waiting.append(job)
        if not waiting or view.max_jobs_per_gpu < 2:
            return
        singles = self.exclusive_apps(view, vc)
        if not singles:
            return
        specs, node_mem = view.node_specs, view.node_mem
        pairs = [(running, job, specs[node].gpu_type.name, node_mem[node])
                 for running, node, _ in singles for job in waiting]
        values = self.pair_values(pairs)
        n = len(waiting)
        ranked = sorted((v, idx // n, idx % n) for idx, v in enumerate(values))
        used_s, used_w = set(), set()
        for v, i, k in ranked:
            if v == _DECLINE:
                break  # sorted last: every pair from here on is declined
            if i in used_s or k in used_w:
                continue
            running, node, gpu = singles[i]
            if not self.can_pair(running, waiting[k], node_mem[node]):
                continue
            used_s.add(i)
            used_w.add(k)
            yield Start(waiting[k], ((node, 1 << gpu),), True)

    @staticmethod
    def exclusive_apps(view: ClusterView, vc: VcState) -> list[tuple[Job, int, int]]:
        """(job, node, GPU) for every single-GPU job running alone on its GPU in an open node."""
        node_slot, gpu_count = view.node_slot, view.gpu_count
        out = []
        for job in vc.running:
            placement = job.placement
            if job.gpus != 1 or len(placement) != 1:
                continue
            node, mask = placement[0]
            if node_slot[node] < 0:
                continue
            g = mask.bit_length() - 1
            if gpu_count[node][g] == 1:
                out.append((job, node, g))
        return out
