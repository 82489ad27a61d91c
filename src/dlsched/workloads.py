"""Seeded workloads of the GPU-sharing papers, with profiled model types attached.

Every job carries a model type drawn from a :class:`~dlsched.models.colocation_table.ColocationTable`
(``model_name`` as a graph-zoo name, ``batch_size``) and, as ground truth, that type's measured
utilisation (on the cluster's GPU type) and peak memory. Only types that fit the GPU alone are
drawn. Predictions are not part of a workload: ``simulate --predict-resources`` (or
:func:`attach_predictions`) fills them from the real predictors.

* ``horus-wlarge`` / ``horus-wsmall`` (Horus §5, TPDS'21): 100 single-GPU jobs of 3 min to 2 h,
  short (<= 800 s) or long, light (< 60 % utilisation) or heavy. W-Large: half long, 60 % heavy;
  W-Small: 40 % long, 40 % heavy (the paper says only that W-Small has "a higher proportion of
  short and small jobs"). Durations log-uniform within each class (short 180-800 s, long
  800-7,200 s); Poisson arrivals, one a minute on average. Cluster: the testbed, 3 nodes x 4
  RTX 2080 (8 GB).
* ``coscheml-15`` / ``-30`` / ``-60`` (Co-scheML §IV): 12 application types, each submitted
  twice (24 jobs) in a random launch sequence, one every 15 / 30 / 60 s. Each type has one
  duration, log-uniform 60-600 s (the paper's makespans, 1,705-2,156 s on 3 GPUs). Cluster: 3
  nodes x 1 Titan Xp (12 GB).
* ``philly-profiled``: the real Philly arrivals of the Helios reference window (68,503 jobs,
  2017-10-01 .. 2017-11-30, ``shared/traces/philly/reference_run``) with their GPUs, durations
  and VCs (``philly_vc_config.csv``); each job gets a model type drawn uniformly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.models.colocation_table import ColocationTable, builtin_table
from dlsched.traces.model import LoadReport, Trace

SHORT_MAX = 800.0           # Horus: short <= 800 s
HEAVY_UTIL = 60.0           # Horus: heavy >= 60 % utilisation
HORUS_MIN, HORUS_MAX = 180.0, 7200.0
HORUS_MIX = {"horus-wlarge": (0.5, 0.6), "horus-wsmall": (0.4, 0.4)}  # (share long, share heavy)
HORUS_JOBS, HORUS_ARRIVAL_MEAN = 100, 60.0
COSCHEML_TYPES, COSCHEML_COPIES = 12, 2
COSCHEML_DURATION = (60.0, 600.0)
PHILLY_TRACE = "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
PHILLY_VCS = "traces/philly/philly_vc_config.csv"
PHILLY_WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")
WORKLOADS = ("horus-wlarge", "horus-wsmall", "coscheml-15", "coscheml-30", "coscheml-60", "philly-profiled")
DEFAULT_GPU = {"horus": "RTX2080", "coscheml": "TitanXp", "philly": "V100"}


@dataclass
class Workload:
    """Jobs plus the cluster they were made for (VC -> nodes, GPUs per node, GPU type)."""

    name: str
    trace: Trace
    vc_nodes: dict[str, int]
    gpus_per_node: int
    gpu: str
    notes: list[str] = field(default_factory=list)

    def cluster(self) -> ClusterSpec:
        return ClusterSpec.from_vc_sizes(self.vc_nodes, self.gpus_per_node, gpu_type(self.gpu))


def make_workload(name: str, seed: int = 0, table: ColocationTable | None = None, gpu: str | None = None,
                  shared: str | Path | None = None, jobs: int | None = None) -> Workload:
    """The workload ``name`` (one of :data:`WORKLOADS`), reproducible from ``seed``.

    ``gpu`` overrides the paper's GPU type; ``shared`` is the ``shared`` folder (Philly only);
    ``jobs`` keeps the first N jobs of ``philly-profiled``."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    family = name.split("-")[0]
    gpu = gpu or DEFAULT_GPU[family]
    gpu_type(gpu)  # an unknown GPU type fails here, with the known ones listed
    table = table or builtin_table()
    rng = np.random.default_rng(seed)
    menu = _menu(table, gpu)
    if family == "horus":
        return _horus(name, rng, table, menu, gpu)
    if family == "coscheml":
        return _coscheml(name, int(name.split("-")[1]), rng, table, menu, gpu)
    return _philly(rng, table, menu, gpu, shared, jobs)


