"""Horus cost placement (Horus §4.2.1, Eq. 7-10): the GPUs where a job adds the least cost.

For job ``j`` on GPU ``g`` of node ``n``::

    Cost = w_mem * (UR_mem(g) + GMem_j) / CP_mem(g)  +  w_util * f(UR_util(g) + GUtil_j)

with the holders' *predicted* memory and utilisation (``UR``), the job's predicted ones and
``f`` the slowdown curve of cumulative utilisation (:mod:`dlsched.sched.sharing.curve`). The
capacity check (memory left by the holders' predictions, the per-GPU job cap) is the
pipeline's room; among the GPUs that pass it, a node is scored by the mean cost of its
``lambda = gpus`` cheapest GPUs and the reserve step takes exactly those (top-lambda). A free GPU
is always cheaper than a shared one, so sharing happens only once idle GPUs run out. Combines
with any queue order: ``--policy qssf --placement horus-cost``.
"""

from __future__ import annotations

from collections.abc import Callable

from dlsched.core.job import Job
from dlsched.kernel.state import VcState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.sharing.curve import PAPER_CURVE
from dlsched.sched.sharing.load import NodeLoad, cheapest, pred_mem, pred_util, room_of


class HorusCostScorer:
    name = "horus-cost"

    def __init__(self, curve: Callable[[float], float] = PAPER_CURVE, w_mem: float = 1.0,
                 w_util: float = 1.0) -> None:
        self.curve = curve
        self.w_mem = w_mem
        self.w_util = w_util

    def costs(self, view: SchedulingView, job: Job, node: int, room: int) -> list[tuple[float, int]]:
        """(Eq. 7 cost, GPU) for every GPU of ``room``."""
        state = view.state
        cap = state.node_mem[node]
        u_j, m_j = pred_util(job), pred_mem(job, cap)
        wm, wu, f = self.w_mem / cap, self.w_util, self.curve
        if not state.node_mask[node] & room:  # only free GPUs: one cost for all
            c = wm * m_j + wu * f(u_j)
            return [(c, g) for g in range(state.node_gpus[node]) if room >> g & 1]
        load = NodeLoad(state, node)
        out = []
        g = 0
        while room >> g:
            if room >> g & 1:
                out.append((wm * (load.mem[g] + m_j) + wu * f(load.util[g] + u_j), g))
            g += 1
        return out

    def score(self, view: SchedulingView, vc: VcState, job: Job, node: int) -> float:
        room = room_of(view, job, node)
        need = min(job.gpus, room.bit_count())
        if not need:
            return 0.0
        total, _ = cheapest(self.costs(view, job, node, room), need)
        return 1.0 / (1.0 + total / need)

    def gpus(self, view: SchedulingView, vc: VcState, job: Job, node: int, room: int) -> int:
        """Reserve: the job's top-lambda cheapest GPUs of the node."""
        if room.bit_count() < job.gpus:
            return 0
        return cheapest(self.costs(view, job, node, room), job.gpus)[1]
