"""GPU memory sizes from the data sheets, to say whether a predicted peak fits one GPU.

The size in a name wins ("A100-80GB", "V100-16GB"); otherwise the most common variant is taken.
What a process can use is a little less (ECC and the driver keep ~1-3 %), hence ``usable_mib``."""

from __future__ import annotations

import re

#: GiB of the common variant of each card (NVIDIA data sheets)
MEMORY_GIB: dict[str, float] = {
    "P100": 16, "V100": 32, "T4": 16, "RTX3090": 24, "A100": 40, "A10": 24, "L4": 24, "L40": 48,
    "H100": 80, "H200": 141, "B200": 180,
}
#: share of the nominal memory a training process can allocate (driver/ECC reserve)
USABLE_FRACTION = 0.97


def memory_gib(gpu: str) -> float | None:
    """Nominal memory of ``gpu`` in GiB, or None for a card we do not know."""
    flat = gpu.upper().replace(" ", "").replace("-", "").replace("_", "")
    size = re.search(r"(?<![\dA-Z])(\d{1,4})\s*GI?B\b", gpu.upper())  # "A100-80GB", "V100 16 GiB"
    for key in sorted(MEMORY_GIB, key=len, reverse=True):
        if key in flat:
            return float(size.group(1)) if size else MEMORY_GIB[key]
    return None


def usable_mib(gpu: str) -> float | None:
    """MiB a job can use on one ``gpu`` (None when unknown)."""
    gib = memory_gib(gpu)
    return None if gib is None else gib * 1024 * USABLE_FRACTION


def largest() -> tuple[str, float]:
    """The largest card of the table: (name, GiB)."""
    name = max(MEMORY_GIB, key=MEMORY_GIB.__getitem__)
    return name, MEMORY_GIB[name]


def fit_note(need_mib: float, gpu: str) -> str | None:
    """``"does not fit one A100-40GB: needs ~52 GiB"`` when ``need_mib`` exceeds the card, else None."""
    cap = usable_mib(gpu)
    if cap is None or need_mib <= cap:
        return None
    return f"does not fit one {gpu} ({memory_gib(gpu):.0f} GiB): needs ~{need_mib / 1024:,.0f} GiB"


__all__ = ["MEMORY_GIB", "fit_note", "largest", "memory_gib", "usable_mib"]
