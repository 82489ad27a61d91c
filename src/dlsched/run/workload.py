"""``simulate``/``compare --workload NAME``: a GPU-sharing workload as the run's input.

The workload brings its cluster (the paper's testbed, or Philly's VCs) and GPU type; ``--nodes``
(with ``--gpus-per-node``) or ``--vc-config`` resize it, ``--gpu`` changes the GPU type. With
``--predict-resources`` jobs get the real predictors' estimates, and a documented noisy prior
where a model does not resolve (:func:`dlsched.workloads.attach_predictions`).

The sharing reproductions build their runs here too (through ``build_run``), with what only they
set: a pool of the workload's own nodes (``ClusterConfig.pool``), the first N jobs
(``WorkloadConfig.workload_jobs``) and perfect predictions. A reproduction runs one workload and
seed under many policies, so the predictions of a (workload, seed, truth, jobs, GPU) are computed
once per process (:func:`predictions`) and copied onto each run's fresh jobs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.run.inputs import Say, quiet

#: Inputs.filtered's key for the jobs a pool is too small for
TOO_WIDE = "wider than the pool"


def workload_names() -> tuple[str, ...]:
    """The names ``--workload`` takes."""
    from dlsched.workloads import WORKLOADS

    return tuple(WORKLOADS)


@lru_cache(maxsize=256)
def predictions(name: str, seed: int, jobs: int | None, truth, gpu: str | None = None
                ) -> tuple[dict[str, tuple[float, float]], dict[str, int]]:
    """(job id -> (predicted utilisation, predicted memory), how many came from which source) of
    workload ``name`` on ``truth`` (a :class:`~dlsched.models.truth.Truth`, hashed by identity):
    the real predictors on a fresh copy of the workload, as :func:`~dlsched.workloads.attach_predictions`
    gives them. Cached because predicting costs far more than simulating one small workload."""
    from dlsched.workloads import attach_predictions, make_workload

    wl = make_workload(name, seed=seed, jobs=jobs, table=truth.table_for(seed), gpu=gpu)
    counts = attach_predictions(wl.trace.jobs, wl.gpu, seed=seed)
    return {j.job_id: (j.pred_gpu_util, j.pred_gpu_mem_mib) for j in wl.trace.jobs}, counts


def give_predictions(jobs: list, name: str, seed: int, workload_jobs: int | None, truth, gpu: str | None,
                     perfect: bool) -> dict[str, int] | None:
    """Set ``jobs``' predicted utilisation and memory: their measured truth when ``perfect``,
    else the cached real predictions of the workload (:func:`predictions`); returns how many came
    from which source (None when perfect)."""
    if perfect:
        for j in jobs:
            j.pred_gpu_util, j.pred_gpu_mem_mib = true_util(j), true_mem(j)
        return None
    predicted, counts = predictions(name, seed, workload_jobs, truth, gpu)
    for j in jobs:
        j.pred_gpu_util, j.pred_gpu_mem_mib = predicted[j.job_id]
    return counts


def pooled(wl, nodes: int) -> tuple[list, object, int]:
    """The workload's jobs on one pool of ``nodes`` nodes (its GPUs per node and GPU type), as
    Horus's simulation (one 128 x 8-GPU cluster); jobs wider than the pool are left out and
    counted. Kept jobs move to the pool's one VC, ``all``."""
    from dlsched.core.cluster import ClusterSpec, gpu_type

    total = nodes * wl.gpus_per_node
    kept = [j for j in wl.trace.jobs if j.gpus <= total]
    for j in kept:
        j.vc = "all"
    cluster = ClusterSpec.from_vc_sizes({"all": nodes}, wl.gpus_per_node, gpu_type(wl.gpu))
    return kept, cluster, len(wl.trace.jobs) - len(kept)


def load_workload(name: str, seed: int, profiles: str, gpu: str | None, nodes: int | None, gpus_per_node: int,
                  vc_config: Path | None, topology: str | None, predict: bool, say: Say = quiet,
                  jobs: int | None = None, pool: int | None = None, perfect: bool = False):
    """(trace, jobs, cluster, run name, GPU type, jobs filtered out by reason) for workload ``name``.

    ``jobs``: keep the first N (philly-profiled); ``pool``: one pool of that many of the
    workload's nodes; ``perfect``: predictions = the measured truth."""
    from dlsched.models.truth import resolve_truth
    from dlsched.runner import cluster_for
    from dlsched.traces.vc import load_vc_config
    from dlsched.workloads import make_workload

    truth = resolve_truth(profiles)
    wl = make_workload(name, seed=seed, jobs=jobs, table=truth.table_for(seed), gpu=gpu)
    for note in wl.notes:
        say(note, "dim")
    job_list = wl.trace.jobs
    filtered: dict[str, int] = {}
    counts = None
    if pool is not None:
        job_list, cluster, left_out = pooled(wl, pool)
        if left_out:
            filtered[TOO_WIDE] = left_out
    elif vc_config is not None or nodes is not None:
        cluster = cluster_for(job_list, load_vc_config(vc_config) if vc_config else None, nodes, gpus_per_node,
                              topology)
    else:
        cluster = cluster_for(job_list, wl.vc_nodes, None, wl.gpus_per_node, topology)
    if predict and not perfect:
        from dlsched.run.resources import export_first

        export_first(job_list, say)   # first use: progress and a note before a big export, not minutes of silence
    if perfect or predict:
        counts = give_predictions(job_list, name, seed, jobs, truth, gpu, perfect)
    if counts is not None:
        say(f"predicted GPU utilisation and memory for {counts['predictor']} of {len(wl.trace.jobs)} jobs "
            f"with the real predictors, {counts['noisy_prior']} from the noisy prior")
    return wl.trace, job_list, cluster, f"workload {name} (seed {seed}, {wl.gpu})", wl.gpu, filtered
