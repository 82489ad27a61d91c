"""Co-scheML (its Algorithm 1): pair with the least *predicted* interference, OOM checked.

A pair's value is the slowdown both jobs are predicted to suffer, ``s(a | b) + s(b | a)``, from
an :class:`~dlsched.predictors.interference.base.InterferenceModel` on the jobs' predicted
profiles. By default that is Co-scheML's own model: a random forest on both jobs' profiled
metrics (:class:`~dlsched.predictors.interference.pair_forest.PairForest`), fitted on the
measured pairs of the available profiles -- ``profiles=`` when given (``"builtin"``, a profiles
folder or a ``.json`` table), else the Lucid and Gavel sets of ``../shared/profiles`` when present
(:func:`~dlsched.profiles.location.candidate_dirs`), else the built-in Gavel-derived table.
``model=`` picks another: a name of :data:`MODELS` (``horus-paper-curve``: the Horus paper's
utilisation curve, :class:`~dlsched.sched.sharing.curve.CurveSlowdown`, no data; the others are
fitted on the same profiles) or any fitted model object. The model is built at the first pairing
decision, so building the policy (e.g. to check its name) costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from dlsched.core.job import Job
from dlsched.sched.pairing_base import PairingParams, PairingPolicy
from dlsched.sched.sharing.curve import CurveSlowdown
from dlsched.sched.sharing.profile import predicted_profile

DEFAULT_MODEL = "pair-forest"
#: model names ``model=`` (``--interference-model``) takes: the interference registry's models,
#: fitted on the profiles, plus the paper curve (no fitting)
MODELS = ("pair-forest", "horus-paper-curve", "horus-curve", "lookup", "constant-1", "constant-2")


def profile_source(profiles: str | Path | None = None) -> str:
    """The profiles a model is fitted on: ``profiles`` when given; else the shared profiles folder
    (Lucid and Gavel) when one is found; else ``"builtin"``."""
    if profiles is not None:
        return str(profiles)
    from dlsched.profiles.location import candidate_dirs

    for path in candidate_dirs():
        if (path / "lucid").is_dir() and (path / "gavel").is_dir():
            return str(path.resolve())
    return "builtin"


@lru_cache(maxsize=8)
def _fitted(name: str, source: str):
    from dlsched.models.colocation_table import load_table
    from dlsched.predictors.interference.registry import make_model

    return make_model(name).fit(load_table(source).observations())


def interference_model(model=None, profiles: str | Path | None = None):
    """Co-scheML's interference model: ``model`` itself when it is a model object; by name (None:
    :data:`DEFAULT_MODEL`) ``horus-paper-curve`` or a registry model fitted on
    :func:`profile_source` ``(profiles)`` (one fit per name and source in a process)."""
    name = DEFAULT_MODEL if model is None else model
    if not isinstance(name, str):
        return name
    if name not in MODELS:
        raise ValueError(f"unknown interference model {name!r} for coscheml; choose from {', '.join(MODELS)}")
    if name == "horus-paper-curve":
        return CurveSlowdown()
    return _fitted(name, profile_source(profiles))


@dataclass(frozen=True, slots=True)
class CoschemlParams(PairingParams):
    """Co-scheML's options: the pairing window and the interference model by name (None:
    :data:`DEFAULT_MODEL`)."""

    interference_model: str | None = field(default=None, metadata={"help": (
        "coscheml: how it predicts a pair's slowdown. Default pair-forest: Co-scheML's random forest on both "
        "jobs' profiles, fitted on --profiles when given, else on ../shared/profiles (Lucid + Gavel) when "
        "present, else on the built-in Gavel-derived table. horus-paper-curve: the Horus paper's utilisation "
        "curve (no data); horus-curve|lookup|constant-1|constant-2: fitted on the same profiles."),
        "metavar": "NAME"})

    def __post_init__(self) -> None:
        PairingParams.__post_init__(self)
        if self.interference_model is not None and self.interference_model not in MODELS:
            raise ValueError(f"unknown --interference-model {self.interference_model!r}; "
                             f"choose from {', '.join(MODELS)}")


class CoschemlPolicy(PairingPolicy):
    """Co-scheML: idle GPUs first, then pairs with the least predicted interference (OOM checked)."""

    name = "coscheml"
    Params = CoschemlParams
    reads_profiles = True  # its model is fitted on the run's profile table (--profiles)

    @staticmethod
    def from_params(params: CoschemlParams, context) -> dict:
        """The model by name, fitted on the run's profiles when it names them."""
        return {"window": params.window, "model": params.interference_model, "profiles": context.profiles}

    def __init__(self, placer, backfill: bool = False, window: int = 64, model=None,
                 profiles: str | Path | None = None) -> None:
        super().__init__(placer, backfill, window)
        if isinstance(model, str) and model not in MODELS:
            raise ValueError(f"unknown interference model {model!r} for coscheml; choose from {', '.join(MODELS)}")
        self.model_spec = DEFAULT_MODEL if model is None else model
        self.profiles = profiles
        self._model = None if isinstance(self.model_spec, str) else self.model_spec

    @property
    def model(self):
        """The interference model (built or fitted on first use)."""
        if self._model is None:
            self._model = interference_model(self.model_spec, self.profiles)
        return self._model

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        a, b = predicted_profile(running), predicted_profile(waiting)
        model = self.model
        return model.slowdown(a, [b], gpu_type) + model.slowdown(b, [a], gpu_type)

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
        model = self.model
        both = pair_predictions(model, run, wait, gpus) + pair_predictions(model, wait, run, gpus)
        return both.tolist()
