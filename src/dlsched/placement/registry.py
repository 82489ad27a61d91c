"""Name -> placer factory. One line per placer."""

from __future__ import annotations

from typing import Callable

from dlsched.placement.best_fit import BestFitPlacer
from dlsched.placement.consolidate import ConsolidatePlacer
from dlsched.placement.first_fit import FirstFitPlacer
from dlsched.placement.spread import SpreadPlacer
from dlsched.placement.topo_aware import TopoAwarePlacement

PLACERS: dict[str, Callable[[], object]] = {
    "consolidate": ConsolidatePlacer,
    "first-fit": FirstFitPlacer,
    "best-fit": BestFitPlacer,
    "spread": SpreadPlacer,
    "topo-aware": TopoAwarePlacement,
    "topo-aware-p": lambda: TopoAwarePlacement(postpone=True),
}


def make_placer(name: str):
    try:
        return PLACERS[name]()
    except KeyError:
        raise ValueError(f"unknown placement {name!r}; choose from {', '.join(PLACERS)}") from None
