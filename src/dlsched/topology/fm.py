"""Fiduccia-Mattheyses bi-partitioning (Fiduccia & Mattheyses, DAC 1982), written from the paper.

The DRB mapping (Alg. 2 of Amaral et al.) bisects the physical graph with FM, as Scotch does.
Classic ingredients: per-side gain buckets indexed by integer gain, taken highest gain first
(only non-empty buckets are kept: the graphs are small but their gains span hundreds of values),
single-vertex moves, every vertex locked after it moves once per pass, a balance constraint
on vertex weights, and a roll-back to the best prefix of moves at the end of each pass.

Vertex weights let structural vertices (sockets, switches) weigh 0 so that balance is
counted in GPUs only. Edge weights must be non-negative integers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bisection:
    side: tuple[int, ...]   # 0/1 per vertex
    cut: int
    weights: tuple[int, int]
    passes: int


class _Buckets:
    """Gain buckets of one side: ``bucket[g]`` is an insertion-ordered set (a dict) of the
    vertices of gain ``g``; only non-empty buckets are kept, so finding the highest gain costs
    a sort of the few distinct gains instead of a walk over every possible one."""

    __slots__ = ("bucket", "gain_of")

    def __init__(self, max_gain: int) -> None:
        self.bucket: dict[int, dict[int, None]] = {}
        self.gain_of: dict[int, int] = {}

    def add(self, v: int, gain: int) -> None:
        b = self.bucket.get(gain)
        if b is None:
            b = self.bucket[gain] = {}
        b[v] = None
        self.gain_of[v] = gain

    def remove(self, v: int) -> None:
        gain = self.gain_of.pop(v)
        b = self.bucket[gain]
        del b[v]
        if not b:
            del self.bucket[gain]

    def best(self, feasible) -> tuple[int, int] | None:
        """Highest-gain vertex passing ``feasible`` (first inserted wins ties)."""
        for gain in sorted(self.bucket, reverse=True):
            for v in self.bucket[gain]:
                if feasible(v):
                    return gain, v
        return None


def cut_size(edges: list[tuple[int, int, int]], side) -> int:
    return sum(w for a, b, w in edges if side[a] != side[b])


def _initial(n: int, adj: list[list[tuple[int, int]]], vw: list[int], target0: int) -> list[int]:
    """Breadth-first growth from the lowest-index weighted vertex until side 0 holds target0."""
    side = [1] * n
    if target0 <= 0:
        return side
    seeds = [v for v in range(n) if vw[v] > 0] or list(range(n))
    got = 0
    seen = [False] * n
    for seed in seeds:
        if got >= target0:
            break
        if seen[seed]:
            continue
        queue = [seed]
        seen[seed] = True
        while queue and got < target0:
            u = queue.pop(0)
            if got + vw[u] <= target0:
                side[u] = 0
                got += vw[u]
            for v, _w in sorted(adj[u], key=lambda t: (-t[1], t[0])):
                if not seen[v]:
                    seen[v] = True
                    queue.append(v)
    return side


def fm_bisect(
    n: int,
    edges: list[tuple[int, int, int]],
    vweight: list[int] | None = None,
    tolerance: int | None = None,
    initial: list[int] | None = None,
    max_passes: int = 8,
) -> Bisection:
    """Min-cut bisection of an ``n``-vertex graph with balanced vertex weight.

    ``tolerance`` bounds |W0 - W1| of the result (default: total weight parity, i.e. as even
    as possible); during a pass moves may exceed it by one vertex weight, as in the original
    algorithm, but only balanced prefixes are kept.
    """
    vw = list(vweight) if vweight is not None else [1] * n
    total = sum(vw)
    tol = (total % 2) if tolerance is None else tolerance
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, w in edges:
        if w < 0 or int(w) != w:
            raise ValueError("FM needs non-negative integer edge weights")
        adj[a].append((b, w))
        adj[b].append((a, w))
    max_gain = max((sum(w for _, w in row) for row in adj), default=0)
    slack = max(tol, 2 * max(vw, default=0))  # |W0-W1| may stray by one vertex either way
    side = list(initial) if initial is not None else _initial(n, adj, vw, (total + 1) // 2)
    w0 = sum(vw[v] for v in range(n) if side[v] == 0)
    cut = cut_size(edges, side)

    def balanced(weight0: int, bound: int) -> bool:
        return abs(2 * weight0 - total) <= bound

    passes = 0
    for passes in range(1, max_passes + 1):  # noqa: B007  (the count is returned after the loop)
        buckets = (_Buckets(max_gain), _Buckets(max_gain))
        for v in range(n):
            gain = sum(w if side[u] != side[v] else -w for u, w in adj[v])
            buckets[side[v]].add(v, gain)
        locked = [False] * n
        moves: list[int] = []
        best_gain, best_len, run = 0, 0, 0
        start_ok = balanced(w0, tol)
        cur_w0 = w0
        while True:
            cands = []
            for s in (0, 1):
                def feasible(v: int, s: int = s, w0_now: int = cur_w0) -> bool:
                    nw0 = w0_now - vw[v] if s == 0 else w0_now + vw[v]
                    return balanced(nw0, slack)
                pick = buckets[s].best(feasible)
                if pick is not None:
                    cands.append((pick[0], s, pick[1]))
            if not cands:
                break
            # highest gain; ties: move off the heavier side, then lowest vertex index
            heavier = 0 if 2 * cur_w0 > total else 1
            gain, s, v = max(cands, key=lambda c: (c[0], c[1] == heavier, -c[2]))
            buckets[s].remove(v)
            locked[v] = True
            side[v] = 1 - s
            cur_w0 += -vw[v] if s == 0 else vw[v]
            run += gain
            moves.append(v)
            for u, w in adj[v]:
                if locked[u]:
                    continue
                bs = buckets[side[u]]
                g = bs.gain_of[u]
                # v left s: an edge to u on s became external (+2w); on the other side internal (-2w)
                delta = 2 * w if side[u] == s else -2 * w
                bs.remove(u)
                bs.add(u, g + delta)
            ok = balanced(cur_w0, tol)
            if ok and (run > best_gain or (not start_ok and best_len == 0)):
                best_gain, best_len = run, len(moves)
                start_ok = True
        # roll back moves past the best prefix
        for v in reversed(moves[best_len:]):
            side[v] = 1 - side[v]
        w0 = sum(vw[v] for v in range(n) if side[v] == 0)
        new_cut = cut_size(edges, side)
        improved = new_cut < cut
        cut = new_cut
        if not improved:
            break
    return Bisection(tuple(side), cut, (w0, total - w0), passes)
