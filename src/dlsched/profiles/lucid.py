"""Lucid's profiles: 66 single-job runs and 1,388 two-job co-locations (plain time-slicing).

``single_data.csv`` gives one :class:`JobProfile` per (model, dataset, batch size, AMP);
``colocate_info.csv`` one :class:`PairObservation` per row, ``slowdown = 1 / speed`` with the
normalised co-located speed. Speeds above 1 (measurement noise, up to 1.5) are kept as they
are, so slowdowns below 1 occur. The GPU model is not recorded: ``gpu_type`` is ``""``.
"""

from __future__ import annotations

from pathlib import Path

from dlsched.core.colocation import JobProfile, PairObservation
from dlsched.profiles.location import profiles_dir
from dlsched.profiles.table import ProfileError, ProfileSet, numeric, read_table

#: Lucid does not say which GPU it profiled on.
LUCID_GPU_TYPE = ""

_SINGLE = ["model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util", "gmem"]
_SIDE = ["model", "dataset", "batchsize", "amp", "speed"]


def load_lucid_jobs(folder: Path) -> dict[tuple[str, int, bool], JobProfile]:
    """``single_data.csv`` as profiles keyed by (model, batch size, AMP)."""
    path = folder / "single_data.csv"
    df = read_table(path, _SINGLE)
    cols = {c: numeric(df, path, c) for c in _SINGLE[2:]}
    jobs: dict[tuple[str, int, bool], JobProfile] = {}
    for i, (model, dataset) in enumerate(zip(df["model"].astype(str), df["dataset"].astype(str))):
        prof = JobProfile(model=model, dataset=dataset, batch_size=int(cols["batchsize"][i]),
                          amp=bool(cols["amp"][i]), gpu_util=float(cols["gpu_util"][i]),
                          gpu_mem_mib=float(cols["gmem"][i]), mem_util=float(cols["gmem_util"][i]),
                          speed=float(cols["speed"][i]))
        if prof.key in jobs:
            raise ProfileError(f"{path}: line {i + 2}: duplicate configuration {prof.key}")
        jobs[prof.key] = prof
    return jobs


def load_lucid(directory: str | Path | None = None) -> ProfileSet:
    """Both Lucid tables from ``<profiles>/lucid``. Pairs whose jobs lack a single-job profile
    are left out and counted in ``notes``; a non-positive speed is an error."""
    folder = profiles_dir(directory) / "lucid"
    jobs = load_lucid_jobs(folder)
    path = folder / "colocate_info.csv"
    cols = [f"{c}{k}" for k in (1, 2) for c in _SIDE]
    df = read_table(path, cols)
    num = {c: numeric(df, path, c) for c in cols if not c.startswith(("model", "dataset"))}
    pairs: list[PairObservation] = []
    missing = 0
    for i in range(len(df)):
        sides = []
        for k in (1, 2):
            key = (str(df[f"model{k}"].iloc[i]), int(num[f"batchsize{k}"][i]), bool(num[f"amp{k}"][i]))
            speed = num[f"speed{k}"][i]
            if speed <= 0:
                raise ProfileError(f"{path}: line {i + 2}: column 'speed{k}' must be positive ({speed})")
            sides.append((jobs.get(key), float(1.0 / speed)))
        if sides[0][0] is None or sides[1][0] is None:
            missing += 1
            continue
        pairs.append(PairObservation(a=sides[0][0], b=sides[1][0], gpu_type=LUCID_GPU_TYPE,
                                     slowdown_a=sides[0][1], slowdown_b=sides[1][1]))
    notes = [f"lucid: {len(jobs)} single-job profiles, {len(pairs)} pairs"]
    if missing:
        notes.append(f"lucid: left out {missing} pairs whose configuration is not in single_data.csv")
    return ProfileSet(source="lucid", jobs={LUCID_GPU_TYPE: list(jobs.values())}, pairs=pairs, notes=notes)
