"""The placer interface and the bit tricks shared by the bucket-based placers."""

from __future__ import annotations

from typing import Protocol

from dlsched.core.job import Job
from dlsched.sim.decisions import Placement
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class Placer(Protocol):
    """Chooses where a job runs. Returns ``None`` when it cannot (or will not) place it now."""

    name: str

    def place(self, view: SchedulingView, vc: VcState, job: Job) -> Placement | None: ...


def lowest(mask: int) -> int:
    """Index of the lowest set bit (mask must be non-zero)."""
    return (mask & -mask).bit_length() - 1


def highest(mask: int) -> int:
    return mask.bit_length() - 1


def take_gpus(view: SchedulingView, node: int, count: int) -> int:
    """Bitmask of the ``count`` lowest-numbered free GPUs of ``node``."""
    used = view.node_mask[node]
    if not used and count == view.node_gpus[node]:
        return (1 << count) - 1
    free = ~used & ((1 << view.node_gpus[node]) - 1)
    if count == 1:
        return free & -free
    out = 0
    for _ in range(count):
        low = free & -free
        out |= low
        free ^= low
    return out


def nodes_with_at_least(vc: VcState, count: int) -> int:
    """Bitmask (VC-local) of powered nodes with >= ``count`` free GPUs."""
    mask = 0
    for k in range(max(count, 1), vc.max_node_gpus + 1):
        mask |= vc.buckets[k]
    return mask


def greedy_span(view: SchedulingView, vc: VcState, job: Job, most_free_first: bool) -> Placement | None:
    """Spread a job over several nodes, taking whole free capacity node by node.

    Nodes are visited by free-GPU count (most first if ``most_free_first``, else in index
    order); each contributes min(its free GPUs, what is still needed).
    """
    need = job.gpus
    if vc.free < need:
        return None
    out: list[tuple[int, int]] = []
    if most_free_first:
        for k in range(vc.max_node_gpus, 0, -1):
            m = vc.buckets[k]
            while m and need:
                local = lowest(m)
                m ^= 1 << local
                node = vc.node_lo + local
                use = min(k, need)
                out.append((node, take_gpus(view, node, use)))
                need -= use
            if not need:
                break
    else:
        free = view.node_free
        for node in vc.nodes:
            f = free[node]
            if f:
                use = min(f, need)
                out.append((node, take_gpus(view, node, use)))
                need -= use
                if not need:
                    break
    return tuple(out) if not need else None
