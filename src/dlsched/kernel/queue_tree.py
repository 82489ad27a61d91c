"""The queue tree: leaf queues (VCs), inner queues (cohorts), their limits, weights and usage.

A queue's ``parent`` names an inner queue (a cohort with no nodes of its own), which may itself
have a parent. Queues whose ``parent`` is absent share the root cohort. Two leaves lend to each
other only inside one top-level tree (the root cohort, or the subtree of one top-level inner
queue), and every queue on the way from a leaf up to (not including) the nearest common ancestor
of borrower and lender must allow it: an inner queue's ``borrow_limit`` bounds the GPUs its whole
subtree's jobs hold outside it, its ``lend_limit`` the GPUs of its subtree's nodes held by jobs
from outside. A limit is a number (GPUs of any type, ``None``: no limit) or per GPU type (a type
not named may not be borrowed or lent).

Usage is time-decayed GPU-seconds, integrated exactly over running time (a job counts while it
runs, not only when it ends): ``u(t) = sum over GPU-seconds s of 2^-((t - s) / half_life)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TypeLimits = tuple[tuple[str, int], ...]  # per GPU type: (type name, GPUs), hashable


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue: a leaf (a VC) or an inner queue (a cohort, named as another queue's parent).

    ``borrow_limit``/``lend_limit`` are GPUs of any type (``None``: no limit); ``borrow_types``/
    ``lend_types``, when given, are per-type limits instead (a type not named: 0). ``weight``
    divides the queue's decayed usage when queues compete for the same idle GPUs."""

    name: str
    borrow_limit: int | None = 0
    lend_limit: int | None = None
    parent: str | None = None
    namespaces: tuple[str, ...] = ()   # live service: Kubernetes namespaces whose pods join this VC
    weight: float = 1.0
    borrow_types: TypeLimits | None = None
    lend_types: TypeLimits | None = None

    @property
    def may_borrow(self) -> bool:
        if self.borrow_types is not None:
            return any(n for _, n in self.borrow_types)
        return self.borrow_limit != 0

    @property
    def may_lend(self) -> bool:
        if self.lend_types is not None:
            return any(n for _, n in self.lend_types)
        return self.lend_limit != 0


def allows(total: int | None, types: TypeLimits | None, held: int, held_types: Mapping[str, int],
           want: Mapping[str, int]) -> bool:
    """Whether holding ``want`` (GPUs per type) more keeps a queue within its limit."""
    if types is not None:
        limits = dict(types)
        return all(held_types.get(t, 0) + n <= limits.get(t, 0) for t, n in want.items())
    return total is None or held + sum(want.values()) <= total


class QueueTree:
    """Ancestors of each queue, built from the specs alone (no cluster)."""

    def __init__(self, specs: Iterable[QueueSpec]) -> None:
        specs = list(specs)
        self.specs: dict[str, QueueSpec] = {s.name: s for s in specs}
        parents = {s.parent for s in specs if s.parent is not None}
        for p in parents - set(self.specs):  # a parent without an entry: a top-level cohort, no limits
            self.specs[p] = QueueSpec(p, None, None)
        self.inner: set[str] = parents
        self.leaves = [s.name for s in specs if s.name not in parents]
        self.ancestors: dict[str, tuple[str, ...]] = {name: self._chain(name) for name in self.specs}
        self.order = {name: i for i, name in enumerate(self.specs)}

    def _chain(self, name: str) -> tuple[str, ...]:
        out: list[str] = []
        parent = self.specs[name].parent
        while parent is not None:
            if parent == name or parent in out:
                raise ValueError(f"queue {name}: its parents form a cycle ({' -> '.join([name, *out, parent])})")
            out.append(parent)
            parent = self.specs[parent].parent
        return tuple(out)

    def top(self, name: str) -> str | None:
        """The top-level inner queue above ``name`` (None: the root cohort)."""
        chain = self.ancestors.get(name, ())
        return chain[-1] if chain else None

    def below_common(self, a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """Queues from ``a`` and from ``b`` up to their nearest common ancestor (excluded); None when
        they are in different top-level trees (no lending between them)."""
        if a == b or self.top(a) != self.top(b):
            return None
        ca, cb = (a, *self.ancestors[a]), (b, *self.ancestors[b])
        common = set(ca) & set(cb)
        return tuple(x for x in ca if x not in common), tuple(x for x in cb if x not in common)

    def may_lend_between(self, borrower: str, lender: str) -> bool:
        """Whether limits of 0 alone forbid every loan from ``lender`` to ``borrower``."""
        paths = self.below_common(borrower, lender)
        if paths is None:
            return False
        return all(self.specs[q].may_borrow for q in paths[0]) and all(self.specs[q].may_lend for q in paths[1])

    def fair_key(self, name: str, usage_per_weight: Mapping[str, float]) -> tuple:
        """Sort key for competing borrowers: usage / weight of each queue from the top down (siblings
        are compared at the level where they part), the declaration order breaking ties."""
        path = (*reversed(self.ancestors[name]), name)
        return tuple((usage_per_weight[q], self.order[q]) for q in path)


def borrowing_possible(specs: Iterable[QueueSpec]) -> bool:
    """True when some leaf may borrow from another leaf of its tree, limits of 0 aside."""
    try:
        tree = QueueTree(specs)
    except ValueError:
        return True  # let the manager report the cycle
    leaves = tree.leaves
    return any(tree.may_lend_between(a, b) for a in leaves if tree.specs[a].may_borrow for b in leaves if b != a)


class DecayedUsage:
    """GPU-seconds decayed with a half-life, exact for piecewise-constant GPU counts."""

    __slots__ = ("half_life", "rate", "t", "value")

    def __init__(self, half_life: float, t0: float = 0.0) -> None:
        self.half_life = half_life
        self.value = 0.0   # decayed GPU-seconds at time t
        self.t = t0
        self.rate = 0      # GPUs running now

    def at(self, now: float) -> float:
        """The decayed usage at ``now`` (>= the last change)."""
        dt = now - self.t
        if dt <= 0:
            return self.value
        f = 2.0 ** (-dt / self.half_life)
        return self.value * f + self.rate * (1.0 - f) * self.half_life / math.log(2.0)

    def change(self, gpus: int, now: float) -> None:
        """``gpus`` more (or fewer, when negative) GPUs run from ``now`` on."""
        self.value = self.at(now)
        self.t = max(self.t, now)
        self.rate += gpus
