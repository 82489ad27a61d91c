"""Placement- and interference-dependent job speed, from the measurements of Sec. 3.

Two multiplicative slowdowns over a job's solo time (its time alone on the best placement):

* placement: pack vs spread (Sec. 3.2, Fig. 4). Fully spread (cross-socket) AlexNet runs
  1.27x slower than pack at batch 1 and 1.30x at batch 2 on NVLink, 1.24x / 1.21x on PCIe;
  batch 8: 1.20x (NVLink) / 1.10x (PCIe); from batch 16 up pack and spread are even.
  CaffeRef is AlexNet-based (Sec. 2) and shares the table; GoogLeNet shows "less or no
  impact" (Sec. 3.2), modelled as 1.05x at batch <= 2, 1.02x at 8, 1.0 from 16 (assumption).
  Between anchors we interpolate in log2(batch). Partially spread placements scale the
  penalty by how far their mean GPU distance is from the best possible one.
* interference: co-scheduled communicating jobs sharing a bus (Sec. 3.3, Fig. 6). Two tiny
  AlexNets collocated: ~30 % slowdown; a big-batch aggressor still hurts a tiny victim by
  ~24 % and a small one by ~21 %; a big-batch victim suffers "very small or nonexistent"
  slowdown. We model slowdown(victim, aggressor) = 0.30 * sens(victim) * dem(aggressor)
  fitted to those anchors, summed over overlapping co-runners and capped at 60 %.
  Single-GPU jobs have no GPU-GPU traffic, only host-to-device input; the paper shows they
  still interfere (Sec. 5.2.2, Job 1 vs Job 0) without a figure, so we assume a flat 5 %
  between two single-GPU jobs, independent of model and batch.

Two jobs overlap when they share a socket, or both cross the same machine's SMP bus, or
both cross the network (``footprint``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

from dlsched.core.bits import set_bits
from dlsched.topology.graph import W_NETWORK, MachineGraph
from dlsched.topology.jobgraph import BatchClass, JobProfile

# (batch, slowdown of the fully spread placement vs pack) anchors, Sec. 3.2 / Fig. 4
_SPREAD_ANCHORS = {
    ("alexnet", True): ((1, 1.27), (2, 1.30), (8, 1.20), (16, 1.0)),
    ("alexnet", False): ((1, 1.24), (2, 1.21), (8, 1.10), (16, 1.0)),
    ("googlenet", True): ((1, 1.05), (2, 1.05), (8, 1.02), (16, 1.0)),
    ("googlenet", False): ((1, 1.04), (2, 1.04), (8, 1.01), (16, 1.0)),
}
_MODEL_TABLE = {"alexnet": "alexnet", "caffenet": "alexnet", "googlenet": "googlenet"}

INTERFERENCE_BASE = 0.30                      # Fig. 6: two tiny AlexNets, ~30 %
# sens/dem per batch class, fitted to Fig. 6 (tiny/tiny 30 %, big->tiny 24 %, big->small 21 %)
SENSITIVITY = {BatchClass.TINY: 1.0, BatchClass.SMALL: 0.875, BatchClass.MEDIUM: 0.45, BatchClass.BIG: 0.03}
DEMAND = {BatchClass.TINY: 1.0, BatchClass.SMALL: 0.95, BatchClass.MEDIUM: 0.9, BatchClass.BIG: 0.8}
GOOGLENET_SENS, GOOGLENET_DEM = 0.3, 0.5      # less communication (Sec. 3.2, Fig. 5 discussion)
SINGLE_GPU_FACTOR = math.sqrt(0.05 / INTERFERENCE_BASE)   # 0.30 * f * f = 5 % (assumption)
INTERFERENCE_CAP = 0.60
CROSS_MACHINE_H = 2.0                          # spread beyond one machine: at most 2x the socket penalty


def spread_penalty(model: str, batch_size: int, nvlink: bool = True) -> float:
    """Slowdown of the fully spread placement over pack (>= 1), Sec. 3.2 / Fig. 4."""
    anchors = _SPREAD_ANCHORS[(_MODEL_TABLE[model], nvlink)]
    b = max(1, batch_size)
    if b <= anchors[0][0]:
        return anchors[0][1]
    for (b0, s0), (b1, s1) in itertools.pairwise(anchors):
        if b <= b1:
            f = (math.log2(b) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
            return s0 + f * (s1 - s0)
    return anchors[-1][1]


def sensitivity(p: JobProfile) -> float:
    if p.gpus == 1:
        return SINGLE_GPU_FACTOR
    s = SENSITIVITY[p.batch_class]
    return s * GOOGLENET_SENS if p.model == "googlenet" else s


def demand(p: JobProfile) -> float:
    if p.gpus == 1:
        return SINGLE_GPU_FACTOR
    d = DEMAND[p.batch_class]
    return d * GOOGLENET_DEM if p.model == "googlenet" else d


def pair_slowdown(victim: JobProfile, aggressor: JobProfile) -> float:
    """Fractional slowdown ``victim`` suffers from one overlapping ``aggressor`` (Fig. 6 model)."""
    return INTERFERENCE_BASE * sensitivity(victim) * demand(aggressor)


def interference_factor(victim: JobProfile, aggressors: Iterable[JobProfile]) -> float:
    """Multiplier >= 1 on the victim's run time from all overlapping co-runners."""
    total = sum(pair_slowdown(victim, a) for a in aggressors)
    return 1.0 + min(INTERFERENCE_CAP, total)


