"""Polynomials in batch ``b`` and sequence ``s`` recovered from a few concrete evaluations.

Every count the analysis produces (node FLOPs, tensor bytes) is a polynomial of degree <= 1 in b
and <= 2 in s for the graphs we care about (attention is quadratic in s).  Evaluating the graph at
as many (b, s) points as there are monomials and solving the Vandermonde system recovers the exact
coefficients, so one analysis serves every batch size and sequence length."""

from __future__ import annotations

import numpy as np

Monomial = tuple[int, int]  # (power of b, power of s)

MONOS_B: tuple[Monomial, ...] = ((0, 0), (1, 0))
MONOS_BS: tuple[Monomial, ...] = ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2))
#: Evaluation points; b=1 is avoided because Squeeze without axes would drop the batch dim.
B_POINTS = (2, 3)
S_POINTS = (8, 16, 32)


def monomial_vector(monos: tuple[Monomial, ...], b: float, s: float) -> np.ndarray:
    """Values of the monomials at (b, s)."""
    return np.array([(b ** i) * (s ** j) for i, j in monos], dtype=np.float64)


def fit(monos: tuple[Monomial, ...], points: list[tuple[int, int]], values: np.ndarray) -> np.ndarray:
    """Coefficients (len(monos) x K) such that ``V @ C == values`` at the (b, s) points."""
    v = np.stack([monomial_vector(monos, b, s) for b, s in points])
    coef = np.linalg.solve(v, values)
    coef[np.abs(coef) < 1e-6] = 0.0
    return coef
