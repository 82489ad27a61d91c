"""How well the shipped utilisation predictor reproduces the utilisation column of the shipped
profile table (``gavel_derived.json``, per GPU type), the figure issue 36 asks about for P100.

Why a separate check: the sharing experiments' predictions come from this predictor while the
truth's utilisation comes from that table, so the error between the two is the utilisation error
the policies see. Each of the table's job types is predicted from its graph (the same path as
:func:`dlsched.workloads.attach_predictions`: :func:`~dlsched.predictors.resources.hook.fill_job_predictions`
with the type's model and batch size on that GPU type) and compared with the table's figure.
Note that Gavel measured no utilisation: the table's column is inferred from how much a job slows
its partners (``data/profiles/NOTICE.md``), so part of the error is the column's, not the
predictor's (the RL job ``a3c_pong`` reads 96 % on P100 but 51 % on V100).

    python -m dlsched.experiments.sharing.util_check      # RMSLE, MAE per GPU type
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class UtilCheck:
    """Predicted against table utilisation on one GPU type: RMSLE (log1p), MAE in points, worst rows."""

    gpu: str
    rows: int
    types: int
    rmsle: float
    mae: float
    worst: tuple[tuple[str, float, float], ...]  # (type id, table %, predicted %), largest log error first


def check(gpu: str, worst: int = 5) -> UtilCheck:
    """The shipped predictor against the built-in table's utilisation on ``gpu``."""
    from dlsched.core.job import Job
    from dlsched.models.colocation_table import builtin_table
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    table, predictor = builtin_table(), load_default()
    rows = []
    for k, t in enumerate(table.types):
        if gpu not in t.gpu_util:
            continue
        job = Job(job_id=str(k), submit_time=0.0, duration=1.0, gpus=1, vc="check", model_name=t.model,
                  batch_size=t.batch_size)
        fill_job_predictions([job], predictor, graph_resolver, gpu=gpu)
        if not math.isnan(job.pred_gpu_util):
            rows.append((t.type_id, float(t.gpu_util[gpu]), float(job.pred_gpu_util)))
    if not rows:
        return UtilCheck(gpu, 0, len(table.types), math.nan, math.nan, ())
    logs = [(math.log1p(p) - math.log1p(m)) ** 2 for _, m, p in rows]
    ranked = sorted(rows, key=lambda r: -abs(math.log1p(r[2]) - math.log1p(r[1])))
    return UtilCheck(gpu, len(rows), len(table.types), math.sqrt(sum(logs) / len(logs)),
                     sum(abs(p - m) for _, m, p in rows) / len(rows), tuple(ranked[:worst]))


def main() -> None:
    """Print the check for every GPU type of the table."""
    from dlsched.models.colocation_table import builtin_table

    for gpu in builtin_table().pairs:
        c = check(gpu)
        print(f"{gpu}: {c.rows} of {c.types} types predicted, RMSLE {c.rmsle:.3f}, MAE {c.mae:.1f} points; worst: "
              + ", ".join(f"{t} {m:.0f} % -> {p:.0f} %" for t, m, p in c.worst))


if __name__ == "__main__":
    main()
