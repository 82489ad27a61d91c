"""Answer "how slow is job X next to Y (and Z)?" and "which partner suits X best?" from a profile
set: what ``dlsched interference predict`` prints. Jobs are named ``MODEL[:BATCH[:AMP]]``."""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.predictors.interference.base import ConstantSlowdown, InterferenceModel, JobProfile
from dlsched.predictors.interference.lookup import PairLookup
from dlsched.predictors.interference.pairwise import pair_predictions
from dlsched.profiles.table import ProfileSet


def find_job(ps: ProfileSet, spec: str, gpu_type: str) -> JobProfile:
    """The profile named ``MODEL[:BATCH[:AMP]]`` on ``gpu_type``; the first (smallest batch,
    no AMP) when the spec leaves batch or AMP out. ``ValueError`` lists the known models."""
    if gpu_type not in ps.jobs:
        raise ValueError(f"--gpu: {ps.source} has no GPU type {gpu_type!r}; "
                         f"known: {', '.join(repr(g) for g in ps.gpu_types)}")
    parts = spec.split(":")
    if len(parts) > 3 or not parts[0]:
        raise ValueError(f"job {spec!r}: expected MODEL[:BATCH[:AMP]], e.g. ResNet18:32:0")
    try:
        batch = int(parts[1]) if len(parts) > 1 else None
        amp = bool(int(parts[2])) if len(parts) > 2 else None
    except ValueError:
        raise ValueError(f"job {spec!r}: BATCH and AMP must be integers") from None
    jobs = sorted(ps.jobs[gpu_type], key=lambda j: (j.batch_size, j.amp))
    for job in jobs:
        if job.model == parts[0] and batch in (None, job.batch_size) and amp in (None, job.amp):
            return job
    models = sorted({j.model for j in jobs})
    raise ValueError(f"job {spec!r}: not profiled in {ps.source} on {gpu_type or 'its GPU'}; "
                     f"models: {', '.join(models)}")


def job_name(job: JobProfile) -> str:
    return f"{job.model}:{job.batch_size}:{int(job.amp)}"


@dataclass(frozen=True)
class PartnerRow:
    """One partner of a job: predicted and (where measured) true slowdown of the job."""

    partner: str
    predicted: float
    measured: float | None


def rank_partners(model: InterferenceModel, ps: ProfileSet, job: JobProfile, gpu_type: str) -> list[PartnerRow]:
    """Every measured partner of ``job`` on ``gpu_type``, best predicted first."""
    truth = PairLookup(fallback=ConstantSlowdown(1.0)).fit(ps.pairs)  # only its table is read
    partners = []
    for p in ps.pairs_on(gpu_type):
        if p.a.key == job.key:
            partners.append(p.b)
        if p.b.key == job.key and p.a.key != job.key:
            partners.append(p.a)
    pred = pair_predictions(model, [job] * len(partners), partners, [gpu_type] * len(partners))
    rows = [PartnerRow(job_name(o), float(s), truth.measured(job, o, gpu_type)) for o, s in zip(partners, pred)]
    return sorted(rows, key=lambda r: (r.predicted, r.partner))
