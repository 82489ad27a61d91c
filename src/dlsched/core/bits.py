"""GPU sets are bitmasks (bit g = GPU g of a node); these are the shared bit helpers."""

from __future__ import annotations


def set_bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
