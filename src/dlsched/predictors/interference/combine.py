"""The one rule every model uses for three or more jobs on a GPU: add the pairwise excesses.

``s(a | o1..ok) = max(1, 1 + sum_i (s(a | oi) - 1))``. Why additive: under plain time-slicing a
job sharing with one equal job runs 2x slower and with two such jobs 3x slower, which the sum
reproduces (a product would say 4x). For k = 1 it is the pair slowdown itself, floored at 1
(a job never runs faster than alone; measured speed-ups are noise). Infeasible pairs (``inf``)
stay infeasible.
"""

from __future__ import annotations

from collections.abc import Iterable


def combine_pairwise(pair_slowdowns: Iterable[float]) -> float:
    """Slowdown of a job from its pairwise slowdowns with each co-runner (1.0 with none)."""
    return max(1.0, 1.0 + sum(float(s) - 1.0 for s in pair_slowdowns))
