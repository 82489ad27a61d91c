"""Random pairing (lower bound): among the pairs that pass the OOM check, a seeded random order."""

from __future__ import annotations

import random

from dlsched.core.job import Job
from dlsched.kernel.view import ClusterView
from dlsched.sched.pairing.base import PairingPolicy


class RandomPairingPolicy(PairingPolicy):
    """Random pairing: a seeded random order of the memory-feasible pairs."""

    name = "random-pairing"

    def __init__(self, placer, backfill: bool = False, window: int = 64, seed: int = 0) -> None:
        super().__init__(placer, backfill, window)
        self.seed = seed
        self.rng = random.Random(seed)

    def prepare(self, view: ClusterView) -> None:
        self.rng = random.Random(self.seed)  # the same draws in every run

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        return self.rng.random()
