"""Binpack by memory (Co-scheML's baseline, its Fig. 1-a): fill the fullest GPU first.

Among the GPUs whose *predicted* memory left fits the job (the pipeline's room), take those
whose holders are predicted to use the most memory -- even while idle GPUs exist, which packs
jobs onto as few GPUs as possible. Interference is not considered.
"""

from __future__ import annotations

from dlsched.sched.placers.obp import ObpPlacer


class BinpackMemPlacer(ObpPlacer):
    """OBP's placer in reverse: the GPUs with the most predicted memory in use first."""

    name = "binpack-mem"
    sign = -1.0
