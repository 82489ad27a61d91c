"""``simulate``/``compare --workload NAME``: a GPU-sharing workload as the run's input.

The workload brings its cluster (the paper's testbed, or Philly's VCs) and GPU type; ``--nodes``
(with ``--gpus-per-node``) or ``--vc-config`` resize it, ``--gpu`` changes the GPU type. With
``--predict-resources`` jobs get the real predictors' estimates, and a documented noisy prior
where a model does not resolve (:func:`dlsched.workloads.attach_predictions`).
"""

from __future__ import annotations

from pathlib import Path

from dlsched.run.inputs import Say, quiet


def workload_names() -> tuple[str, ...]:
    """The names ``--workload`` takes."""
    from dlsched.workloads import WORKLOADS

    return tuple(WORKLOADS)


def load_workload(name: str, seed: int, profiles: str, gpu: str | None, nodes: int | None, gpus_per_node: int,
                  vc_config: Path | None, topology: str | None, predict: bool, say: Say = quiet):
    """(trace, jobs, cluster, run name, GPU type) for workload ``name``."""
    from dlsched.models.truth import resolve_truth
    from dlsched.workloads import attach_predictions, make_workload
    from dlsched.runner import cluster_for
    from dlsched.traces.vc import load_vc_config

    wl = make_workload(name, seed=seed, table=resolve_truth(profiles).table_for(seed), gpu=gpu)
    for note in wl.notes:
        say(note, "dim")
    jobs = wl.trace.jobs
    if vc_config is not None or nodes is not None:
        cluster = cluster_for(jobs, load_vc_config(vc_config) if vc_config else None, nodes, gpus_per_node, topology)
    else:
        cluster = cluster_for(jobs, wl.vc_nodes, None, wl.gpus_per_node, topology)
    if predict:
        counts = attach_predictions(jobs, wl.gpu, seed=seed)
        say(f"predicted GPU utilisation and memory for {counts['predictor']} of {len(jobs)} jobs "
            f"with the real predictors, {counts['noisy_prior']} from the noisy prior")
    return wl.trace, jobs, cluster, f"workload {name} (seed {seed}, {wl.gpu})", wl.gpu
