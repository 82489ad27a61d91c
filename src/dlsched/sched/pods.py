"""Jobs of several pods (a gang whose pod shape is known): placed as pod-sized pieces.

A job of ``n`` pods of ``k`` GPUs (``job.gpus_per_pod = k``, ``job.gpus = n * k``) runs each
pod on one node. Placed as one job of ``n * k`` GPUs it may get shares no pod fits: two pods of
6 GPUs on empty 8-GPU nodes get 8 + 4 (issue 33). Here the policy's own placement is kept when
every node's share holds whole pods; otherwise the job asks for ``n`` pieces of ``k`` GPUs, one
node each or several on one node where they fit. A job without a pod shape (``gpus_per_pod``
0, every trace job) never comes here, so every simulated result stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.decisions import Fit, Placement, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import take_lowest

if TYPE_CHECKING:   # the pipeline imports this module
    from dlsched.sched.framework import PlacementPipeline

_FITS, _UNSCHED = Status.FITS, Status.UNSCHEDULABLE


def is_pods(job: Job) -> bool:
    """True for a job of more than one pod (its shape known)."""
    per = job.gpus_per_pod
    return 0 < per < job.gpus


def splits(placement: Placement, per_pod: int) -> bool:
    """Every node's share of ``placement`` is whole pods of ``per_pod`` GPUs."""
    return all(mask.bit_count() % per_pod == 0 for _, mask in placement)


def pod_room(view: ClusterView, vc: VcState, per_pod: int) -> tuple[int, int]:
    """(open nodes of ``vc`` with ``per_pod`` free GPUs, pods of ``per_pod`` GPUs their free GPUs hold)."""
    nodes = pods = 0
    for k in range(per_pod, vc.max_node_gpus + 1):
        count = vc.buckets[k].bit_count()
        nodes += count
        pods += count * (k // per_pod)
    return nodes, pods


def shape_text(job: Job) -> str:
    """``gang of 2 x 6 GPUs``: how a pod-shaped job is named in a reason."""
    return f"gang of {job.gpus // job.gpus_per_pod} x {job.gpus_per_pod} GPUs"


def no_room_reason(view: ClusterView, vc: VcState, job: Job, filtered: int = 0) -> str:
    """Why ``job``'s pods do not fit now: how many nodes have a pod's free GPUs and how many pods they hold."""
    per = job.gpus_per_pod
    n = job.gpus // per
    nodes, room = pod_room(view, vc, per)
    why = (f"{shape_text(job)}: needs {n} pods of {per} free GPUs on one node each; {nodes} node(s) of VC "
           f"{vc.name} have {per} free GPUs, room for {room} pod(s)")
    return why + (f", {filtered} node(s) left out by the placement's filters" if filtered else "")


def place_sizes(pipeline: PlacementPipeline, view: ClusterView, vc: VcState, job: Job, sizes: list[int]) -> Fit:
    """Pieces of unequal ``sizes`` (a gang whose pods ask for different GPU counts), largest
    first, each on the first node with room (most free GPUs first, then the best scored, then
    the lowest index); the placement lists the nodes in that order, so that cutting it into the
    pods the same way (``service.gangs.split_placement``) gives each pod its piece."""
    ranked: list[tuple[int, float, int]] = []
    for k in range(vc.max_node_gpus, 0, -1):
        for local in set_bits(vc.buckets[k]):
            node = vc.nodes[local]
            if not any(f.filter(view, vc, job, node) for f in pipeline.filters):
                ranked.append((-k, -sum(w * s.score(view, vc, job, node) for s, w in pipeline.scorers), local))
    ranked.sort()
    room = [-neg for neg, _, _ in ranked]
    used = [0] * len(ranked)
    for size in sorted((g for g in sizes if g > 0), reverse=True):
        i = next((i for i, r in enumerate(room) if r >= size), -1)
        if i < 0:
            return Fit(_UNSCHED, None, f"a pod of {size} GPUs finds no node with {size} free GPUs beside the "
                                       f"gang's other pods")
        room[i] -= size
        used[i] += size
    out = []
    for (_, _, local), count in zip(ranked, used):
        if count:
            node = vc.nodes[local]
            out.append((node, take_lowest(~view.node_mask[node] & ((1 << view.node_gpus[node]) - 1), count)))
    return Fit(_FITS, tuple(out))


def place_pods(pipeline: PlacementPipeline, view: ClusterView, vc: VcState, job: Job,
               policy_place: Callable[[ClusterView, VcState, Job], Fit]) -> Fit:
    """The policy's placement of ``job`` when it splits into whole pods, else ``n`` pod-sized
    pieces (nodes that hold the most pods first -- fewest nodes --, then the best scored, then
    the lowest index; each gives its lowest free GPUs). A job that fits one node keeps the
    policy's answer when the policy never spans such a job (``single_node_only``)."""
    per = job.gpus_per_pod
    fit = policy_place(view, vc, job)
    if fit.status is _FITS and splits(fit.placement, per):
        return fit
    if fit.status is Status.POSTPONE or (pipeline.single_node_only and job.gpus <= vc.max_node_gpus):
        return fit
    left = job.gpus // per
    ranked: list[tuple[int, float, int]] = []
    filtered = 0
    for k in range(vc.max_node_gpus, per - 1, -1):
        for local in set_bits(vc.buckets[k]):
            node = vc.nodes[local]
            if any(f.filter(view, vc, job, node) for f in pipeline.filters):
                filtered += 1
                continue
            total = sum(w * s.score(view, vc, job, node) for s, w in pipeline.scorers)
            ranked.append((-(k // per), -total, local))
    ranked.sort()
    out: list[tuple[int, int]] = []
    for neg_pods, _, local in ranked:
        node = vc.nodes[local]
        use = min(-neg_pods, left)
        free = ~view.node_mask[node] & ((1 << view.node_gpus[node]) - 1)
        out.append((node, take_lowest(free, use * per)))
        left -= use
        if not left:
            placed = Fit(_FITS, tuple(out))
            for plugin in pipeline.permits:
                placed = plugin.permit(view, vc, job, placed)
                if placed.status is not _FITS:
                    break
            return placed
    return Fit(_UNSCHED, None, no_room_reason(view, vc, job, filtered))
