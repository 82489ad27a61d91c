"""The placement utility of Eq. 2-5 (Sec. 4.3-4.4).

U = a_cc * C + a_b * I + a_d * F with a_cc + a_b + a_d = 1 (equal thirds in Sec. 5.2.1):

* C = 1 / (t / t_best): Eq. 3's communication cost t (sum over GPU pairs of job-edge weight x
  shortest-path length, weights normalised by 4 as in Sec. 4.1.1) normalised by the best
  achievable t for the same number of GPUs on that machine type, so C is 1 for the best
  placement and ~1/42 for a 2-GPU job split across a Minsky's sockets.
* I = Eq. 4: mean over the job and the jobs already running on the machines it would use of
  solo_time / collocation_time (1 = nobody slowed down), from the profile model in
  :mod:`dlsched.topology.effects`.
* F = 1 / omega with omega = sockets the job spans / the fewest sockets that could hold it:
  an allocation scattered over more sockets than needed fragments them (Eq. 5 averages the
  free share of sockets; the paper leaves open which sockets and how 1/omega is bounded, so
  this is our reading: it is 1 for a compact allocation and 1/2 for a needless split).

Every term is in (0, 1] and so is U, which makes Table 1's thresholds (0.3 / 0.5) usable
as they are. Among machines with equal U we take the fullest (best fit): "map GPUs from the
most fragmented domains to increase cluster utilization" (Sec. 4.3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlsched.topology.effects import (
    Placement,
    best_pair_sum,
    footprint,
    gpu_list,
    interference_factor,
    pair_distance_sum,
)
from dlsched.topology.graph import MachineGraph
from dlsched.topology.jobgraph import JobProfile

ALPHA = (1 / 3, 1 / 3, 1 / 3)


@dataclass(frozen=True, slots=True)
class UtilityParts:
    comm: float
    interference: float
    fragmentation: float
    utility: float
    t: float
    t_best: float


def min_sockets(mg: MachineGraph, k: int) -> int:
    return max(1, -(-k // max(1, mg.socket_size)))


def comm_cost(p: JobProfile, gpus: list[tuple[int, int]], graphs: Sequence[MachineGraph]) -> float:
    """Eq. 3 with the job graph's (uniform, Sec. 5.1) edge weight normalised to [0, 1]."""
    return p.comm_weight / 4.0 * pair_distance_sum(gpus, graphs)


def interference_score(p: JobProfile, fp: frozenset, co_runners: Sequence) -> float:
    """Eq. 4: mean solo/collocated time over the new job and the co-runners on its machines.

    ``co_runners`` are objects with ``profile`` and ``footprint`` (``state.Running``).
    """
    ratios = []
    mine = [r.profile for r in co_runners if r.footprint & fp]
    ratios.append(1.0 / interference_factor(p, mine))
    for r in co_runners:
        others = [o.profile for o in co_runners if o is not r and o.footprint & r.footprint]
        if r.footprint & fp:
            others.append(p)
        ratios.append(1.0 / interference_factor(r.profile, others))
    return sum(ratios) / len(ratios)


def utility(p: JobProfile, placement: Placement, graphs: Sequence[MachineGraph], co_runners: Sequence,
            alpha: tuple[float, float, float] = ALPHA, inter: Callable[[frozenset], float] | None = None
            ) -> UtilityParts:
    """U of placing ``p`` on ``placement`` next to ``co_runners`` (Eq. 2-5); ``inter(footprint)``
    may stand in for Eq. 4 (e.g. a caller's cache of :func:`interference_score`)."""
    gl = gpu_list(placement)
    mg = graphs[gl[0][0]]
    if p.gpus > 1:
        t = comm_cost(p, gl, graphs)
        t_best = p.comm_weight / 4.0 * best_pair_sum(mg, len(gl))
        comm = t_best / t if t > 0 else 1.0
    else:
        t = t_best = 0.0
        comm = 1.0
    fp = footprint(placement, graphs)
    i_term = inter(fp) if inter is not None else interference_score(p, fp, co_runners)
    spanned = sum(1 for key in fp if key[0] == "s")
    frag = min_sockets(mg, len(gl)) / max(1, spanned)
    a_cc, a_b, a_d = alpha
    return UtilityParts(comm, i_term, frag, a_cc * comm + a_b * i_term + a_d * frag, t, t_best)
