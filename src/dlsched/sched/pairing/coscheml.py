"""Co-scheML (its Algorithm 1): pair with the least *predicted* interference, OOM checked.

A pair's value is the slowdown both jobs are predicted to suffer, ``s(a | b) + s(b | a)``, from
an :class:`~dlsched.predictors.interference.base.InterferenceModel` on the jobs' predicted
profiles (Co-scheML uses a random forest on both jobs' profiled metrics; give it a fitted model
with ``model=``). Without one, the Horus utilisation curve stands in
(:class:`~dlsched.sched.sharing.curve.CurveSlowdown`).
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.pairing.base import PairingPolicy
from dlsched.sched.sharing.curve import CurveSlowdown
from dlsched.sched.sharing.profile import predicted_profile


class CoschemlPolicy(PairingPolicy):
    """Co-scheML: idle GPUs first, then pairs with the least predicted interference (OOM checked)."""

    name = "coscheml"

    def __init__(self, placer, backfill: bool = False, window: int = 64, model=None) -> None:
        super().__init__(placer, backfill, window)
        self.model = model if model is not None else CurveSlowdown()

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        a, b = predicted_profile(running), predicted_profile(waiting)
        return self.model.slowdown(a, [b], gpu_type) + self.model.slowdown(b, [a], gpu_type)

    def pair_values(self, pairs: list[tuple[Job, Job, str, float]]) -> list[float]:
        """All pairs of a pass in two batched predictions (a forest predicts ~1,000 rows in the
        time of a few single calls)."""
        if len(pairs) < 4:
            return super().pair_values(pairs)
        from dlsched.predictors.interference.pairwise import pair_predictions

        profiles: dict[Job, object] = {}
        for r, w, _, _ in pairs:
            for j in (r, w):
                if j not in profiles:
                    profiles[j] = predicted_profile(j)
        run = [profiles[r] for r, _, _, _ in pairs]
        wait = [profiles[w] for _, w, _, _ in pairs]
        gpus = [g for _, _, g, _ in pairs]
        both = pair_predictions(self.model, run, wait, gpus) + pair_predictions(self.model, wait, run, gpus)
        return both.tolist()
