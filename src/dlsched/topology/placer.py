"""Placement decisions: TOPO-AWARE, TOPO-AWARE-P (Sec. 4.4) and the FCFS / Best-Fit baselines (Sec. 5.2).

Every placer answers ``decide(state, profile) -> Decision`` on a :class:`ClusterState`; none
of them knows about the event loop. Queue discipline (strict FIFO for FCFS, Alg. 1's
postponing scan for the others) belongs to the caller; ``Placer.strict_fifo`` says which.

Cluster level of the DRB mapping: the network level is a star (every machine hangs off the
network vertex with the same weight) so every balanced bisection of the machines has the same
cut and FM has nothing to optimise there; Alg. 3 then sends the whole job to the half with the
higher utility, i.e. the machine tournament below. Each machine's best mapping (FM + Alg. 2-3
inside it) is cached by the machine's signature (graph, free mask, co-runner classes), so
identical machines -- all idle ones, say -- are mapped once; a decision is then one pass over
the candidate machines (Alg. 1's filterHostsByConstraints) with dictionary look-ups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dlsched.topology.drb import drb_map
from dlsched.topology.effects import bits
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.state import ClusterState
from dlsched.topology.utility import ALPHA, UtilityParts, utility


@dataclass(frozen=True, slots=True)
class Decision:
    """``placement`` is ((machine, gpu_bitmask), ...) or None; ``postponed`` marks TOPO-AWARE-P
    refusing a feasible but unsatisfying placement (U < the job's minimum utility)."""

    placement: tuple[tuple[int, int], ...] | None
    utility: float = 0.0
    parts: UtilityParts | None = None
    postponed: bool = False

    @property
    def placed(self) -> bool:
        return self.placement is not None and not self.postponed


class Placer(Protocol):
    name: str
    strict_fifo: bool

    def decide(self, state: ClusterState, p: JobProfile) -> Decision: ...


def _lowest(mask: int, k: int) -> int:
    out = 0
    for g in bits(mask)[:k]:
        out |= 1 << g
    return out


def _score(state: ClusterState, p: JobProfile, placement: tuple[tuple[int, int], ...]) -> Decision:
    ms = [m for m, _ in placement]
    parts = utility(p, placement, state.graphs, state.co_runners(ms))
    return Decision(placement, parts.utility, parts)


def _span(state: ClusterState, p: JobProfile, order: list[int], pick) -> tuple[tuple[int, int], ...] | None:
    """Multi-machine fallback: take machines in ``order``, ``pick(m, mask, n)`` GPUs from each."""
    need = p.gpus
    out = []
    for m in order:
        f = state.free_count(m)
        if f and need:
            n = min(f, need)
            out.append((m, pick(m, state.free[m], n)))
            need -= n
    return tuple(out) if need == 0 else None


class FCFSPlacer:
    """First Come First Served (Sec. 5.2): strict FIFO queue, first machine with room, lowest GPU ids."""

    name = "fcfs"
    strict_fifo = True

    def decide(self, state: ClusterState, p: JobProfile) -> Decision:
        for m in range(state.machines):
            if state.free_count(m) >= p.gpus:
                return _score(state, p, ((m, _lowest(state.free[m], p.gpus)),))
        if not p.single_node:
            pl = _span(state, p, list(range(state.machines)), lambda m, mask, n: _lowest(mask, n))
            if pl:
                return _score(state, p, pl)
        return Decision(None)


class BestFitPlacer:
    """Best Fit (Sec. 5.2): bin packing, "allocating first the GPUs from highly used domains":
    the machine with the fewest free GPUs that fits, then GPUs from the fullest sockets."""

    name = "best-fit"
    strict_fifo = False

    def _gpus(self, state: ClusterState, m: int, mask: int, n: int) -> int:
        mg = state.graphs[m]
        free = bits(mask)
        per_socket: dict[int, int] = {}
        for g in free:
            per_socket[mg.socket_of[g]] = per_socket.get(mg.socket_of[g], 0) + 1
        free.sort(key=lambda g: (per_socket[mg.socket_of[g]], mg.socket_of[g], g))
        out = 0
        for g in free[:n]:
            out |= 1 << g
        return out

    def decide(self, state: ClusterState, p: JobProfile) -> Decision:
        best = None
        for m in range(state.machines):
            f = state.free_count(m)
            if f >= p.gpus and (best is None or f < best[0]):
                best = (f, m)
                if f == p.gpus:
                    break
        if best is not None:
            m = best[1]
            return _score(state, p, ((m, self._gpus(state, m, state.free[m], p.gpus)),))
        if not p.single_node:
            order = sorted(range(state.machines), key=lambda m: (-state.free_count(m), m))
            pl = _span(state, p, order, lambda m, mask, n: self._gpus(state, m, mask, n))
            if pl:
                return _score(state, p, pl)
        return Decision(None)


class TopoAwarePlacer:
    """TOPO-AWARE (``postpone=False``) and TOPO-AWARE-P (``postpone=True``), Sec. 4.4."""

    strict_fifo = False

    def __init__(self, postpone: bool = False, alpha: tuple[float, float, float] = ALPHA) -> None:
        if abs(sum(alpha) - 1.0) > 1e-9:
            raise ValueError("the utility weights must add up to 1 (Eq. 1)")
        self.postpone = postpone
        self.alpha = alpha
        self.name = "topo-aware-p" if postpone else "topo-aware"
        self._sig_cache: dict[tuple, tuple[float, int, UtilityParts]] = {}
        self._machine_sig: dict[int, tuple[int, tuple]] = {}

    def _signature(self, state: ClusterState, m: int) -> tuple:
        """(graph, free mask, co-runner classes with their local footprints) of machine ``m``."""
        hit = self._machine_sig.get(m)
        if hit is not None and hit[0] == state.version[m]:
            return hit[1]
        co = []
        for r in state.co_runners([m]):
            local = tuple(sorted(k[2] for k in r.footprint if k[0] == "s" and k[1] == m))
            co.append((r.profile.type_key, local, ("smp", m) in r.footprint, ("net",) in r.footprint))
        sig = (id(state.graphs[m]), state.free[m], tuple(sorted(co)))
        self._machine_sig[m] = (state.version[m], sig)
        return sig

    def map_on_machine(self, state: ClusterState, p: JobProfile, m: int) -> tuple[float, int, UtilityParts]:
        """DRB inside machine ``m`` plus the exact utility of its result (cached by signature)."""
        key = (self._signature(state, m), p.type_key)
        hit = self._sig_cache.get(key)
        if hit is not None:
            return hit
        mg = state.graphs[m]
        co = state.co_runners([m])
        mask = drb_map(p, m, mg, state.free[m], co, alpha=self.alpha)
        parts = utility(p, ((m, mask),), state.graphs, co, self.alpha)
        out = (parts.utility, mask, parts)
        if len(self._sig_cache) > 200_000:
            self._sig_cache.clear()
        self._sig_cache[key] = out
        return out

    def decide(self, state: ClusterState, p: JobProfile) -> Decision:
        best: tuple | None = None
        k = p.gpus
        free = state.free
        for m in range(state.machines):
            f = free[m].bit_count()
            if f < k:
                continue
            u, mask, parts = self.map_on_machine(state, p, m)
            # higher utility; ties -> fullest machine (fragmentation), then lowest index
            rank = (round(u, 9), -f, -m)
            if best is None or rank > best[0]:
                best = (rank, m, mask, parts)
        if best is not None:
            _, m, mask, parts = best
            d = Decision(((m, mask),), parts.utility, parts)
        elif not p.single_node:
            d = self._multi_node(state, p)
            if d is None:
                return Decision(None)
        else:
            return Decision(None)
        if self.postpone and d.utility < p.min_utility:
            return Decision(d.placement, d.utility, d.parts, postponed=True)
        return d

    def _multi_node(self, state: ClusterState, p: JobProfile) -> Decision | None:
        """Fewest machines first (most free GPUs), DRB inside each for its share of the tasks."""
        order = sorted(range(state.machines), key=lambda m: (-state.free_count(m), m))

        def pick(m: int, mask: int, n: int) -> int:
            return drb_map(p, m, state.graphs[m], mask, state.co_runners([m]), k=n, alpha=self.alpha) or 0

        pl = _span(state, p, order, pick)
        if pl is None:
            return None
        parts = utility(p, pl, state.graphs, state.co_runners([m for m, _ in pl]), self.alpha)
        return Decision(pl, parts.utility, parts)


PLACERS = {
    "fcfs": FCFSPlacer,
    "best-fit": BestFitPlacer,
    "topo-aware": lambda: TopoAwarePlacer(postpone=False),
    "topo-aware-p": lambda: TopoAwarePlacer(postpone=True),
}


def make_placer(name: str) -> Placer:
    try:
        return PLACERS[name]()
    except KeyError:
        raise ValueError(f"unknown topology placer {name!r}; choose from {', '.join(PLACERS)}") from None
