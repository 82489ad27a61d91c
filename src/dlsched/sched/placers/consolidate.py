"""Consolidate placement (Helios "ConsolidateAllocate"), with the reference's exact choices.

* <= one node of GPUs: best fit — the node with the fewest free GPUs that still fit,
  lowest index on ties.
* a multiple of a node: that many wholly free nodes, lowest indices first.
* otherwise: the whole free nodes it needs, then the remainder on the remaining node with the
  most free GPUs (lowest index on ties); if that node has too few, the job waits.
Needs a VC of identical nodes; on mixed nodes it falls back to best-fit spanning.
As a scorer (combined with others) it ranks nodes like best fit.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import NO_ROOM, Fit, fits
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import greedy_span, lowest, take_gpus, tightest_node
from dlsched.sched.placers.best_fit import tightness


class ConsolidatePlacer:
    name = "consolidate"
    score_by_free = True  # score() depends on the node's free GPU count only (for one job)
    single_node_only = True  # a job that fits one node waits rather than span nodes

    def score(self, view: ClusterView, vc: VcState, job: Job, node: int) -> float:
        return tightness(view, vc, job, node)

    def fast_place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        if vc.free < need:
            return NO_ROOM
        per_node = vc.gpus_per_node
        if not per_node:
            pl = greedy_span(view, vc, job, most_free_first=True)
            return fits(pl) if pl else NO_ROOM
        if need <= per_node:
            node = tightest_node(vc, need)
            return fits(((node, take_gpus(view, node, need)),)) if node >= 0 else NO_ROOM
        buckets = vc.buckets
        nodes = vc.nodes
        whole, rest = divmod(need, per_node)
        full = buckets[per_node]
        if full.bit_count() < whole:
            return NO_ROOM
        full_mask = (1 << per_node) - 1
        out: list[tuple[int, int]] = []
        for _ in range(whole):
            low = full & -full
            full ^= low
            out.append((nodes[low.bit_length() - 1], full_mask))
        if rest:
            if full:
                node = nodes[lowest(full)]
            else:
                for k in range(per_node - 1, rest - 1, -1):
                    if buckets[k]:
                        node = nodes[lowest(buckets[k])]
                        break
                else:
                    return NO_ROOM
            out.append((node, take_gpus(view, node, rest)))
        return fits(tuple(out))
