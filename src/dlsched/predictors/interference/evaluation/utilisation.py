"""Predicted GPU utilisation for profile sets that measured none (Gavel).

The Horus curve and the forest need the jobs' utilisation; Gavel gives throughput only. As
Horus would in production, we predict it from the job's computation graph: the zoo model of the
architecture at the job's batch size, through the shipped default predictor (a data-sheet
roofline fitted to no profile data, so nothing of the evaluation leaks into it). Needs the
``graph`` extra; without it the utilisation stays unknown and the notes say so.
"""

from __future__ import annotations

import dataclasses
import math

from dlsched.predictors.interference.base import JobProfile
from dlsched.profiles.table import ProfileSet

#: batch size used for the graph of a job whose profile has none (Gavel's A3C and CycleGAN)
UNKNOWN_BATCH = 1


def with_predicted_utilisation(ps: ProfileSet) -> tuple[ProfileSet, str]:
    """``ps`` with every unknown ``gpu_util`` predicted for its GPU type; the note says how many
    and with what."""
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.graph_source import FeatureError, graph_features

    predictor = load_default()
    if predictor is None:
        return ps, f"{ps.source}: utilisation unknown (no default predictor shipped)"
    filled: dict[tuple[str, tuple], float] = {}
    failed: set[str] = set()
    first_error = ""
    for gpu, jobs in ps.jobs.items():
        for job in jobs:
            if not math.isnan(job.gpu_util) or job.model in failed:
                continue
            try:
                feats = graph_features(job.model, job.batch_size or UNKNOWN_BATCH)
            except (FeatureError, ImportError) as exc:
                failed.add(job.model)
                first_error = first_error or str(exc)
                continue
            util = predictor.predict_util(feats, gpu)
            if util is not None:
                filled[(gpu, job.key)] = float(min(100.0, max(0.0, util[0])))

    def fill(job: JobProfile, gpu: str) -> JobProfile:
        u = filled.get((gpu, job.key))
        return job if u is None else dataclasses.replace(job, gpu_util=u)

    jobs = {gpu: [fill(j, gpu) for j in js] for gpu, js in ps.jobs.items()}
    pairs = [dataclasses.replace(p, a=fill(p.a, p.gpu_type), b=fill(p.b, p.gpu_type)) for p in ps.pairs]
    note = (f"{ps.source}: GPU utilisation predicted from graph features (shipped data-sheet roofline) "
            f"for {len(filled)} of {sum(map(len, ps.jobs.values()))} job profiles")
    if failed:
        note += f"; unknown for {', '.join(sorted(failed))} ({first_error})"
    return dataclasses.replace(ps, jobs=jobs, pairs=pairs), note


