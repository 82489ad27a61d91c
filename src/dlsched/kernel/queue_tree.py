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

A tree holds at most :data:`MAX_QUEUES` queues and is at most :data:`MAX_DEPTH` levels deep, so
that what a ConfigMap or a file can ask of the scheduler is bounded; its shape is checked by one
iterative walk (:func:`queue_depths`, linear in the number of queues, no recursion).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TypeLimits = tuple[tuple[str, int], ...]  # per GPU type: (type name, GPUs), hashable
MAX_QUEUES = 10_000
"""Queues one tree may hold (a 1 MiB ConfigMap holds ~25,000 small entries; real trees hold tens)."""
MAX_DEPTH = 100
"""Levels below a top-level queue (each loan and fair-share comparison walks a queue's ancestors)."""
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
"""Weights divide usage: a ratio beyond 10^12 between two queues orders nothing more, and a weight
like 1e-320 turns every usage into infinity."""
LN2 = math.log(2.0)


class QueueShapeError(ValueError):
    """A tree whose parents form a cycle or that is deeper than :data:`MAX_DEPTH`; ``name`` is the
    queue whose walk found it and ``path`` the queues from it up to the problem."""

    def __init__(self, name: str, path: list[str], cycle: bool) -> None:
        self.name, self.path, self.cycle = name, path, cycle
        if cycle:
            message = f"queue {name}: its parents form a cycle ({' -> '.join(path)})"
        else:
            message = (f"queue {name}: {len(path) - 1:,} levels below its top-level queue {path[-1]}: "
                       f"at most {MAX_DEPTH} (the limit)")
        super().__init__(message)


def queue_depths(parent_of: Mapping[str, str | None]) -> dict[str, int]:
    """Each queue's depth (0: a top-level queue; a parent without an entry is one), every queue
    visited once: the walk up from a queue stops at the first queue whose depth is known.

    Raises :class:`QueueShapeError` for a cycle or a depth over :data:`MAX_DEPTH`."""
    depth: dict[str, int] = {}
    for start in parent_of:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node not in depth:
            if node in on_path:
                raise QueueShapeError(start, [*path, node], cycle=True)
            on_path.add(node)
            path.append(node)
            node = parent_of.get(node)
        base = -1 if node is None else depth[node]
        for k, name in enumerate(reversed(path), 1):
            depth[name] = base + k
        if path and depth[start] > MAX_DEPTH:
            top = start
            chain = [start]
            while (up := parent_of.get(top)) is not None:
                chain.append(up)
                top = up
            raise QueueShapeError(start, chain, cycle=False)
    return depth


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

    def __post_init__(self) -> None:
        """The API gets the bounds the file and ConfigMap readers give (they name file and key)."""
        if not (isinstance(self.weight, (int, float)) and MIN_WEIGHT <= self.weight <= MAX_WEIGHT):
            raise ValueError(f"queue {self.name}: weight {self.weight!r}: want a number from {MIN_WEIGHT:g} to "
                             f"{MAX_WEIGHT:g}")
        for key in ("borrow_limit", "lend_limit"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, int) and value >= 0):
                raise ValueError(f"queue {self.name}: {key} {value!r}: want a whole number >= 0 or None (no limit)")

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
        if len(specs) > MAX_QUEUES:
            raise ValueError(f"{len(specs):,} queues: a queue tree holds at most {MAX_QUEUES:,} (the limit)")
        self.specs: dict[str, QueueSpec] = {s.name: s for s in specs}
        parents = {s.parent for s in specs if s.parent is not None}
        for p in parents - set(self.specs):  # a parent without an entry: a top-level cohort, no limits
            self.specs[p] = QueueSpec(p, None, None)
        self.inner: set[str] = parents
        self.leaves = [s.name for s in specs if s.name not in parents]
        depth = queue_depths({name: spec.parent for name, spec in self.specs.items()})
        # top down, each queue's ancestors are its parent's plus the parent: O(queues x depth)
        self.ancestors: dict[str, tuple[str, ...]] = {}
        for name in sorted(self.specs, key=depth.__getitem__):
            parent = self.specs[name].parent
            self.ancestors[name] = () if parent is None else (parent, *self.ancestors[parent])
        self.order = {name: i for i, name in enumerate(self.specs)}

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


def borrowing_blocker(policy, cap: int, cap_text: str = "max_jobs_per_gpu = 1") -> str:
    """Why queues that borrow cannot run under ``policy`` with ``cap`` jobs per GPU ('' when they
    can): the one rule the simulator, a forecast's twin and the live service apply (``run/build.py``
    checks the same before a run, in the words of the command line). ``cap_text`` is how the
    driver names the exclusive-GPU setting."""
    name = getattr(policy, "name", type(policy).__name__)
    if getattr(policy, "preemptive", False):
        return f"queues that borrow need a non-preemptive ordering policy; {name} preempts on its own"
    if getattr(policy, "reserves", False):
        return (f"queues that borrow need a policy without reservations; {name} holds reservations on "
                f"its VC's own GPUs, which loans and reclaims do not see")
    if cap != 1:
        return f"queues that borrow need exclusive GPUs ({cap_text})"
    return ""


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
        return self.value * math.exp(-dt * LN2 / self.half_life) + self.rate * decayed_seconds(dt, self.half_life)

    def change(self, gpus: int, now: float) -> None:
        """``gpus`` more (or fewer, when negative) GPUs run from ``now`` on."""
        self.value = self.at(now)
        self.t = max(self.t, now)
        self.rate += gpus


def decayed_seconds(dt: float, half_life: float) -> float:
    """``integral_0^dt 2^-(s / half_life) ds = (1 - 2^(-dt/h)) * h / ln 2``, without its cancellation.

    ``1 - 2^(-dt/h)`` is 0 in floating point once ``dt/h`` is below ~1e-16 (a half-life of 1e20 s
    made every usage 0), and ``h / ln 2`` overflows near the largest float; ``-expm1(-x) / x * dt``
    with ``x = dt ln 2 / h`` is exact to rounding for every ``x`` (``dt`` itself when ``x`` underflows)."""
    x = dt * LN2 / half_life
    if x == 0.0:
        return dt
    return -math.expm1(-x) / x * dt
