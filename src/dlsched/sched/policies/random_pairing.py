"""Random pairing (lower bound): among the pairs that pass the OOM check, a seeded random order."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dlsched.core.job import Job
from dlsched.kernel.view import ClusterView
from dlsched.sched.pairing_base import PairingParams, PairingPolicy


@dataclass(frozen=True, slots=True)
class RandomPairingParams(PairingParams):
    """The pairing window and the seed of the random order (``pairing_seed``: ``seed`` is the
    workload's)."""

    pairing_seed: int = field(default=0, metadata={"help": "random-pairing: seed of the random pair order "
                                                           "(--seed is the workload's)."})


class RandomPairingPolicy(PairingPolicy):
    """Random pairing: a seeded random order of the memory-feasible pairs."""

    name = "random-pairing"
    Params = RandomPairingParams

    @staticmethod
    def from_params(params: RandomPairingParams, context) -> dict:
        """The constructor calls the seed ``seed``."""
        return {"window": params.window, "seed": params.pairing_seed}

    def __init__(self, placer, backfill: bool = False, window: int = 64, seed: int = 0) -> None:
        super().__init__(placer, backfill, window)
        self.seed = seed
        self.rng = random.Random(seed)

    def prepare(self, view: ClusterView) -> None:
        self.rng = random.Random(self.seed)  # the same draws in every run

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        return self.rng.random()
