"""Cheap upper bounds on the utility terms (Eq. 3 and 5) a job can get on a node's free GPUs,
so the placement search can rank nodes without mapping each one.

* C = t_best / t: no placement of ``k`` GPUs inside the free ones has a smaller pair-distance sum
  than the best ``k``-subset of them (:func:`min_pair_sum`), so C <= t_best / that.
* F = min sockets / sockets spanned: a placement spans at least as many sockets as it takes to
  hold ``k`` GPUs with the sockets that have the most free GPUs (:func:`sockets_needed`).

Both are exact integer results, cached per (machine graph, free mask, k): at most 2^8 masks per
8-GPU board.
"""

from __future__ import annotations

import itertools

from dlsched.core.bits import set_bits
from dlsched.topology.graph import MachineGraph

_SOCKETS: dict[tuple[int, int], tuple[MachineGraph, tuple[int, ...]]] = {}
_MIN_SUM: dict[tuple[int, int, int], tuple[MachineGraph, int]] = {}
_NEEDED: dict[tuple[int, int, int], tuple[MachineGraph, int]] = {}


def free_sockets(mg: MachineGraph, free: int) -> tuple[int, ...]:
    """The sockets that hold at least one of the ``free`` GPUs."""
    key = (id(mg), free)
    hit = _SOCKETS.get(key)
    if hit is None or hit[0] is not mg:
        hit = _SOCKETS[key] = (mg, tuple(sorted({mg.socket_of[g] for g in set_bits(free)})))
    return hit[1]


def min_pair_sum(mg: MachineGraph, free: int, k: int) -> int:
    """Smallest sum of pairwise GPU distances over the ``k``-subsets of the ``free`` GPUs."""
    if k < 2:
        return 0
    key = (id(mg), free, k)
    hit = _MIN_SUM.get(key)
    if hit is None or hit[0] is not mg:
        dist = mg.dist
        best = min(sum(dist[a][b] for a, b in itertools.combinations(c, 2))
                   for c in itertools.combinations(set_bits(free), k))
        hit = _MIN_SUM[key] = (mg, best)
    return hit[1]


def sockets_needed(mg: MachineGraph, free: int, k: int) -> int:
    """Fewest sockets whose free GPUs can hold ``k`` GPUs."""
    key = (id(mg), free, k)
    hit = _NEEDED.get(key)
    if hit is None or hit[0] is not mg:
        per_socket: dict[int, int] = {}
        for g in set_bits(free):
            per_socket[mg.socket_of[g]] = per_socket.get(mg.socket_of[g], 0) + 1
        got = needed = 0
        for count in sorted(per_socket.values(), reverse=True):
            if got >= k:
                break
            got += count
            needed += 1
        hit = _NEEDED[key] = (mg, max(1, needed))
    return hit[1]
