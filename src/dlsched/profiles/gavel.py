"""Gavel's throughput matrices (K80, P100, V100; pairs run under CUDA MPS).

One :class:`JobProfile` per single-GPU job type and GPU type, with ``speed`` = isolated
steps/s x batch size (NaN for A3C and
CycleGAN, which have no batch size: ``batch_size`` 0). Gavel measured throughput only: ``gpu_util``, ``gpu_mem_mib`` and
``mem_util`` are NaN (unknown), never guessed. ``pair_throughputs_sf1.csv`` lists each pair in
both orders; we keep one :class:`PairObservation` per unordered pair with ``slowdown = 1 / norm``.
Rows with zero throughput are infeasible (``feasible=False``, slowdowns ``inf``); a side whose
pair throughput equals its isolated one (80 V100 rows) is marked censored at s = 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.core.colocation import JobProfile, PairObservation
from dlsched.profiles.location import profiles_dir
from dlsched.profiles.table import ProfileError, ProfileSet, numeric, read_table

GAVEL_GPU_TYPES = ("k80", "p100", "v100")
NAN = float("nan")

_ISO = ["gpu", "consolidated", "job_type", "model", "batch_size", "scale_factor", "iso_steps_per_s_sim"]
_PAIR = ["gpu", "job_a", "job_b", "norm_a", "feasible", "a_equals_iso"]


def load_gavel_jobs(folder: Path) -> tuple[dict[tuple[str, str], JobProfile], int]:
    """(gpu, job type) -> profile of the single-GPU consolidated rows; also how many multi-GPU
    rows were skipped (they have no pair measurements)."""
    path = folder / "isolated_throughputs.csv"
    df = read_table(path, _ISO)
    sf, cons = numeric(df, path, "scale_factor"), numeric(df, path, "consolidated")
    bs, thr = numeric(df, path, "batch_size", allow_empty=True), numeric(df, path, "iso_steps_per_s_sim")
    jobs: dict[tuple[str, str], JobProfile] = {}
    skipped = 0
    for i, (gpu, job, model) in enumerate(zip(df["gpu"].astype(str), df["job_type"].astype(str),
                                              df["model"].astype(str))):
        if sf[i] != 1 or cons[i] != 1:
            skipped += 1
            continue
        # A3C and CycleGAN have no batch size: batch_size 0, speed (samples/s) unknown
        batch = int(bs[i]) if np.isfinite(bs[i]) else 0
        jobs[(gpu, job)] = JobProfile(model=model, gpu_util=NAN, gpu_mem_mib=NAN, batch_size=batch,
                                      speed=float(thr[i] * batch) if batch else NAN)
    return jobs, skipped


def load_gavel(directory: str | Path | None = None) -> ProfileSet:
    """Both Gavel tables from ``<profiles>/gavel``; counts of what was flagged go to ``notes``."""
    folder = profiles_dir(directory) / "gavel"
    jobs, skipped = load_gavel_jobs(folder)
    path = folder / "pair_throughputs_sf1.csv"
    df = read_table(path, _PAIR)
    norm, feas, cens = numeric(df, path, "norm_a", allow_empty=True), numeric(df, path, "feasible"), numeric(df, path, "a_equals_iso")
    rows: dict[tuple[str, str, str], tuple[float, bool, bool]] = {}
    for i, (gpu, a, b) in enumerate(zip(df["gpu"].astype(str), df["job_a"].astype(str), df["job_b"].astype(str))):
        for job in (a, b):
            if (gpu, job) not in jobs:
                raise ProfileError(f"{path}: line {i + 2}: job {job!r} on {gpu} has no isolated throughput")
        rows[(gpu, a, b)] = (norm[i], bool(feas[i]), bool(cens[i]))
    pairs: list[PairObservation] = []
    counts = {"infeasible": 0, "censored": 0, "one_order_only": 0}
    for (gpu, a, b), (norm_a, feasible, cens_a) in sorted(rows.items()):
        if a > b:
            continue
        back = rows.get((gpu, b, a))
        if back is None:
            counts["one_order_only"] += 1
            continue
        norm_b, feasible_b, cens_b = back
        ok = feasible and feasible_b and bool(norm_a > 0) and bool(norm_b > 0)
        counts["infeasible"] += not ok
        counts["censored"] += ok and (cens_a + (cens_b and a != b))
        pairs.append(PairObservation(a=jobs[(gpu, a)], b=jobs[(gpu, b)], gpu_type=gpu,
                                     slowdown_a=float(1.0 / norm_a) if ok else np.inf,
                                     slowdown_b=float(1.0 / norm_b) if ok else np.inf,
                                     censored_a=ok and cens_a, censored_b=ok and cens_b, feasible=ok))
    by_gpu: dict[str, list[JobProfile]] = {}
    for (gpu, _), prof in sorted(jobs.items()):
        by_gpu.setdefault(gpu, []).append(prof)
    notes = [(f"gavel: {sum(map(len, by_gpu.values()))} single-GPU job profiles on {', '.join(sorted(by_gpu))}, "
              f"{len(pairs)} unordered pairs ({counts['infeasible']} infeasible, "
              f"{counts['censored']} job sides censored at s = 1)"),
             f"gavel: skipped {skipped} multi-GPU or unconsolidated isolated rows (no pair measurements)"]
    if counts["one_order_only"]:
        notes.append(f"gavel: left out {counts['one_order_only']} pairs measured in one order only")
    return ProfileSet(source="gavel", jobs=by_gpu, pairs=pairs, notes=notes)
