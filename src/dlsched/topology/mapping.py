"""TOPO-AWARE's placement search on the kernel's nodes: the DRB mapping inside a node and its
utility (cached), and the multi-node fallback.

Cluster level of the DRB mapping: the network level is a star (every machine hangs off the network
vertex with the same weight), so every balanced bisection of the machines has the same cut and FM
has nothing to optimise there; Alg. 3 then sends the whole job to the half with the higher
utility, i.e. a tournament between nodes. Each node's best mapping (FM + Alg. 2-3 inside it) is
kept in the index's scratch space of that node until the node changes, and in a memo keyed by the
node's signature, so identical nodes (all idle ones, say) are mapped once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heapify, heappop, heappush

from dlsched.topology.bounds import free_sockets, min_pair_sum, sockets_needed
from dlsched.topology.drb import drb_map
from dlsched.topology.index import TopologyIndex
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.utility import (
    ALPHA,
    UtilityParts,
    best_pair_sum,
    interference_score,
    min_sockets,
    utility,
)

MEMO_LIMIT = 200_000   # signature results kept before the memo starts afresh

Mapped = tuple[float, int, UtilityParts]   # (utility, GPU mask, utility terms)
_ANY_JOB = JobProfile("-", "googlenet", 1, 1, 1.0)   # overlapping nobody, any job's own ratio is 1


class TopologyMapper:
    """DRB mappings and utilities on the nodes of one :class:`TopologyIndex`."""

    def __init__(self, index: TopologyIndex, alpha: tuple[float, float, float] = ALPHA) -> None:
        if abs(sum(alpha) - 1.0) > 1e-9:
            raise ValueError("the utility weights must add up to 1 (Eq. 1)")
        self.index = index
        self.alpha = alpha
        self.max_utility = round(sum(alpha), 9)   # every term of U is at most 1
        self._memo: dict[tuple, Mapped] = {}
        self._inter: dict[tuple, float] = {}
        self._bounds: dict[tuple, float] = {}

    def on_node(self, node: int, p: JobProfile) -> Mapped:
        """The DRB mapping of all of ``p``'s tasks on ``node`` (which must have room for them)
        and the exact utility of the result."""
        self.index.flush()
        hit = self.index.node_scratch[node].get(p.type_key)
        return hit if hit is not None else self._map(node, p, p.type_key)

    def best(self, p: JobProfile, candidates: Sequence[tuple[int, int, int]]) -> tuple[int, Mapped]:
        """The node of highest utility (rounded to 1e-9) for ``p`` among ``candidates``, given as
        (free GPUs, index, node): on equal utility the smallest (free GPUs, index) wins.

        Best-first search: every candidate enters a heap keyed by :meth:`node_bound`; the top
        one is refined to :meth:`job_bound`, then to its exact utility (the DRB mapping), and
        pushed back. The first node to come out exact ranks above every bound left, so it wins:
        the answer of mapping every node, but most are ranked without running DRB."""
        index = self.index
        index.flush()
        scratch = index.node_scratch
        key, bound_key = p.type_key, ("bound", p.type_key)
        heap = []
        for f, i, node in candidates:
            cached = scratch[node]
            hit = cached.get(key)
            if hit is not None:
                heap.append((-round(hit[0], 9), f, i, node, 2))
            else:
                ub = cached.get(None)
                heap.append((-round(ub if ub is not None else self._node_bound(node), 9), f, i, node, 0))
        heapify(heap)
        while True:
            _, f, i, node, stage = heappop(heap)
            cached = scratch[node]
            if stage == 2:
                return node, cached[key]
            if stage == 0:
                ub = cached.get(bound_key)
                if ub is None:
                    ub = self._bound_for(node, p, bound_key)
                heappush(heap, (-round(ub, 9), f, i, node, 1))
            else:
                hit = cached.get(key)
                if hit is None:
                    hit = self._map(node, p, key)
                heappush(heap, (-round(hit[0], 9), f, i, node, 2))

    def node_bound(self, node: int) -> float:
        """A utility no job can exceed on ``node``, from its co-runners alone (cheap, the same for
        every job): C and F at most 1, and Eq. 4 as if the new job disturbed nobody (a
        co-runner's ratio only drops when one more job joins)."""
        self.index.flush()
        ub = self.index.node_scratch[node].get(None)
        return ub if ub is not None else self._node_bound(node)

    def _node_bound(self, node: int) -> float:
        index = self.index
        classes = index.signature(node)[2]
        ub = self._bounds.get(classes)
        if ub is None:
            calm = interference_score(_ANY_JOB, frozenset(), index.co_runners((node,)))
            a_cc, a_b, a_d = self.alpha
            ub = self._bounds[classes] = a_cc * 1.0 + a_b * calm + a_d * 1.0
        index.node_scratch[node][None] = ub
        return ub

    def job_bound(self, node: int, p: JobProfile) -> float:
        """A utility ``p`` cannot exceed on ``node``, tighter than :meth:`node_bound`, still
        without mapping: C and F at most their bounds on the free GPUs (:mod:`bounds`), and Eq. 4
        at most its value on the least disturbed single socket with free GPUs (a placement loads
        at least one such socket, and loading more buses only adds overlaps)."""
        self.index.flush()
        cached = self.index.node_scratch[node]
        hit = cached.get(p.type_key)
        if hit is not None:   # mapped already: the exact utility is the best bound
            return hit[0]
        key = ("bound", p.type_key)
        ub = cached.get(key)
        return ub if ub is not None else self._bound_for(node, p, key)

    def _bound_for(self, node: int, p: JobProfile, key: tuple) -> float:
        index = self.index
        sig = index.signature(node)
        ub = self._bounds.get((sig, key))
        if ub is None:
            ub = self._bounds[(sig, key)] = self._job_bound(node, p, sig)
        index.node_scratch[node][key] = ub
        return ub

    def _job_bound(self, node: int, p: JobProfile, sig: tuple) -> float:
        hit = self._memo.get((sig, p.type_key))
        if hit is not None:
            return hit[0]
        index = self.index
        mg, free, k = index.graphs[node], index.free_mask(node), p.gpus
        inter = self._interference(node, p, sig[2])
        i_ub = max(inter(frozenset({("s", node, s)})) for s in free_sockets(mg, free))
        c_ub = 1.0
        if k > 1:
            t_best = p.comm_weight / 4.0 * best_pair_sum(mg, k)
            t_min = p.comm_weight / 4.0 * min_pair_sum(mg, free, k)
            c_ub = t_best / t_min if t_min > 0 else 1.0
        f_ub = min_sockets(mg, k) / max(1, sockets_needed(mg, free, k))
        a_cc, a_b, a_d = self.alpha
        return a_cc * c_ub + a_b * i_ub + a_d * f_ub

    def _map(self, node: int, p: JobProfile, key: tuple) -> Mapped:
        index = self.index
        sig = index.signature(node)
        hit = self._memo.get((sig, key))
        if hit is None:
            co = index.co_runners((node,))
            inter = self._interference(node, p, sig[2], co)
            mask = drb_map(p, node, index.graphs[node], index.free_mask(node), co, alpha=self.alpha, inter=inter)
            if mask is None:
                raise ValueError(f"node {node} has no room for the {p.gpus} GPUs of job {p.job_id}")
            parts = utility(p, ((node, mask),), index.graphs, co, self.alpha, inter)
            hit = (parts.utility, mask, parts)
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
                self._inter.clear()
                self._bounds.clear()
            self._memo[(sig, key)] = hit
        index.node_scratch[node][key] = hit
        return hit

    def _interference(self, node: int, p: JobProfile, classes: tuple,
                      co: list | None = None) -> Callable[[frozenset], float]:
        """Eq. 4 for ``p`` on ``node`` by footprint, shared between nodes whose co-runners have the
        same classes: it depends only on the job type, the sockets / SMP bus / network the
        footprint loads there and those classes (the index's signature without the free GPUs).
        The co-runners are fetched only when a value is not known yet."""
        memo = self._inter
        kind = p.type_key
        smp, net = ("smp", node), ("net",)

        def inter(fp: frozenset) -> float:
            nonlocal co
            key = (kind, tuple(sorted(k[2] for k in fp if k[0] == "s")), smp in fp, net in fp, classes)
            value = memo.get(key)
            if value is None:
                if co is None:
                    co = self.index.co_runners((node,))
                value = memo[key] = interference_score(p, fp, co)
            return value
        return inter

    def spread(self, p: JobProfile, order: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], UtilityParts] | None:
        """Multi-node fallback: take the nodes in ``order`` (fewest nodes first: most free GPUs
        first), each contributing min(its free GPUs, what is still needed), placed by DRB for
        that share of the tasks. None when the nodes do not hold enough free GPUs."""
        index = self.index
        need = p.gpus
        out: list[tuple[int, int]] = []
        for node in order:
            free = index.free_mask(node)
            n = free.bit_count()
            if n and need:
                n = min(n, need)
                co = index.co_runners((node,))
                out.append((node, drb_map(p, node, index.graphs[node], free, co, k=n, alpha=self.alpha) or 0))
                need -= n
            if not need:
                break
        if need:
            return None
        placement = tuple(out)
        return placement, self.utility_of(p, placement)

    def utility_of(self, p: JobProfile, placement: Sequence[tuple[int, int]]) -> UtilityParts:
        """Utility (Eq. 2-5) of ``p`` on ``placement`` next to the jobs running there now."""
        index = self.index
        co = index.co_runners(node for node, _ in placement)
        return utility(p, tuple(placement), index.graphs, co, self.alpha)
