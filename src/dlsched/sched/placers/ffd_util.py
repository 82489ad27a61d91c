"""First fit by predicted utilisation (the GPU-utilisation-prediction paper's prototype, §6).

A GPU may take the job when, besides the pipeline's room (predicted memory, the cluster's job
cap), its holders' *predicted* utilisation plus the job's stays within 100 % (no
over-allocation) and it holds fewer than ``max_jobs`` (3) jobs. First fit: the lowest node that
has enough such GPUs, its lowest such GPUs. With the decreasing-utilisation order
(``ffd-util`` policy) this is first-fit-decreasing bin packing. A job spread over several
nodes takes free GPUs only, which always keep the bound; a node that offers shared GPUs but too
few within the bound is left out of such a spread too (kept simple: the filter cannot tell the
two uses apart).
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.framework import room_of
from dlsched.sched.gpus import take_lowest
from dlsched.sched.sharing.load import FULL_UTIL, NodeLoad, pred_util


class FfdUtilPlacer:
    name = "ffd-util"

    def __init__(self, max_jobs: int = 3, max_util: float = FULL_UTIL) -> None:
        self.max_jobs = max_jobs
        self.max_util = max_util

    def fitting(self, view: ClusterView, job: Job, node: int, room: int) -> int:
        """GPUs of ``room`` where the job keeps predicted utilisation <= 100 % and jobs < max."""
        busy = view.node_mask[node] & room
        if not busy:
            return room
        load = NodeLoad(view, node)
        u = pred_util(job)
        ok = room & ~busy
        for g in range(view.node_gpus[node]):
            if busy >> g & 1 and load.jobs[g] < self.max_jobs and load.util[g] + u <= self.max_util:
                ok |= 1 << g
        return ok

    def filter(self, view: ClusterView, vc: VcState, job: Job, node: int) -> str | None:
        room = room_of(view, job, node)
        if job.gpus > view.node_gpus[node] or not room & view.node_mask[node]:
            return None  # only free GPUs here (a node of a spanning job included): always within the bound
        if self.fitting(view, job, node, room).bit_count() < job.gpus:
            return f"fewer than {job.gpus} GPUs keep predicted utilisation <= {self.max_util:g} %"
        return None

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        return 1.0  # first fit: the pipeline keeps the lowest node on ties

    def gpus(self, view: ClusterView, vc: VcState, job: Job, node: int, room: int) -> int:
        ok = self.fitting(view, job, node, room)
        return take_lowest(ok, job.gpus) if ok.bit_count() >= job.gpus else 0
