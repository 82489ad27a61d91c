"""Bit tricks shared by the placers: lowest set bit, taking free GPUs, spanning nodes.

Node indices in VC buckets are VC-local (``vc.nodes[local]`` is the global index).
"""

from __future__ import annotations

from collections.abc import Callable

from dlsched.core.job import Job
from dlsched.kernel.decisions import Placement
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView


def lowest(mask: int) -> int:
    """Index of the lowest set bit (mask must be non-zero)."""
    return (mask & -mask).bit_length() - 1


def highest(mask: int) -> int:
    return mask.bit_length() - 1


def take_lowest(mask: int, count: int) -> int:
    """The ``count`` lowest set bits of ``mask``."""
    out = 0
    for _ in range(count):
        low = mask & -mask
        out |= low
        mask ^= low
    return out


def take_gpus(view: ClusterView, node: int, count: int) -> int:
    """Bitmask of the ``count`` lowest-numbered free GPUs of ``node``."""
    free = ~view.node_mask[node] & ((1 << view.node_gpus[node]) - 1)
    if count == 1:
        return free & -free
    return free if free.bit_count() == count else take_lowest(free, count)


def tightest_node(vc: VcState, count: int) -> int:
    """Global index of the open node with the fewest free GPUs that still has ``count`` (lowest
    index on ties), or -1: best fit in a few bucket look-ups."""
    for m in vc.buckets[count:]:  # buckets[k] for k = count .. max_node_gpus
        if m:
            return vc.nodes[(m & -m).bit_length() - 1]
    return -1


def nodes_with_at_least(vc: VcState, count: int) -> int:
    """Bitmask (VC-local) of open nodes with >= ``count`` free GPUs."""
    mask = 0
    buckets = vc.buckets
    for k in range(max(count, 1), vc.max_node_gpus + 1):
        mask |= buckets[k]
    return mask


def greedy_span(view: ClusterView, vc: VcState, job: Job, most_free_first: bool,
                take: Callable[[ClusterView, int, int], int] = take_gpus) -> Placement | None:
    """Spread a job over several nodes, taking whole free capacity node by node.

    Nodes are visited by free-GPU count (most first if ``most_free_first``, else in VC order);
    each contributes min(its free GPUs, what is still needed), chosen by ``take(view, node,
    count)`` (the lowest-numbered free GPUs unless a placer picks otherwise).
    """
    need = job.gpus
    if vc.free < need:
        return None
    out: list[tuple[int, int]] = []
    nodes = vc.nodes
    if most_free_first:
        for k in range(vc.max_node_gpus, 0, -1):
            m = vc.buckets[k]
            while m and need:
                local = lowest(m)
                m ^= 1 << local
                node = nodes[local]
                use = min(k, need)
                out.append((node, take(view, node, use)))
                need -= use
            if not need:
                break
    else:
        free = view.node_free
        for node in nodes:
            f = free[node]
            if f:
                use = min(f, need)
                out.append((node, take(view, node, use)))
                need -= use
                if not need:
                    break
    return tuple(out) if not need else None
