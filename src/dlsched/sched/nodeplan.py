"""Conservative backfill's plan of one VC per node: each node's free GPUs over time.

A plan in GPU counts (:class:`~dlsched.sched.profile.FreeProfile`) can promise a job a start at
which enough GPUs are free but no node has them, so a placement that keeps a job on one node
(consolidate) cannot honour it. :class:`NodePlan` keeps one step function per node instead and
reserves a job on the nodes where the placement's rule (one node with room; for a job larger
than a node, whole free nodes plus one node for the rest) fits it for its whole estimated run:

* ``times[i]`` starts a step of node ``k`` that lasts until ``times[i + 1]`` (the last lasts for
  ever) with ``free[i]`` GPUs free; it starts at now with the node's free GPUs and gains each
  running job's GPUs on that node at its estimated end;
* a node can start a job of ``g`` GPUs at any point of the intervals :meth:`NodePlan.windows`
  gives (a maximal stretch of steps with ``>= g`` free, less the run time at its end);
* the earliest start of a job is the first point where enough nodes have a window: one for a job
  that fits a node, ``whole`` full nodes plus a distinct one with the rest otherwise (a sweep
  over the windows' ends).

Which nodes a reservation takes follows consolidate's choices at that time: the tightest node
(fewest free, lowest index) for a job of one node; the lowest-indexed full nodes and then the
node with the most free GPUs for the rest. The plan is rebuilt at every pass, so a placement
that later picks other nodes moves the plan with it.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Iterator

from dlsched.sched.profile import FreeProfile

_INF = math.inf


class NodeProfile:
    """Free GPUs of one node from now on, with the reservations taken out."""

    __slots__ = ("times", "free")

    def __init__(self, now: float, free: int, releases: list[tuple[float, int]]) -> None:
        self.times = [now]
        self.free = [free]
        for end, gpus in sorted(releases):
            if end == _INF:
                continue   # an end that is not known frees nothing the plan can count on
            if end <= self.times[-1]:
                self.free[-1] += gpus
            else:
                self.times.append(end)
                self.free.append(self.free[-1] + gpus)

    def at(self, t: float) -> int:
        """Free GPUs at ``t`` (>= now)."""
        return self.free[max(0, bisect_right(self.times, t) - 1)]

    def room(self, start: float, run: float, gpus: int) -> bool:
        """Whether ``gpus`` are free over all of [start, start + run)."""
        times, free = self.times, self.free
        i = max(0, bisect_right(times, start) - 1)
        end = start + run
        n = len(times)
        while i < n and times[i] < end:
            if free[i] < gpus:
                return False
            i += 1
        return True

    def windows(self, gpus: int, run: float, after: float, until: float = _INF,
                limit: int = 0) -> list[tuple[float, float]]:
        """The starts >= ``after`` (and <= ``until``) at which ``gpus`` stay free for ``run`` s, as
        closed intervals [lo, hi] in time order (the first ``limit`` of them when ``limit``)."""
        out: list[tuple[float, float]] = []
        for window in self.iter_windows(gpus, run, after, until):
            out.append(window)
            if len(out) == limit:
                break
        return out

    def iter_windows(self, gpus: int, run: float, after: float, until: float = _INF) -> Iterator[tuple[float, float]]:
        """:meth:`windows`, one at a time (a caller that stops early walks no further)."""
        times, free = self.times, self.free
        n = len(times)
        i = max(0, bisect_right(times, after) - 1)
        while i < n:
            if free[i] < gpus:
                if times[i] > until:
                    return
                i += 1
                continue
            lo = max(times[i], after)
            if lo > until:
                return
            k = i + 1
            while k < n and free[k] >= gpus:
                k += 1
            hi = (times[k] if k < n else _INF) - run
            if hi >= lo:
                yield lo, hi
            i = k + 1

    def _split(self, t: float) -> int:
        times = self.times
        i = bisect_right(times, t) - 1
        if times[i] == t:
            return i
        times.insert(i + 1, t)
        self.free.insert(i + 1, self.free[i])
        return i + 1

    def take(self, start: float, run: float, gpus: int) -> None:
        """Reserve ``gpus`` over [start, start + run)."""
        lo = self._split(start)
        hi = self._split(start + run) if run != _INF else len(self.times)
        free = self.free
        for k in range(lo, hi):
            free[k] -= gpus


class NodePlan:
    """One VC's nodes, each a :class:`NodeProfile`; earliest starts by consolidate's shape rule."""

    __slots__ = ("nodes", "local_of", "profiles", "per", "max_node", "total")

    def __init__(self, now: float, nodes: list[int], free: list[int], releases: dict[int, list[tuple[float, int]]],
                 gpus_per_node: int, max_node_gpus: int) -> None:
        self.nodes = nodes
        self.local_of = {node: i for i, node in enumerate(nodes)}
        self.profiles = [NodeProfile(now, f, releases.get(node, ())) for node, f in zip(nodes, free)]
        # the same plan in GPU counts (less the starts now): no node set has room before the
        # counts do, so its earliest start is where the per-node search begins
        self.total = FreeProfile(now, sum(free), [r for node in nodes for r in releases.get(node, ())])
        self.per = gpus_per_node
        self.max_node = max_node_gpus

    def admits(self, placement, start: float, run: float) -> bool:
        """Whether ``placement`` ((node, GPU mask) pairs) has its GPUs free over [start, start + run)."""
        local_of, profiles = self.local_of, self.profiles
        for node, mask in placement:
            local = local_of.get(node)
            if local is None or not profiles[local].room(start, run, mask.bit_count()):
                return False
        return True

    def take_placement(self, placement, start: float, run: float) -> None:
        for node, mask in placement:
            self.profiles[self.local_of[node]].take(start, run, mask.bit_count())
        # not taken from ``total``: a start now would walk all its steps (quadratic in a pass of
        # many starts), and counts with more free GPUs are still a lower bound

    def shape(self, gpus: int) -> list[int] | None:
        """GPUs per node a job of ``gpus`` takes: [gpus] on one node, or ``whole`` full nodes and
        the rest; None when no node set can ever hold it."""
        if gpus <= self.max_node:
            return [gpus]
        per = self.per
        if not per:
            return None
        whole, rest = divmod(gpus, per)
        if whole + (1 if rest else 0) > len(self.nodes):
            return None
        return [per] * whole + ([rest] if rest else [])

    def earliest(self, gpus: int, run: float, after: float) -> tuple[float, list[tuple[int, int]]] | None:
        """The first start >= ``after`` at which the job's shape fits for ``run`` s, and the
        (local node, GPUs) it would take then; None: never (by the known ends)."""
        shape = self.shape(gpus)
        if shape is None:
            return None
        bound = self.total.earliest(gpus, run, after)
        if bound is None:
            return None
        after = bound
        profiles = self.profiles
        if len(shape) == 1:
            best, pick, pick_free = _INF, -1, 0
            for local, prof in enumerate(profiles):
                w = prof.windows(gpus, run, after, best, 1)
                if not w:
                    continue
                t = w[0][0]
                f = prof.at(t)
                if t < best or (t == best and f < pick_free):
                    best, pick, pick_free = t, local, f
            if pick < 0 or best == _INF:
                return None
            return best, [(pick, gpus)]
        return self._earliest_gang(shape, run, after)

    def _earliest_gang(self, shape: list[int], run: float, after: float):
        """A sweep over the nodes' windows in time order, each node's drawn only as far as the
        sweep gets: the first time ``whole`` full nodes and one more with the rest are open."""
        per = self.per
        whole = sum(1 for g in shape if g == per)
        rest = shape[-1] if shape[-1] != per else 0
        heap: list[tuple[float, int, int, int, Iterator]] = []   # (time, 0 open / 1 close, kind, local, windows)
        for local, prof in enumerate(self.profiles):
            for kind, gpus in ((0, per), (1, rest)) if rest else ((0, per),):
                gen = prof.iter_windows(gpus, run, after)
                first = next(gen, None)
                if first is not None:
                    heap.append((first[0], 0, kind, local, gen, first[1]))
        heapq.heapify(heap)
        open_: tuple[set[int], set[int]] = (set(), set())
        while heap:
            t, close, kind, local, gen, hi = heapq.heappop(heap)
            if close:
                open_[kind].discard(local)
                nxt = next(gen, None)
                if nxt is not None:
                    heapq.heappush(heap, (nxt[0], 0, kind, local, gen, nxt[1]))
                continue
            open_[kind].add(local)
            heapq.heappush(heap, (hi, 1, kind, local, gen, hi))
            if heap and heap[0][0] == t and heap[0][1] == 0:
                continue   # more windows open at t: count them all first
            full, part = open_
            if len(full) >= whole and (not rest or len(part) >= whole + 1):
                return t, self._gang_nodes(t, full, part, whole, rest)
        return None

    def _gang_nodes(self, t: float, full: set[int], part: set[int], whole: int, rest: int) -> list[tuple[int, int]]:
        chosen = sorted(full)[:whole]   # consolidate: the lowest-indexed whole free nodes
        out = [(local, self.per) for local in chosen]
        if rest:
            left = [local for local in part if local not in chosen]
            local = min(left, key=lambda x: (-self.profiles[x].at(t), x))   # then the most free
            out.append((local, rest))
        return out

    def take(self, start: float, run: float, taken: list[tuple[int, int]]) -> None:
        for local, gpus in taken:
            self.profiles[local].take(start, run, gpus)
            self.total.take(start, run, gpus)
