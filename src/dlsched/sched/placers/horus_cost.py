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

import numpy as np

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.decisions import Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import lowest, nodes_with_at_least, take_gpus
from dlsched.sched.sharing.curve import PAPER_CURVE
from dlsched.sched.sharing.load import NodeLoad, cheapest, pred_mem, pred_util


class HorusCostScorer:
    name = "horus-cost"
    needs_indexes = ("load",)  # score_rows reads the per-GPU load index

    def __init__(self, curve: Callable[[float], float] = PAPER_CURVE, w_mem: float = 1.0,
                 w_util: float = 1.0) -> None:
        self.curve = curve
        self.w_mem = w_mem
        self.w_util = w_util

    def costs(self, view: ClusterView, job: Job, node: int, room: int | None = None) -> list[tuple[float, int]]:
        """(Eq. 7 cost, GPU) for every GPU of ``room`` (default: the node's GPUs that pass the
        capacity check -- free ones, and shared ones below the cap where predicted memory fits)."""
        cap = view.node_mem[node]
        u_j, m_j = pred_util(job), pred_mem(job, cap)
        wm, wu, f = self.w_mem / cap, self.w_util, self.curve
        if room is None:
            room = view.room_mask(node)
            if job.pred_gpu_mem_mib != job.pred_gpu_mem_mib:  # no memory prediction: never shares
                room &= ~view.node_mask[node]
        busy = room & view.node_mask[node]
        base = wm * m_j + wu * f(u_j)
        out = [(base, g) for g in set_bits(room & ~busy)]
        if busy:
            load = NodeLoad(view, node)
            for g in set_bits(busy):
                mem = load.mem[g] + m_j
                if mem <= cap:
                    out.append((wm * mem + wu * f(load.util[g] + u_j), g))
        return out

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        need = job.gpus
        if view.node_free[node] >= need:  # free GPUs all cost the same and beat shared ones
            cap = view.node_mem[node]
            return 1.0 / (1.0 + self.w_mem * pred_mem(job, cap) / cap + self.w_util * self.curve(pred_util(job)))
        costs = self.costs(view, job, node)
        need = min(need, len(costs))
        if not need:
            return 0.0
        total, _ = cheapest(costs, need)
        return 1.0 / (1.0 + total / need)

    def score_rows(self, view: ClusterView, vc: VcState, job: Job, rows: np.ndarray) -> np.ndarray:
        """:meth:`score` of the VC-local nodes ``rows`` at once, from the load index: the same
        arithmetic in the same order (float for float), so the same node wins."""
        arr = view.index("load").arrays(vc)
        need = job.gpus
        capm = arr.cap
        u = pred_util(job)
        m_raw = job.pred_gpu_mem_mib
        no_mem = m_raw != m_raw
        m = capm if no_mem else m_raw
        fu = self.curve(u)
        # a node with `need` free GPUs: free GPUs all cost the same and beat shared ones
        full = 1.0 / (1.0 + self.w_mem * m / capm + self.w_util * fu)
        nf = arr.node_free
        if (nf[rows] >= need).all():
            return full[rows]
        wm = self.w_mem / capm
        wu = self.w_util
        base = wm * m + wu * fu
        costs = np.where(arr.free_ok, base[:, None], np.inf)
        if not no_mem:  # a job without a memory prediction never shares
            mem = arr.mem + m_raw
            ok = arr.share_ok & (mem <= capm[:, None])
            np.copyto(costs, wm[:, None] * mem + wu * _vector(self.curve, arr.util + u, ok), where=ok)
        if need == 1:
            total = costs.min(axis=1)
            k = np.isfinite(total)
            part = np.where(k, 1.0 / (1.0 + total), 0.0)  # total / 1 == total
        else:
            costs.sort(axis=1)
            k = np.minimum(need, np.isfinite(costs).sum(axis=1))
            total = costs[:, 0].copy()
            for c in range(1, need):  # in sorted order, as the scalar sum does
                more = c < k
                if not more.any():
                    break
                total = np.where(more, total + costs[:, c], total)
            part = np.where(k > 0, 1.0 / (1.0 + total / np.maximum(k, 1)), 0.0)
        return np.where(nf >= need, full, part)[rows]

    @staticmethod
    def free_fit(view: ClusterView, vc: VcState, job: Job) -> Fit | None:
        """The pipeline's answer when some node has enough free GPUs, in a few bucket look-ups:
        free GPUs all cost the same and beat shared ones, so the best node is the lowest one
        with ``gpus`` free GPUs, and its lowest free GPUs. None when no node has them, and on a
        VC whose nodes differ in GPU memory: there a free GPU's cost ``GMem_j / CP_mem`` differs
        per node (and may exceed a shared GPU's on a larger node), so the stages compare them."""
        need = job.gpus
        if need > vc.max_node_gpus or vc.free < need or vc.min_gpu_mem != vc.max_gpu_mem:
            return None
        nodes = nodes_with_at_least(vc, need)
        if not nodes:
            return None
        node = vc.nodes[lowest(nodes)]
        return fits(((node, take_gpus(view, node, need)),))

    def gpus(self, view: ClusterView, vc: VcState, job: Job, node: int, room: int) -> int:
        """Reserve: the job's top-lambda cheapest GPUs of the node."""
        costs = self.costs(view, job, node, room)
        if len(costs) < job.gpus:
            return 0
        return cheapest(costs, job.gpus)[1]


def _vector(f: Callable[[float], float], x: np.ndarray, where: np.ndarray) -> np.ndarray:
    """``f`` of every element of ``x`` (only ``where`` matters): the curve's own ``vector`` when it
    has one (the same float operations), else ``f`` element by element."""
    vec = getattr(f, "vector", None)
    if vec is not None:
        return vec(x)
    out = np.zeros_like(x)
    for i, j in zip(*np.nonzero(where)):
        out[i, j] = f(float(x[i, j]))
    return out
