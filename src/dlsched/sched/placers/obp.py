"""Opportunistic bin packing (Horus §5.2's OBP baseline): GPU memory is the only information.

A job goes to the GPUs with the most *predicted* memory left (least loaded; an idle GPU has all
of it), and joins a busy GPU whenever the memory its holders are predicted to use leaves room
for the job's predicted memory -- no utilisation or interference model. The capacity check is
the pipeline's room (memory and the per-GPU job cap).
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.framework import room_of
from dlsched.sched.sharing.load import NodeLoad, cheapest


def free_mem_costs(view: ClusterView, node: int, room: int, sign: float) -> list[tuple[float, int]]:
    """(sign x predicted memory in use as a share of the GPU, GPU) for each GPU of ``room``."""
    if not view.node_mask[node] & room:
        return [(0.0, g) for g in range(view.node_gpus[node]) if room >> g & 1]
    load = NodeLoad(view, node)
    cap = view.node_mem[node]
    return [(sign * load.mem[g] / cap, g) for g in range(view.node_gpus[node]) if room >> g & 1]


class ObpPlacer:
    """Least predicted memory in use first. :class:`BinpackMemPlacer` is the same placer with the
    order reversed (``sign`` -1: most memory in use first)."""

    name = "obp"
    packs = True  # joins busy GPUs by its own rule, never the idle-first shortcut
    sign = 1.0  # +1: emptiest GPUs first; -1: fullest first

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        room = room_of(view, job, node)
        need = min(job.gpus, room.bit_count())
        if not need:
            return 0.0
        cost, _ = cheapest(free_mem_costs(view, node, room, self.sign), need)
        used = min(1.0, self.sign * cost / need)  # mean share of memory in use on the chosen GPUs
        return 1.0 - used if self.sign > 0 else used

    def gpus(self, view: ClusterView, vc: VcState, job: Job, node: int, room: int) -> int:
        if room.bit_count() < job.gpus:
            return 0
        return cheapest(free_mem_costs(view, node, room, self.sign), job.gpus)[1]
