"""Every queue of a run's queue tree in tree order, inner queues with figures summed from their VCs.

summary.json keeps the leaves (VCs) in ``per_queue`` and the inner queues (cohorts) in
``per_inner_queue`` with only their own figures (guarantee, limits, weight, decayed usage, used
GPU time). The HTML report and the terminal table both show one row per queue of the tree, so
the ordering and the aggregation live here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real

# Leaf figures that add up over a subtree (GPU-hours, counts).
SUMMED = ("guaranteed_gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours", "borrowed_starts",
          "reclaimed", "reclaims", "jobs")
INNER_NOTE = ("Inner queues (cohorts without nodes of their own) show their own guarantee, limits, "
              "weight and decayed usage; their guaranteed, borrowed and lent GPU time, reclaims, jobs "
              "and queue delay are summed (delay: job-weighted mean) over the VCs under them, so their "
              "borrowed and lent time includes loans between VCs of the same subtree.")


@dataclass(frozen=True)
class QueueRow:
    """One queue: its name, depth in the tree (0 = top level), whether it is inner, its figures."""

    name: str
    depth: int
    inner: bool
    parent: str | None
    figures: dict


def queue_rows(summary: Mapping) -> list[QueueRow]:
    """The tree's queues depth first (a parent before its children, children in file order).

    Empty when the run had no queues that borrow. A parent named by no entry, or a cycle in a
    hand-edited summary.json, does not drop a queue: such queues are listed at the top level.
    """
    leaves = _mapping(summary.get("per_queue"))
    inner = _mapping(summary.get("per_inner_queue"))
    if not leaves:
        return []
    entries: dict[str, tuple[bool, Mapping]] = {name: (True, row) for name, row in inner.items()}
    entries.update((name, (False, row)) for name, row in leaves.items())
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for name, (_, row) in entries.items():
        parent = row.get("parent")
        if isinstance(parent, str) and parent in entries and parent != name:
            children.setdefault(parent, []).append(name)
        else:
            roots.append(name)
    out: list[QueueRow] = []
    seen: set[str] = set()

    def visit(name: str, depth: int) -> None:
        stack = [(name, depth)]
        while stack:
            current, level = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            is_inner, row = entries[current]
            figures = aggregate(row, leaves) if is_inner else dict(row)
            parent = row.get("parent") if isinstance(row.get("parent"), str) else None
            out.append(QueueRow(current, level, is_inner, parent, figures))
            stack.extend((child, level + 1) for child in reversed(children.get(current, [])))

    for root in roots:
        visit(root, 0)
    for name in entries:  # only reachable through a cycle
        if name not in seen:
            visit(name, 0)
    return out


def aggregate(inner: Mapping, leaves: Mapping[str, Mapping]) -> dict:
    """An inner queue's own figures plus the sums of its VCs' figures (see INNER_NOTE)."""
    under = [leaves[q] for q in inner.get("queues", []) if isinstance(q, str) and isinstance(leaves.get(q), Mapping)]
    figures = dict(inner)
    for key in SUMMED:
        values = [row.get(key) for row in under if _number(row.get(key))]
        figures[key] = sum(values) if values else None
    if "used_gpu_hours" not in figures or not _number(figures["used_gpu_hours"]):
        used = [row["used_gpu_hours"] for row in under if _number(row.get("used_gpu_hours"))]
        figures["used_gpu_hours"] = sum(used) if used else None
    jobs = figures.get("jobs")
    weighted = [(row["jobs"], row["avg_queue_delay"]) for row in under
                if _number(row.get("jobs")) and _number(row.get("avg_queue_delay"))]
    figures["avg_queue_delay"] = (sum(n * d for n, d in weighted) / jobs) if jobs else (0.0 if under else None)
    guaranteed, used = figures.get("guaranteed_gpu_hours"), figures.get("used_gpu_hours")
    figures["share_of_guarantee"] = used / guaranteed if _number(guaranteed) and guaranteed and _number(used) else None
    return figures


def _mapping(value: object) -> dict[str, Mapping]:
    """The rows of a per-queue dict that are themselves dicts (anything else is not a queue)."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, Mapping)}


def _number(value: object) -> bool:
    """A real number that is not a boolean (summary.json writes null for a missing figure)."""
    return isinstance(value, Real) and not isinstance(value, bool)
