"""Delivered GPU utilisation: how much work the GPUs really did, beside how many were busy.

The busy-GPU share (``gpu_utilization``) counts a GPU as fully used as soon as one job holds it;
with sharing and interference that says little. Here each GPU delivers
``min(100 %, sum over its jobs of measured utilisation x current rate)`` — a job that keeps a GPU
60 % busy alone and runs at 0.8 of its solo speed beside a partner delivers 48 % — integrated
over time exactly (the level only changes at transitions). A job without a measured utilisation
counts as 100 % (it keeps its GPUs fully busy, as the busy share assumes).

A kernel observer: it is told about every start and stop *before* the change, integrates the
level up to that instant, and marks the nodes whose level the change can move to be recomputed
at the next event, when the change and the re-rating are complete: the job's nodes, and the
nodes of each job sharing them whose rate the change moved (only a start or stop next to a job
re-rates it, so its rate is compared with the one its GPUs were last measured at). The engine
reads truth (measured utilisation); policies never see this. Runs attach it only with a speed
model or sharing.
"""

from __future__ import annotations

from dlsched.core.bits import bit_tuple
from dlsched.core.job import Job
from dlsched.core.truth import gpu_util as _true_util
from dlsched.kernel.state import ClusterState


class DeliveredUtilisation:
    """Time-weighted delivered utilisation of all GPUs (GPU-seconds of 100 % work)."""

    def __init__(self) -> None:
        self.state: ClusterState | None = None
        self.area = 0.0
        self.level = 0.0           # GPUs' worth of delivered work right now
        self.t_last: float | None = None
        self._node_level: dict[int, float] = {}
        self._dirty: set[int] = set()
        self._new: list[Job] = []  # started jobs: their placement is known only after the start
        self._watch: dict[Job, None] = {}  # jobs beside a change: their rate may have moved
        self._rate: dict[Job, float] = {}  # running job -> the rate its GPUs were last measured at

    def attach(self, state: ClusterState) -> None:
        self.state = state
        self.area, self.level, self.t_last = 0.0, 0.0, None
        self._node_level, self._dirty, self._new = {}, set(), []
        self._watch, self._rate = {}, {}

    # -- observer callbacks (called before the change) -------------------------------------------
    def started(self, job: Job, vc, now: float) -> None:
        self._advance(now)
        self._new.append(job)

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self._advance(now)
        self._touch(job)

    # -- bookkeeping ---------------------------------------------------------------------------
    def _touch(self, job: Job) -> None:
        """Mark the job's nodes, and watch every job on them (the job included)."""
        holders, dirty, watch = self.state.node_holders, self._dirty, self._watch
        for node, _ in job.placement or ():
            dirty.add(node)
            for other in holders[node]:
                watch[other] = None

    def _rerated(self) -> None:
        """Mark the nodes of the watched jobs whose rate moved (a new job's too); forget the
        rates of those that stopped."""
        rates, dirty = self._rate, self._dirty
        for job in self._watch:
            placement = job.placement
            if placement is None:
                rates.pop(job, None)
            elif rates.get(job) != job.speed:
                rates[job] = job.speed
                for node, _ in placement:
                    dirty.add(node)
        self._watch.clear()

    def _advance(self, now: float) -> None:
        if self._new:
            for job in self._new:
                self._touch(job)
            self._new.clear()
        if self._watch:
            self._rerated()
        if self._dirty:
            for node in self._dirty:
                new = self._measure(node)
                self.level += new - self._node_level.get(node, 0.0)
                self._node_level[node] = new
            self._dirty.clear()
        if self.t_last is not None and now > self.t_last:
            self.area += self.level * (now - self.t_last)
        if self.t_last is None or now > self.t_last:
            self.t_last = now

    def _measure(self, node: int) -> float:
        """Delivered work on ``node`` now, in GPUs (each GPU capped at 1)."""
        holders = self.state.node_holders[node]
        if not holders:
            return 0.0
        # no GPU shared on this node (the usual case): each GPU holds one job's share, summed in
        # the order the general case below sums them (job by job, lowest GPU first): the same float
        levels: list[float] = []
        union = 0
        for job, mask in holders.items():
            if union & mask:
                break
            union |= mask
            util = _true_util(job)
            share = (1.0 if util != util else util * 0.01) * job.speed  # noqa: PLR0124 - NaN check
            levels += [share if share < 1.0 else 1.0] * mask.bit_count()
        else:
            return sum(levels)
        per_gpu: dict[int, float] = {}  # keyed by the GPU's index, in the order first held
        get = per_gpu.get
        for job, mask in holders.items():
            util = _true_util(job)
            share = (1.0 if util != util else util * 0.01) * job.speed  # noqa: PLR0124 - NaN check, hot path
            for g in bit_tuple(mask):
                per_gpu[g] = get(g, 0.0) + share
        return sum(v if v < 1.0 else 1.0 for v in per_gpu.values())  # noqa: FURB136 - min() is slower

    def summary(self, metrics) -> dict:
        """``delivered_gpu_utilization`` (share of all GPU time spent on real work) and
        ``delivered_per_busy_gpu`` (the same over busy GPU time: how full a busy GPU was)."""
        self._advance(metrics.t_end)
        span, total = metrics.span, self.state.total_gpus
        busy = metrics.busy_area
        return {"delivered_gpu_utilization": self.area / (total * span) if span > 0 and total else 0.0,
                "delivered_per_busy_gpu": self.area / busy if busy > 0 else 0.0}
