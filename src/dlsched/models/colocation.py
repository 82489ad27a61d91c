"""Co-location speed model: how fast a job runs beside the jobs that share its GPUs.

``rate = 1 / s`` where ``s`` is the slowdown on the job's most-slowed GPU. On one GPU, job ``a``
beside ``b`` is slowed by the **measured** pair slowdown ``s(a|b)`` when the table holds that
pair on the cluster's GPU type (else on the table's default GPU type, else on any other: a
measurement on another card beats a fit), else by the **fitted curve** (cumulative utilisation, fitted on
the table's measured pairs: :class:`~dlsched.predictors.interference.horus_curve.HorusCurve`).
With three or more jobs on one GPU the excess slowdowns add up, the rule every interference model
shares (:func:`~dlsched.predictors.interference.combine.combine_pairwise`):
``s(a | b, c) = 1 + (s(a|b) - 1) + (s(a|c) - 1)`` (two saturating jobs at ``s = 2`` each give 3
for three of them, what time slicing gives).

The model reads job **truth** (model type, batch size, measured utilisation and memory): it is
engine-side, as every speed model. A job is matched to a table type by model name and batch size
(the measured utilisation picks among AMP variants); a job of no known type goes through the
curve with its own measured utilisation (100 % when it has none).
"""

from __future__ import annotations

import math

from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.models.colocation_table import ColocationTable, builtin_table
from dlsched.predictors.interference.base import InterferenceModel, JobProfile
from dlsched.predictors.interference.combine import combine_pairwise
from dlsched.predictors.interference.horus_curve import HorusCurve

PRUNE_EVERY = 4096  # drop cached records of stopped jobs after this many new ones


class ColocationSpeed:
    """Ground-truth speed of co-located jobs from a measured pair table plus a fitted curve."""

    name = "colocation"
    scope = "gpu"

    def __init__(self, table: ColocationTable | None = None, fallback: InterferenceModel | None = None) -> None:
        self.table = table or builtin_table()
        self.fallback = fallback or HorusCurve().fit(self.table.observations())
        self._jobs: dict[Job, tuple[int | None, JobProfile]] = {}
        self._curve: dict[tuple[float, float, str], float] = {}  # fallback answers by (u_a, u_b, gpu)
        self._gpu: dict[str, str] = {}
        self._added = 0

    # -- the engine's question -------------------------------------------------------------
    def rate(self, job: Job, state: ClusterState) -> float:
        """Work seconds per wall second of ``job`` where it runs now (1 = alone)."""
        worst = 1.0
        holders = state.node_holders
        for node, mask in job.placement:
            here = holders[node]
            if len(here) == 1:
                continue
            gpu = self._gpu_key(state.node_specs[node].gpu_type.name)
            while mask:
                bit = mask & -mask
                mask ^= bit
                others = [o for o, m in here.items() if m & bit and o is not job]
                if others:
                    s = self.slowdown(job, others, gpu)
                    worst = max(worst, s)
        return 1.0 / worst

    def slowdown(self, job: Job, others: list[Job], gpu: str) -> float:
        """Slowdown of ``job`` on one GPU of (table) type ``gpu`` beside ``others``."""
        if len(others) == 1:
            return max(1.0, self.pair(job, others[0], gpu))
        return combine_pairwise(self.pair(job, other, gpu) for other in others)

    def pair(self, job: Job, other: Job, gpu: str) -> float:
        """``s(job | other)``: measured where the table has the pair, else the fitted curve."""
        i, prof = self._record(job, gpu)
        j, oprof = self._record(other, gpu)
        if i is not None and j is not None:
            measured = self.table.measured(i, j, gpu)
            if measured is not None:
                return measured
        key = (prof.gpu_util, oprof.gpu_util, gpu)
        s = self._curve.get(key)
        if s is None:  # the curve depends on the utilisations only: one answer per pair of them
            s = self._curve[key] = self.fallback.slowdown(prof, [oprof], gpu)
        return s

    # -- caches --------------------------------------------------------------------------------
    def _gpu_key(self, name: str) -> str:
        key = self._gpu.get(name)
        if key is None:
            key = self._gpu[name] = self.table.gpu_key(name)
        return key

    def _record(self, job: Job, gpu: str) -> tuple[int | None, JobProfile]:
        rec = self._jobs.get(job)
        if rec is None:
            rec = self._jobs[job] = self.resolve(job, gpu)
            self._added += 1
            if self._added >= PRUNE_EVERY:
                self._added = 0
                self._jobs = {j: r for j, r in self._jobs.items() if j.placement is not None}
                self._jobs[job] = rec
        return rec

    def resolve(self, job: Job, gpu: str) -> tuple[int | None, JobProfile]:
        """The job's table type (or None) and the profile the curve uses (its own truth)."""
        util, mem = job._measured.gpu_util, job._measured.gpu_mem_mib
        i = self.table.find(job.model_name, job.batch_size, util, gpu) if job.model_name else None
        if math.isnan(util):
            util = self.table.util(i, gpu) if i is not None else 100.0
        if math.isnan(util):
            util = 100.0
        return i, JobProfile(job.model_name, float(util), float(mem), int(job.batch_size or 0))