def _menu(table: ColocationTable, gpu: str) -> list[int]:
    """Types with a known utilisation and memory that fit one ``gpu`` alone."""
    cap = gpu_type(gpu).memory_mib
    menu = [i for i, t in enumerate(table.types)
            if not math.isnan(table.util(i, gpu)) and not math.isnan(t.gpu_mem_mib) and t.gpu_mem_mib <= cap]
    if not menu:
        raise ValueError(f"profile table {table.name!r} has no job type with a known utilisation and memory "
                         f"that fits a {gpu} ({cap:,} MiB)")
    return menu


def _job(jid: str, vc: str, gpus: int, submit: float, duration: float, table: ColocationTable, i: int,
         gpu: str) -> Job:
    t = table.types[i]
    return Job(jid, vc, gpus, float(submit), float(round(duration)), name=t.type_id, model_name=t.model,
               batch_size=t.batch_size, gpu_util=table.util(i, gpu), gpu_mem_mib=t.gpu_mem_mib, status="COMPLETED")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float, n: int | None = None):
    return np.exp(rng.uniform(math.log(lo), math.log(hi), n))


def _horus(name: str, rng: np.random.Generator, table: ColocationTable, menu: list[int], gpu: str) -> Workload:
    long_share, heavy_share = HORUS_MIX[name]
    heavy = [i for i in menu if table.util(i, gpu) >= HEAVY_UTIL]
    light = [i for i in menu if table.util(i, gpu) < HEAVY_UTIL]
    notes = []
    if not heavy or not light:
        notes.append(f"{table.name} on {gpu} has no {'heavy' if not heavy else 'light'} type: drawing from all")
        heavy, light = heavy or menu, light or menu
    submit = np.cumsum(rng.exponential(HORUS_ARRIVAL_MEAN, HORUS_JOBS))
    submit -= submit[0]
    out = []
    for k in range(HORUS_JOBS):
        is_long = rng.random() < long_share
        pool = heavy if rng.random() < heavy_share else light
        dur = _log_uniform(rng, SHORT_MAX, HORUS_MAX) if is_long else _log_uniform(rng, HORUS_MIN, SHORT_MAX)
        out.append(_job(f"{name}-{k:03d}", "default", 1, round(submit[k]), dur, table,
                        int(pool[rng.integers(len(pool))]), gpu))
    return _done(name, out, {"default": 3}, 4, gpu, table, notes)


def _coscheml(name: str, interval: int, rng: np.random.Generator, table: ColocationTable, menu: list[int],
              gpu: str) -> Workload:
    by_model: dict[str, list[int]] = {}
    for i in menu:
        by_model.setdefault(table.types[i].model, []).append(i)
    models = list(by_model)
    rng.shuffle(models)
    apps: list[int] = []  # distinct models first, then more batch sizes of them
    while len(apps) < min(COSCHEML_TYPES, len(menu)):
        for m in models:
            left = [i for i in by_model[m] if i not in apps]
            if left and len(apps) < COSCHEML_TYPES:
                apps.append(int(left[rng.integers(len(left))]))
    durations = _log_uniform(rng, *COSCHEML_DURATION, len(apps))
    sequence = [k for k in range(len(apps)) for _ in range(COSCHEML_COPIES)]
    rng.shuffle(sequence)
    out = [_job(f"{name}-{n:02d}", "default", 1, n * interval, durations[k], table, apps[k], gpu)
           for n, k in enumerate(sequence)]
    return _done(name, out, {"default": 3}, 1, gpu, table, [])


