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


_BITS: dict[int, tuple[int, ...]] = {}


def bit_tuple(mask: int) -> tuple[int, ...]:
    """``set_bits(mask)`` as a tuple, remembered for masks of up to 16 GPUs (the hot paths of the
    kernel and the speed models ask for the same few masks millions of times)."""
    bits = _BITS.get(mask)
    if bits is None:
        bits = tuple(set_bits(mask))
        if 0 <= mask < 1 << 16:
            _BITS[mask] = bits
    return bits
