"""Delivered GPU utilisation: how much work the GPUs really did, beside how many were busy.

The busy-GPU share (``gpu_utilization``) counts a GPU as fully used as soon as one job holds it;
with sharing and interference that says little. Here each GPU delivers
``min(100 %, sum over its jobs of measured utilisation x current rate)`` — a job that keeps a GPU
60 % busy alone and runs at 0.8 of its solo speed beside a partner delivers 48 % — integrated
over time exactly (the level only changes at transitions). A job without a measured utilisation
counts as 100 % (it keeps its GPUs fully busy, as the busy share assumes).

A kernel observer: it is told about every start and stop *before* the change and integrates
the level up to that instant. The level is kept per GPU as the sum of its jobs' shares, so a
change costs the GPUs whose sum it moves, not a re-measure of whole nodes: a stopping job's
share leaves its GPUs at once; a started job's share is added at the next event, when its
placement and the re-rating are complete; the jobs a change can re-rate (those on its GPUs or
on its nodes: the speed model's scope) are compared with the rate their share was counted at,
and a moved rate moves its share on all its GPUs. The engine reads truth (measured utilisation);
policies never see this. Runs attach it only with a speed model or sharing.
"""

from __future__ import annotations

from dlsched.core.bits import bit_tuple
from dlsched.core.job import Job
from dlsched.core.truth import gpu_util as _true_util
from dlsched.kernel.state import ClusterState


class DeliveredUtilisation:
    """Time-weighted delivered utilisation of all GPUs (GPU-seconds of 100 % work).

    ``scope``: whose rate a start or stop can move, the speed model's own ``scope`` -- ``"gpu"``:
    the jobs sharing one of its GPUs (time slicing, co-location tables; also right without a
    speed model, where no rate moves); ``"node"`` (the default, right for every model): every job
    on its nodes. A narrower scope than the model's would miss re-rated jobs; a wider one only
    compares more rates."""

    def __init__(self, scope: str = "node") -> None:
        if scope not in ("gpu", "node"):
            raise ValueError(f"scope must be 'gpu' or 'node', got {scope!r}")
        self.by_gpu = scope == "gpu"
        self.state: ClusterState | None = None
        self.area = 0.0
        self.level = 0.0           # GPUs' worth of delivered work right now
        self.t_last: float | None = None
        self._sums: dict[int, list[float]] = {}  # node -> per GPU, the shares of its jobs summed
        self._new: list[Job] = []  # started jobs: their placement is known only after the start
        self._watch: dict[Job, None] = {}  # jobs beside a change: their rate may have moved
        self._share: dict[Job, float] = {}  # running job -> the share counted on each of its GPUs

    def attach(self, state: ClusterState) -> None:
        self.state = state
        self.area, self.level, self.t_last = 0.0, 0.0, None
        self._sums, self._new, self._watch, self._share = {}, [], {}, {}

    # -- observer callbacks (called before the change) -------------------------------------------
    def started(self, job: Job, vc, now: float) -> None:
        self._advance(now)
        self._new.append(job)

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self._advance(now)
        share = self._share.pop(job, None)
        if share is not None:
            self._add(job.placement, -share)
        self._neighbours(job.placement)

    # -- bookkeeping ---------------------------------------------------------------------------
    def _neighbours(self, placement) -> None:
        """Watch the jobs a change on ``placement`` may re-rate: those on its GPUs, or on its nodes."""
        holders, watch = self.state.node_holders, self._watch
        if self.by_gpu:
            for node, mask in placement or ():
                for other, m in holders[node].items():
                    if m & mask:
                        watch[other] = None
            return
        for node, _ in placement or ():
            for other in holders[node]:
                watch[other] = None

    def _add(self, placement, delta: float) -> None:
        """Move the share counted on each GPU of ``placement`` by ``delta``, and the level with it
        (each GPU delivers at most 1)."""
        sums, level = self._sums, self.level
        for node, gpus in placement:
            row = sums.get(node)
            if row is None:
                row = sums[node] = [0.0] * self.state.node_gpus[node]
            for g in bit_tuple(gpus):
                old = row[g]
                new = row[g] = old + delta
                level += (new if new < 1.0 else 1.0) - (old if old < 1.0 else 1.0)
        self.level = level

    def _advance(self, now: float) -> None:
        if self._new:
            shares = self._share
            for job in self._new:
                placement = job.placement
                if placement is None or job in shares:
                    continue
                share = shares[job] = _share_of(job)
                self._add(placement, share)
                self._neighbours(placement)
            self._new.clear()
        if self._watch:
            shares = self._share
            for job in self._watch:
                old = shares.get(job)
                if old is None:  # stopped, or started and counted at its own turn
                    continue
                share = _share_of(job)
                if share != old:
                    shares[job] = share
                    self._add(job.placement, share - old)
            self._watch.clear()
        if self.t_last is not None and now > self.t_last:
            self.area += self.level * (now - self.t_last)
        if self.t_last is None or now > self.t_last:
            self.t_last = now

    def summary(self, metrics) -> dict:
        """``delivered_gpu_utilization`` (share of all GPU time spent on real work) and
        ``delivered_per_busy_gpu`` (the same over busy GPU time: how full a busy GPU was)."""
        self._advance(metrics.t_end)
        span, total = metrics.span, self.state.total_gpus
        busy = metrics.busy_area
        return {"delivered_gpu_utilization": self.area / (total * span) if span > 0 and total else 0.0,
                "delivered_per_busy_gpu": self.area / busy if busy > 0 else 0.0}


def _share_of(job: Job) -> float:
    """What ``job`` delivers on each of its GPUs now: its measured utilisation (100 % without
    one) times its current rate."""
    util = _true_util(job)
    return (1.0 if util != util else util * 0.01) * job.speed  # noqa: PLR0124 - NaN check, hot path