def _philly(rng: np.random.Generator, table: ColocationTable, menu: list[int], gpu: str,
            shared: str | Path | None, limit: int | None) -> Workload:
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    base = Path(shared) if shared is not None else _shared_dir()
    trace_path, vc_path = base / PHILLY_TRACE, base / PHILLY_VCS
    for p in (trace_path, vc_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: not found (philly-profiled needs the shared Philly reference window; "
                                    "give --shared DIR)")
    vc_nodes = load_vc_config(vc_path)
    tr = load_trace(trace_path, "helios-log", start=PHILLY_WINDOW[0], end=PHILLY_WINDOW[1], vcs=list(vc_nodes))
    src = tr.jobs[:limit] if limit else tr.jobs
    picks = rng.integers(len(menu), size=len(src))
    out = [_job(j.job_id, j.vc, j.gpus, j.submit_time, true_duration(j), table, menu[int(k)], gpu)
           for j, k in zip(src, picks)]
    notes = [f"{len(tr.jobs):,} Philly jobs in the reference window" + (f", first {len(out):,} kept" if limit else "")]
    notes += tr.report.lines()
    wl = _done("philly-profiled", out, vc_nodes, 8, gpu, table, notes)
    wl.trace.origin = tr.origin
    return wl


def _shared_dir() -> Path:
    import os

    env = os.environ.get("DLSCHED_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"  # src/dlsched/workloads.py -> ../shared


def _done(name: str, jobs: list[Job], vc_nodes: dict[str, int], gpus_per_node: int, gpu: str,
          table: ColocationTable, notes: list[str]) -> Workload:
    report = LoadReport(source=f"workload {name} ({len(jobs)} jobs, types from {table.name} on {gpu})",
                        rows_read=len(jobs))
    jobs.sort(key=lambda j: j.submit_time)
    for k, job in enumerate(jobs):
        job.index = k
    return Workload(name, Trace(jobs, None, report, report.source), vc_nodes, gpus_per_node, gpu, notes)


def attach_predictions(jobs: list[Job], gpu: str, seed: int = 0, noise: float = 0.25) -> dict[str, int]:
    """Fill ``pred_gpu_util`` / ``pred_gpu_mem_mib``: the real predictors (graph features + the
    shipped model) where the job's model resolves; elsewhere a noisy prior, the truth times a
    log-normal factor (sigma ``noise``), seeded. Returns how many jobs got which."""
    from dlsched.predictors.resources.default import load_default
    from dlsched.predictors.resources.hook import fill_job_predictions, graph_resolver

    groups: dict[tuple[str, int], list[Job]] = {}  # one prediction per (model, batch): 68k jobs, ~30 types
    for job in jobs:
        groups.setdefault((job.onnx_ref or job.model_name, job.batch_size), []).append(job)
    heads = [g[0] for g in groups.values()]
    fill_job_predictions(heads, load_default(), graph_resolver, gpu=gpu)
    for head, *rest in groups.values():
        for job in rest:
            job.pred_gpu_util, job.pred_gpu_mem_mib = head.pred_gpu_util, head.pred_gpu_mem_mib
    predicted = sum(1 for j in jobs if not (math.isnan(j.pred_gpu_util) or math.isnan(j.pred_gpu_mem_mib)))
    rng = np.random.default_rng(seed)
    noisy = 0
    for job in jobs:
        if math.isnan(job.pred_gpu_util) or math.isnan(job.pred_gpu_mem_mib):
            f_util, f_mem = np.exp(noise * rng.standard_normal(2))
            util, mem = true_util(job), true_mem(job)  # a noisy prior around the truth
            if math.isnan(job.pred_gpu_util) and not math.isnan(util):
                job.pred_gpu_util = float(min(100.0, util * f_util))
            if math.isnan(job.pred_gpu_mem_mib) and not math.isnan(mem):
                job.pred_gpu_mem_mib = float(mem * f_mem)
            noisy += 1
    return {"predictor": predicted, "noisy_prior": noisy}
