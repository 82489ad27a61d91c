"""The co-location table: job types measured alone and in pairs, per GPU type — the simulator's
ground truth for co-located jobs and the menu the sharing workloads draw jobs from.

A job type is an architecture at a batch size (Lucid adds AMP on/off): its utilisation and peak
memory running alone, per GPU type. Pairs hold each job's measured slowdown ``s >= 1`` while the
two share one GPU. :func:`builtin_table` loads the table shipped in the package (derived
from Gavel, MIT; ``dlsched/data/profiles/NOTICE.md``); :meth:`ColocationTable.from_profile_sets`
builds one from what the Lucid and Gavel loaders (:mod:`dlsched.profiles`) return.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from dlsched.predictors.interference.base import JobProfile, PairObservation

if TYPE_CHECKING:
    from dlsched.profiles.table import ProfileSet as LoadedProfiles

BUILTIN_PATH = Path(__file__).resolve().parents[1] / "data" / "profiles" / "gavel_derived.json"


@dataclass(frozen=True)
class JobType:
    """One profiled configuration. ``gpu_util`` maps a GPU type to percent (0-100)."""

    type_id: str
    model: str
    batch_size: int
    gpu_util: dict[str, float]
    gpu_mem_mib: float
    amp: bool = False


@dataclass
class ColocationTable:
    """Job types plus measured pair slowdowns per GPU type.

    ``pairs[gpu][(i, j)]`` is the slowdown of type ``i`` while type ``j`` shares its GPU.
    ``default_gpu`` answers for a cluster GPU type the set never measured.
    """

    name: str
    types: list[JobType]
    pairs: dict[str, dict[tuple[int, int], float]]
    default_gpu: str = ""
    _by_model: dict[tuple[str, int], list[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.types:
            raise ValueError(f"profile set {self.name!r} has no job types")
        for i, t in enumerate(self.types):
            self._by_model.setdefault((t.model, int(t.batch_size)), []).append(i)
        if not self.default_gpu:
            self.default_gpu = max(self.pairs, key=lambda g: len(self.pairs[g])) if self.pairs else ""

    # -- lookups ---------------------------------------------------------------------------
    @property
    def gpu_types(self) -> list[str]:
        return list(self.pairs) or sorted({g for t in self.types for g in t.gpu_util})

    def gpu_key(self, gpu: str) -> str:
        """The set's GPU type for a cluster's GPU type: the same name (any case), else the one
        its name starts with (``V100-16GB`` -> ``V100``), else ``default_gpu``."""
        names = self.gpu_types
        low = gpu.lower()
        for g in names:
            if g.lower() == low:
                return g
        for g in sorted(names, key=len, reverse=True):
            if g and low.startswith(g.lower()):
                return g
        return self.default_gpu

    def util(self, i: int, gpu: str) -> float:
        """Utilisation of type ``i`` alone on ``gpu`` (percent); NaN if never measured."""
        utils = self.types[i].gpu_util
        key = self.gpu_key(gpu)
        if key in utils:
            return utils[key]
        return max(utils.values()) if utils else math.nan

    def profile(self, i: int, gpu: str) -> JobProfile:
        t = self.types[i]
        return JobProfile(t.model, self.util(i, gpu), t.gpu_mem_mib, t.batch_size, t.amp)

    def pair_slowdown(self, i: int, j: int, gpu: str) -> float | None:
        """Measured slowdown of type ``i`` beside type ``j`` on ``gpu``; None if not measured."""
        table = self.pairs.get(self.gpu_key(gpu))
        return None if table is None else table.get((i, j))

    def measured(self, i: int, j: int, gpu: str) -> float | None:
        """The pair as measured on ``gpu``, else on the default GPU type, else on any other (a
        measurement on another card beats the fitted curve); None if never measured."""
        key = self.gpu_key(gpu)
        for g in (key, self.default_gpu, *self.pairs):
            s = self.pairs.get(g, {}).get((i, j))
            if s is not None:
                return s
        return None

    def find(self, model: str, batch_size: int, gpu_util: float = math.nan, gpu: str = "") -> int | None:
        """The type of a job: same model and batch size; among several (AMP variants), the one
        whose utilisation on ``gpu`` is closest to ``gpu_util``. None when no type matches."""
        found = self._by_model.get((model, int(batch_size or 0)))
        if not found:
            return None
        if len(found) == 1 or math.isnan(gpu_util):
            return found[0]
        return min(found, key=lambda i: abs(self.util(i, gpu) - gpu_util))

    def observations(self, gpu: str | None = None) -> list[PairObservation]:
        """Measured pairs as the interference contract's records (to fit a model on them)."""
        out = []
        for g, table in self.pairs.items():
            if gpu is not None and g != gpu:
                continue
            for (i, j), s in table.items():
                if i <= j and (j, i) in table:
                    out.append(PairObservation(self.profile(i, g), self.profile(j, g), g, s, table[(j, i)]))
        return out

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_json(cls, path: str | Path) -> ColocationTable:
        """Read the built-in format (``gavel_derived.json``); errors name the file."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
            types = [JobType(t["id"], t["model"], int(t["batch_size"]),
                             {g: float(u) for g, u in t["gpu_util"].items()}, float(t["gpu_mem_mib"]),
                             bool(t.get("amp", False))) for t in data["job_types"]]
            pairs: dict[str, dict[tuple[int, int], float]] = {}
            for gpu, rows in data["pairs"].items():
                table = pairs.setdefault(gpu, {})
                for i, j, s_i, s_j in rows:
                    table[(int(i), int(j))] = float(s_i)
                    table[(int(j), int(i))] = float(s_j)
        except FileNotFoundError:
            raise ValueError(f"{p}: profile set not found") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{p}: not a profile set ({type(exc).__name__}: {exc})") from None
        return cls(str(data.get("name", p.stem)), types, pairs, str(data.get("default_gpu", "")))

    @classmethod
    def from_profile_sets(cls, sets: Sequence[LoadedProfiles], name: str = "") -> ColocationTable:
        """Merge loaded profile sets (:func:`dlsched.profiles.load_lucid`, ``load_gavel``).

        A type is (zoo model, batch size, AMP): Lucid's ``ResNet18`` and Gavel's ``ResNet-18`` at
        batch 32 are one type. Utilisation is kept per GPU type where measured (Lucid's unnamed
        GPU is ``""``). Infeasible pairs are left out (the memory check decides those);
        repeated measurements of one pair are averaged; slowdowns below 1 (noise) count as 1.
        """
        index: dict[tuple, int] = {}
        keys: list[tuple] = []
        utils: list[dict[str, float]] = []
        mems: list[float] = []

        def type_of(p: JobProfile, gpu: str) -> int:
            key = (_zoo_name(p.model), int(p.batch_size), bool(p.amp))
            i = index.get(key)
            if i is None:
                i = index[key] = len(keys)
                keys.append(key)
                utils.append({})
                mems.append(math.nan)
            if p.gpu_util == p.gpu_util:
                utils[i].setdefault(gpu, float(p.gpu_util))
            if mems[i] != mems[i] and p.gpu_mem_mib == p.gpu_mem_mib:
                mems[i] = float(p.gpu_mem_mib)
            return i

        sums: dict[str, dict[tuple[int, int], list[float]]] = {}
        for loaded in sets:
            for gpu, profiles in loaded.jobs.items():
                for p in profiles:
                    type_of(p, gpu)
            for obs in loaded.pairs:
                if not getattr(obs, "feasible", True):
                    continue
                i, j = type_of(obs.a, obs.gpu_type), type_of(obs.b, obs.gpu_type)
                table = sums.setdefault(obs.gpu_type, {})
                for key, s in (((i, j), obs.slowdown_a), ((j, i), obs.slowdown_b)):
                    acc = table.setdefault(key, [0.0, 0])
                    acc[0] += max(1.0, float(s))
                    acc[1] += 1
        pairs = {g: {k: v[0] / v[1] for k, v in t.items()} for g, t in sums.items()}
        types = [JobType(f"{m}-bs{b}" + ("-amp" if amp else ""), m, b, utils[k], mems[k], amp)
                 for k, (m, b, amp) in enumerate(keys)]
        return cls(name or "+".join(x.source for x in sets), types, pairs)


def _zoo_name(model: str) -> str:
    """The graph-zoo name of a profile set's model name (jobs carry zoo names), else the name."""
    from dlsched.graph.zoo.registry import zoo_name_for

    try:
        return zoo_name_for(model)
    except KeyError:
        return model


@lru_cache(maxsize=1)
def builtin_table() -> ColocationTable:
    """The profile set shipped with the package (derived from Gavel; see NOTICE.md)."""
    return ColocationTable.from_json(BUILTIN_PATH)


def load_table(source: str | Path | None = None) -> ColocationTable:
    """``None`` or ``"builtin"``: the shipped table; a ``.json`` file: that table; a folder: the
    Lucid and Gavel profile sets in it (``shared/profiles``), merged. Errors name the path."""
    if source is None or str(source) == "builtin":
        return builtin_table()
    path = Path(source)
    if path.suffix == ".json":
        return ColocationTable.from_json(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a profiles folder or a .json table (or 'builtin')")
    from dlsched.profiles import load_gavel, load_lucid

    return ColocationTable.from_profile_sets([load_lucid(path), load_gavel(path)])

