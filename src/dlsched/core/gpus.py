"""The one list of GPU types dlsched knows: memory, board power and (where used) compute peaks.

Why one list: ``simulate --gpu``, cluster files, the live service and ``predict --gpu`` must
agree on which GPUs exist. Before, the simulator, the roofline's data sheet and the memory table
each had their own list, so ``predict --gpu Z9000`` quietly fell back to V100 while
``simulate --gpu Z9000`` was an error. Every figure is from the vendor's data sheet (NVIDIA:
Tesla K80/P100 SXM2/V100 SXM2/T4, A10, L4, L40, A100 SXM4, H100 SXM5, H200 SXM, B200; GeForce RTX
2080/3090, TITAN Xp): memory per GPU (a K80 board holds two GPUs of 12 GiB), board power (TDP),
dense FP32 peak and memory bandwidth. Idle power is not on the data sheets: it is an estimate
(10-20 % of board power, as the energy model needs one figure). Peaks are left ``None`` where no
model of dlsched reads them.

``find`` accepts what users type ("v100", "A100_80GB", "Tesla V100" with ``fuzzy``); ``require``
is the same with an error naming the option and the known types.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuModel:
    """Data-sheet figures of one GPU type (``memory_mib`` per GPU, watts per board)."""

    name: str
    memory_mib: int
    idle_watts: float
    max_watts: float
    fp32_flops: float | None = None        # dense FP32 peak, FLOP/s
    mem_bytes_per_s: float | None = None   # memory bandwidth, bytes/s


_GIB = 1024
KNOWN: tuple[GpuModel, ...] = (
    GpuModel("K80", 12 * _GIB, 25.0, 150.0),
    GpuModel("P100", 16 * _GIB, 30.0, 250.0, 10.6e12, 732e9),
    GpuModel("V100", 32 * _GIB, 50.0, 300.0, 15.7e12, 900e9),
    GpuModel("V100-16GB", 16 * _GIB, 50.0, 300.0, 15.7e12, 900e9),
    GpuModel("T4", 16 * _GIB, 10.0, 70.0, 8.1e12, 320e9),
    GpuModel("RTX2080", 8 * _GIB, 20.0, 215.0),      # Horus's testbed
    GpuModel("TitanXp", 12 * _GIB, 15.0, 250.0),     # Co-scheML's testbed
    GpuModel("RTX3090", 24 * _GIB, 30.0, 350.0, 35.6e12, 936e9),
    GpuModel("A10", 24 * _GIB, 20.0, 150.0),
    GpuModel("L4", 24 * _GIB, 10.0, 72.0),
    GpuModel("L40", 48 * _GIB, 35.0, 300.0),
    GpuModel("A100", 40 * _GIB, 50.0, 400.0, 19.5e12, 1555e9),
    GpuModel("A100-80GB", 80 * _GIB, 50.0, 400.0, 19.5e12, 2039e9),
    GpuModel("H100", 80 * _GIB, 70.0, 700.0, 67e12, 3350e9),
    GpuModel("H200", 141 * _GIB, 70.0, 700.0),
    GpuModel("B200", 180 * _GIB, 100.0, 1000.0),
)
BY_NAME: dict[str, GpuModel] = {g.name: g for g in KNOWN}
DEFAULT = "V100"


def _flat(name: str) -> str:
    return name.upper().replace(" ", "").replace("-", "").replace("_", "")


_FLAT = {_flat(g.name): g for g in KNOWN}


def names() -> list[str]:
    """The known type names, in the table's order."""
    return [g.name for g in KNOWN]


def find(name: str, fuzzy: bool = False) -> GpuModel | None:
    """The GPU type ``name`` names (case, spaces, '-' and '_' ignored), or None.

    ``fuzzy`` also accepts a longer product name that contains a known type ("Tesla V100-SXM2"):
    the longest type in it wins, so "A100" is never read as "A10"."""
    flat = _flat(name)
    if flat in _FLAT:
        return _FLAT[flat]
    if fuzzy:
        for key in sorted(_FLAT, key=len, reverse=True):
            if key in flat:
                return _FLAT[key]
    return None


def require(name: str, option: str = "--gpu", fuzzy: bool = False) -> GpuModel:
    """``find`` or a ValueError naming the option, the value and the known types."""
    found = find(name, fuzzy)
    if found is None:
        raise ValueError(f"{option} {name}: unknown GPU type; known: {', '.join(names())}")
    return found
