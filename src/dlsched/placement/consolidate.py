"""Consolidate placement (Helios "ConsolidateAllocate"), with the reference's exact choices.

* <= one node of GPUs: best fit — the node with the fewest free GPUs that still fit,
  lowest index on ties.
* a multiple of a node: that many wholly free nodes, lowest indices first.
* otherwise: the whole free nodes it needs, then the remainder on the remaining node with the
  most free GPUs (lowest index on ties); if that node has too few, the job waits.
Needs a VC of identical nodes; on mixed nodes it falls back to best-fit spanning.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.placement.base import greedy_span, lowest, take_gpus
from dlsched.sim.decisions import Placement
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class ConsolidatePlacer:
    name = "consolidate"

    def place(self, view: SchedulingView, vc: VcState, job: Job) -> Placement | None:
        need = job.gpus
        if vc.free < need:
            return None
        per_node = vc.gpus_per_node
        buckets = vc.buckets
        if not per_node:
            return greedy_span(view, vc, job, most_free_first=True)
        if need <= per_node:
            for k in range(need, per_node + 1):
                m = buckets[k]
                if m:
                    node = vc.node_lo + lowest(m)
                    return ((node, take_gpus(view, node, need)),)
            return None
        whole, rest = divmod(need, per_node)
        full = buckets[per_node]
        if full.bit_count() < whole:
            return None
        full_mask = (1 << per_node) - 1
        out: list[tuple[int, int]] = []
        for _ in range(whole):
            low = full & -full
            full ^= low
            out.append((vc.node_lo + low.bit_length() - 1, full_mask))
        if rest:
            if full:
                node = vc.node_lo + lowest(full)
            else:
                for k in range(per_node - 1, rest - 1, -1):
                    if buckets[k]:
                        node = vc.node_lo + lowest(buckets[k])
                        break
                else:
                    return None
            out.append((node, take_gpus(view, node, rest)))
        return tuple(out)