Placement = Sequence[tuple[int, int]]   # ((machine, gpu bitmask), ...)


bits = set_bits  # re-exported for the topology modules


def footprint(placement: Placement, graphs: Sequence[MachineGraph]) -> frozenset:
    """Shared buses a placement loads: its sockets, the SMP bus if it crosses sockets, the network."""
    keys: set = set()
    for m, mask in placement:
        socks = {graphs[m].socket_of[g] for g in bits(mask)}
        keys.update(("s", m, s) for s in socks)
        if len(socks) > 1:
            keys.add(("smp", m))
    if len(placement) > 1:
        keys.add(("net",))
    return frozenset(keys)


def gpu_list(placement: Placement) -> list[tuple[int, int]]:
    return [(m, g) for m, mask in placement for g in bits(mask)]


def distance(graphs: Sequence[MachineGraph], a: tuple[int, int], b: tuple[int, int]) -> int:
    """Shortest path between two GPUs of the cluster graph (network hop between machines)."""
    (ma, ga), (mb, gb) = a, b
    if ma == mb:
        return graphs[ma].dist[ga][gb]
    return graphs[ma].up[ga] + 2 * W_NETWORK + graphs[mb].up[gb]


def pair_distance_sum(gpus: list[tuple[int, int]], graphs: Sequence[MachineGraph]) -> int:
    """Sum of :func:`distance` over all GPU pairs, grouped by machine: pairs inside a machine read
    its distance matrix; pairs across machines a and b add up to |b| * sum(up of a) + |a| *
    sum(up of b) + 2 W_NETWORK |a| |b| (exact integers, O(machines^2) instead of O(GPUs^2))."""
    by_machine: dict[int, list[int]] = {}
    for m, g in gpus:
        by_machine.setdefault(m, []).append(g)
    total = 0
    ups: list[tuple[int, int]] = []   # (GPUs, sum of their distances to the machine vertex)
    for m, gl in by_machine.items():
        dist = graphs[m].dist
        total += sum(dist[gl[i]][gl[j]] for i in range(len(gl)) for j in range(i + 1, len(gl)))
        up = graphs[m].up
        ups.append((len(gl), sum(up[g] for g in gl)))
    for i, (na, ua) in enumerate(ups):
        for nb, ub in ups[i + 1:]:
            total += nb * ua + na * ub + 2 * W_NETWORK * na * nb
    return total


def mean_pair_distance(gpus: list[tuple[int, int]], graphs: Sequence[MachineGraph]) -> float:
    n = len(gpus)
    if n < 2:
        return 0.0
    return pair_distance_sum(gpus, graphs) / (n * (n - 1) / 2)


_BEST: dict[tuple[int, int], tuple[MachineGraph, int]] = {}


def _best_pair_sum(mg: MachineGraph, k: int) -> int:
    n = mg.gpus
    if k < 2:
        return 0
    if k <= n:
        return min(sum(mg.dist[a][b] for a, b in itertools.combinations(c, 2))
                   for c in itertools.combinations(range(n), k))
    full, rest = divmod(k, n)
    intra = full * best_pair_sum(mg, n) + best_pair_sum(mg, rest)
    sizes = [n] * full + ([rest] if rest else [])
    cross_pairs = sum(sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes)))
    return intra + cross_pairs * (2 * min(mg.up) + 2 * W_NETWORK)


def best_pair_sum(mg: MachineGraph, k: int) -> int:
    """Smallest possible sum of pairwise distances of ``k`` GPUs on idle machines like ``mg``
    (brute force over subsets, cached per machine graph: at most C(8, 4) = 70 subsets)."""
    if k < 2:
        return 0
    hit = _BEST.get((id(mg), k))
    if hit is None or hit[0] is not mg:
        hit = (mg, _best_pair_sum(mg, k))
        _BEST[(id(mg), k)] = hit
    return hit[1]


def placement_factor(p: JobProfile, placement: Placement, graphs: Sequence[MachineGraph]) -> float:
    """Multiplier >= 1 on run time from where the GPUs are (pack = 1, Sec. 3.2).

    h = (mean distance - best mean distance for this many GPUs) / (machine diameter -
    nearest link); h = 1 is the paper's cross-socket "spread", capped at 2 across machines.
    """
    if p.gpus < 2:
        return 1.0
    gl = gpu_list(placement)
    mg = graphs[gl[0][0]]
    span = max(1, mg.diameter - mg.nearest)
    pairs = p.gpus * (p.gpus - 1) / 2
    best_mean = best_pair_sum(mg, p.gpus) / pairs
    h = (mean_pair_distance(gl, graphs) - best_mean) / span
    h = min(CROSS_MACHINE_H, max(0.0, h))
    return 1.0 + (spread_penalty(p.model, p.batch_size, mg.nvlink_peak) - 1.0) * h
