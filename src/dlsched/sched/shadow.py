"""EASY's reservation for the queue head: the shadow time and the GPUs free then, per node.

The head cannot start now. Walking the running jobs of its VC by estimated end, each end frees
the GPUs its placement holds on its nodes; the **shadow time** is the first end after which the
head's shape fits the free GPUs. A later job that fits now may start ahead of the head when it
is estimated to end by the shadow time, or when the GPUs it takes leave the head's shape still
fitting at the shadow time (EASY's "extra" GPUs, here per node rather than as a count).

The shape check follows the pipeline's placement rule in counts: a placer that keeps a job on
one node (consolidate) needs one node with enough free GPUs, or for a job larger than a node
whole free nodes plus one node for the rest; any other placer needs enough free GPUs in the VC.
The counters are updated per node, so a check costs O(1) and a head's walk O(nodes + running).
"""

from __future__ import annotations

import math

from dlsched.core.job import Job


class ShapeFit:
    """Whether a job of ``need`` GPUs fits per-node free counts, kept up to date per change."""

    __slots__ = ("free", "need", "mode", "per", "whole", "rest", "n_ok", "n_full", "n_rest", "total")

    def __init__(self, free: list[int], need: int, single_node: bool, max_node_gpus: int, gpus_per_node: int) -> None:
        self.free = free
        self.need = need
        if single_node and need <= max_node_gpus:
            self.mode = "one"
        elif single_node and gpus_per_node:
            self.mode = "whole"
        else:
            self.mode = "sum"
        self.per = gpus_per_node
        self.whole, self.rest = divmod(need, gpus_per_node) if gpus_per_node else (0, 0)
        self.n_ok = self.n_full = self.n_rest = 0
        self.total = 0
        for f in free:
            self._count(f, 1)

    def _count(self, f: int, sign: int) -> None:
        self.total += sign * f
        if f >= self.need:
            self.n_ok += sign
        if self.per:
            if f >= self.per:
                self.n_full += sign
            elif self.rest and f >= self.rest:
                self.n_rest += sign

    def change(self, local: int, delta: int) -> None:
        """Node ``local`` gains ``delta`` free GPUs (negative: loses them)."""
        old = self.free[local]
        self._count(old, -1)
        self.free[local] = old + delta
        self._count(old + delta, 1)

    def ok(self) -> bool:
        if self.mode == "one":
            return self.n_ok > 0
        if self.mode == "whole":
            if self.n_full < self.whole:
                return False
            return not self.rest or self.n_full > self.whole or self.n_rest > 0
        return self.total >= self.need


class Shadow:
    """The head's reservation: its shadow time and the free GPUs then (what backfill may still take)."""

    __slots__ = ("time", "fit", "local_of")

    def __init__(self, time: float, fit: ShapeFit, local_of: dict[int, int]) -> None:
        self.time, self.fit, self.local_of = time, fit, local_of

    def admits(self, placement, end: float) -> bool:
        """Whether a job placed at ``placement`` now, estimated to end at ``end``, keeps the head's
        reservation; if so and it runs past the shadow time, its GPUs are taken from then on."""
        if end <= self.time:
            return True
        taken = [(self.local_of[node], mask.bit_count()) for node, mask in placement if node in self.local_of]
        fit = self.fit
        for local, k in taken:
            fit.change(local, -k)
        if fit.ok():
            return True
        for local, k in taken:
            fit.change(local, k)
        return False


def shadow_of(head: Job, view, vc, ends: list[tuple[float, Job]], single_node: bool, now: float) -> Shadow | None:
    """The reservation of ``head`` from the running jobs' estimated ``ends`` (sorted); None when
    no known end makes room for it (a running job of unknown end, or a head larger than the VC)."""
    nodes = vc.nodes
    local_of = {node: i for i, node in enumerate(nodes)}
    node_free, node_slot = view.node_free, view.node_slot
    fit = ShapeFit([node_free[n] for n in nodes], head.gpus, single_node, vc.max_node_gpus, vc.gpus_per_node)
    if fit.ok():   # the counts fit now but the placement did not (e.g. a permit): reserve now
        return Shadow(now, fit, local_of)
    for i, (end, job) in enumerate(ends):
        if end == math.inf:
            return None
        for node, mask in job.placement or ():
            local = local_of.get(node)
            if local is not None and node_slot[node] >= 0:
                fit.change(local, mask.bit_count())
        if i + 1 < len(ends) and ends[i + 1][0] == end:
            continue   # jobs that end together free their GPUs together
        if fit.ok():
            return Shadow(end, fit, local_of)
    return None
