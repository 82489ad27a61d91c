"""Socket-aware best fit (the Best-Fit baseline of Amaral et al., SC'17, Sec. 5.2): bin packing that
"allocates first the GPUs from highly used domains".

* a job that fits one node: the node with the fewest free GPUs that still fit (lowest index on
  ties), never split across nodes;
* inside the node: the free GPUs of the fullest sockets first (fewest free GPUs on the socket,
  then lower socket, then lower GPU id) -- which may split a pair across sockets, the baseline's
  weakness the paper measures;
* a job wider than any node: the nodes with the most free GPUs first, the same GPU rule in each.

Sockets come from the node's topology (a preset when it has none, as for topology placement).
"""

from __future__ import annotations

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import greedy_span, tightest_node
from dlsched.sched.placers.best_fit import tightness
from dlsched.topology.machines import node_topology


def socket_pick(sockets: tuple[int, ...], free: int, count: int) -> int:
    """``count`` GPUs of the ``free`` mask, from the sockets with the fewest free GPUs first."""
    gpus = set_bits(free)
    per_socket: dict[int, int] = {}
    for g in gpus:
        per_socket[sockets[g]] = per_socket.get(sockets[g], 0) + 1
    gpus.sort(key=lambda g: (per_socket[sockets[g]], sockets[g], g))
    out = 0
    for g in gpus[:count]:
        out |= 1 << g
    return out


class SocketBestFitPlacer:
    name = "socket-best-fit"
    single_node_only = True  # a job that fits one node is never split across nodes

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        return tightness(view, vc, job, node)

    def gpus(self, view: ClusterView, vc: VcState, job: Job, node: int, room: int) -> int:
        free = room & ~view.node_mask[node]
        if free.bit_count() < job.gpus:
            return 0
        return socket_pick(node_topology(view.node_specs[node]).gpu_socket, free, job.gpus)

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        if need <= vc.max_node_gpus:
            node = tightest_node(vc, need)
            return fits(((node, self._take(view, node, need)),)) if node >= 0 else NO_ROOM
        pl = greedy_span(view, vc, job, most_free_first=True, take=self._take)
        return fits(pl) if pl else NO_ROOM

    def _take(self, view: ClusterView, node: int, count: int) -> int:
        full = (1 << view.node_gpus[node]) - 1
        return socket_pick(node_topology(view.node_specs[node]).gpu_socket, ~view.node_mask[node] & full, count)
