"""Dual Recursive Bi-partitioning mapping inside one machine (Alg. 2 and 3).

Alg. 2 recursively bisects the physical graph of free GPUs (FM, :mod:`dlsched.topology.fm`)
and, at each level, splits the job's tasks between the two halves with Alg. 3: every task
goes to the half with the higher utility, subject to the half's free capacity, given where
the job's other tasks already went (the ``C`` array of the paper: regions, possibly outside
the current sub-partition). Recursion ends when a part holds one GPU.

FM partitions by *affinity*: distance weights (higher levels heavier) are inverted, so a
bisection cuts the slow, high-level links (socket->machine) and keeps NVLink/PCIe-switch
neighbours together, as Scotch bisects a target architecture along its weakest links.
The bisection tree depends only on (machine graph, free-GPU mask) and is cached: every idle
machine of a preset shares one tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlsched.topology.effects import bits
from dlsched.topology.fm import fm_bisect
from dlsched.topology.graph import MachineGraph
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.utility import ALPHA, interference_score, min_sockets

AFFINITY_SCALE = 100   # affinity = 100 / distance weight: 1 -> 100, 5 -> 20, 20 -> 5, 100 -> 1


@dataclass(frozen=True, slots=True)
class PNode:
    """A physical sub-partition: the GPUs of ``mask`` and, unless a leaf, its FM bisection."""

    mask: int
    children: tuple[PNode, PNode] | None
    cut: int = 0


_TREES: dict[tuple[int, int], tuple[MachineGraph, PNode]] = {}
_DIST: dict[tuple[int, int, int], float] = {}


def physical_bisection(mg: MachineGraph, mask: int) -> tuple[int, int, int]:
    """FM bisection of the free GPUs ``mask`` (with all structural vertices, weight 0)."""
    g = mg.graph
    gpu_vertex = set(mg.gpu_vertex)
    keep = [v for v in range(len(g.vertices)) if v not in gpu_vertex or (mask >> g.vertices[v].gpu) & 1]
    index = {v: i for i, v in enumerate(keep)}
    edges = [(index[a], index[b], max(1, AFFINITY_SCALE // w)) for (a, b), w in g.edges.items()
             if a in index and b in index]
    vw = [1 if keep[i] in gpu_vertex else 0 for i in range(len(keep))]
    bis = fm_bisect(len(keep), edges, vw)
    m0 = m1 = 0
    for i, v in enumerate(keep):
        if vw[i]:
            bit = 1 << g.vertices[v].gpu
            if bis.side[i] == 0:
                m0 |= bit
            else:
                m1 |= bit
    # P0 is the half holding the lowest GPU: ties in Alg. 3 then favour low GPU ids.
    if m1 and (m0 == 0 or (m1 & -m1) < (m0 & -m0)):
        m0, m1 = m1, m0
    return m0, m1, bis.cut


def bisection_tree(mg: MachineGraph, mask: int) -> PNode:
    """Recursive FM bisection of ``mask``, cached per (machine graph, mask)."""
    key = (id(mg), mask)
    hit = _TREES.get(key)
    if hit is not None and hit[0] is mg:
        return hit[1]
    if mask.bit_count() <= 1:
        node = PNode(mask, None)
    else:
        m0, m1, cut = physical_bisection(mg, mask)
        if not m0 or not m1:          # degenerate (cannot happen with unit GPU weights)
            low = mask & -mask
            m0, m1 = low, mask ^ low
        node = PNode(mask, (bisection_tree(mg, m0), bisection_tree(mg, m1)), cut)
    _TREES[key] = (mg, node)
    return node


def region_distance(mg: MachineGraph, a: int, b: int) -> float:
    """Mean GPU distance between regions ``a`` and ``b`` (within a region when a == b)."""
    key = (id(mg), a, b) if a <= b else (id(mg), b, a)
    hit = _DIST.get(key)
    if hit is not None:
        return hit
    ga, gb = bits(a), bits(b)
    if a == b:
        pairs = [(x, y) for i, x in enumerate(ga) for y in ga[i + 1:]]
    else:
        pairs = [(x, y) for x in ga for y in gb]
    d = sum(mg.dist[x][y] for x, y in pairs) / len(pairs) if pairs else 0.0
    _DIST[key] = d
    return d


class _Mapper:
    """One DRB run: the job, the machine and the co-runners it may disturb."""

    def __init__(self, p: JobProfile, m: int, mg: MachineGraph, co_runners: Sequence,
                 alpha: tuple[float, float, float], inter: Callable[[frozenset], float] | None = None) -> None:
        self.p, self.m, self.mg, self.co, self.alpha = p, m, mg, co_runners, alpha
        self.inter = inter or (lambda fp: interference_score(p, fp, co_runners))
        self.region: list[int] = [0] * p.gpus      # 0 = not yet assigned at any level
        self._nearest = max(1, mg.nearest)
        self._least_sockets = min_sockets(mg, p.gpus)
        self._terms: dict[int, tuple[float, float]] = {}   # GPUs used -> (Eq. 4, 1/omega), cached for the run

    def _footprint_terms(self, used: int) -> tuple[float, float]:
        """Interference and fragmentation terms of a task set on the GPUs ``used``."""
        hit = self._terms.get(used)
        if hit is None:
            socks = {self.mg.socket_of[g] for g in bits(used)}
            keys = {("s", self.m, s) for s in socks}
            if len(socks) > 1:
                keys.add(("smp", self.m))
            fp = frozenset(keys)
            inter = self.inter(fp) if self.co else 1.0
            frag = min(1.0, self._least_sockets / max(1, len(socks)))
            hit = self._terms[used] = (inter, frag)
        return hit

    def task_utility(self, task: int, part: int, other: int = 0, spill: int = 0) -> float:
        """Alg. 3's U(task, P): comm to already-placed tasks, interference, fragmentation.

        ``spill`` tasks of this level cannot follow the task into ``part`` (capacity) and will
        land in ``other``: they count as communication partners there (look-ahead on the
        ``C`` array), so a half too small for the whole job is not chosen on a tie.
        """
        others = [r for i, r in enumerate(self.region) if i != task and r]
        if spill and other:
            others += [other] * spill
        a_cc, a_b, a_d = self.alpha
        used = part
        if others:
            mg = self.mg
            t = sum(region_distance(mg, part, r) for r in others)
            ref = len(others) * self._nearest
            comm = min(1.0, ref / t) if t > 0 else 1.0
            for r in others:
                used |= r
        else:
            comm = 1.0
        inter, frag = self._footprint_terms(used)
        return a_cc * comm + a_b * inter + a_d * frag

    def run(self, tasks: list[int], node: PNode) -> None:
        if not tasks:                       # Alg. 2 line 2: not a candidate
            return
        if node.children is None:           # line 4: one GPU left, map the task to it
            self.region[tasks[0]] = node.mask
            return
        p0, p1 = node.children
        a0, a1 = self.job_bipartition(tasks, p0.mask, p1.mask)
        self.run(a0, p0)
        self.run(a1, p1)

    def job_bipartition(self, tasks: list[int], m0: int, m1: int) -> tuple[list[int], list[int]]:
        """Alg. 3: each task to the half of higher utility that still has a free GPU for it."""
        a0: list[int] = []
        a1: list[int] = []
        c0, c1 = m0.bit_count(), m1.bit_count()
        for i, t in enumerate(tasks):
            left = len(tasks) - i                      # this task and those after it
            if len(a0) >= c0:
                side = 1
            elif len(a1) >= c1:
                side = 0
            else:
                u0 = self.task_utility(t, m0, m1, max(0, left - (c0 - len(a0))))
                u1 = self.task_utility(t, m1, m0, max(0, left - (c1 - len(a1))))
                side = 0 if u0 >= u1 else 1
            (a0 if side == 0 else a1).append(t)
            self.region[t] = m0 if side == 0 else m1
        return a0, a1


def drb_map(p: JobProfile, m: int, mg: MachineGraph, free_mask: int, co_runners: Sequence = (),
            k: int | None = None, alpha: tuple[float, float, float] = ALPHA,
            inter: Callable[[frozenset], float] | None = None) -> int | None:
    """GPU bitmask chosen by DRB for ``k`` (default all) of the job's tasks on machine ``m``.

    ``inter(footprint)`` may stand in for Eq. 4 (:func:`interference_score` of ``p`` with
    ``co_runners``), e.g. a caller's cache of it."""
    k = p.gpus if k is None else k
    if free_mask.bit_count() < k or k <= 0:
        return None
    if free_mask.bit_count() == k:   # one task per free GPU: the mapping can only be all of them
        return free_mask
    mapper = _Mapper(p, m, mg, co_runners, alpha, inter)
    if k == 1:   # Alg. 3 with one task: it goes down to the half of higher utility (the first on ties)
        node = bisection_tree(mg, free_mask)
        while node.children is not None:
            p0, p1 = node.children
            node = p0 if mapper.task_utility(0, p0.mask, p1.mask) >= mapper.task_utility(0, p1.mask, p0.mask) else p1
        return node.mask
    mapper.region = [0] * k
    mapper.run(list(range(k)), bisection_tree(mg, free_mask))
    out = 0
    for r in mapper.region:
        out |= r
    return out
