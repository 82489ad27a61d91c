"""Binpack by memory (Co-scheML's baseline, its Fig. 1-a): fill the fullest GPU first.

Among the GPUs whose *predicted* memory left fits the job (the pipeline's room), take those
whose holders are predicted to use the most memory -- even while idle GPUs exist, which packs
jobs onto as few GPUs as possible. Interference is not considered.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.state import VcState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.placers.obp import free_mem_costs
from dlsched.sched.sharing.load import cheapest, room_of


class BinpackMemPlacer:
    name = "binpack-mem"
    packs = True  # joins busy GPUs by its own rule, never the idle-first shortcut

    def score(self, view: SchedulingView, vc: VcState, job: Job, node: int) -> float:
        room = room_of(view, job, node)
        need = min(job.gpus, room.bit_count())
        if not need:
            return 0.0
        neg_used, _ = cheapest(free_mem_costs(view, node, room, -1.0), need)
        return min(1.0, -neg_used / need)

    def gpus(self, view: SchedulingView, vc: VcState, job: Job, node: int, room: int) -> int:
        if room.bit_count() < job.gpus:
            return 0
        return cheapest(free_mem_costs(view, node, room, -1.0), job.gpus)[1]
