"""Built-in synthetic GPU workload, calibrated to the published Helios statistics.

The real Helios job logs are not redistributable here, so experiments that need a realistic,
congested workload of any size use :func:`generate`. Every modelling choice is tied to a
published figure (Hu et al., "Characterization and Prediction of Deep Learning Workloads in
Large-Scale GPU Datacenters", SC'21 -- ``shared/papers/helios-characterization-qssf-ces.txt``;
``helios_cluster_summary.csv`` from HeliosArtifact; the Venus submission series
``venus_cluster_throughput.csv.gz`` from Lucid):

* GPU-count mix (:data:`GPU_MIX`): over 50 % single-GPU jobs in every cluster (§3.2.1, Fig. 6a),
  jobs with >= 8 GPUs under 10 % of jobs but ~60 % of GPU time (Fig. 6b), powers of two are
  what is requested (§3.2.2), up to 128 GPUs (Philly's maximum, Table 2; Helios has rarer
  larger ones). Generated: 64 % single-GPU, 9 % >= 8 GPUs.
* Duration (:data:`DURATION_MIX`): median GPU-job duration 206 s (summary ``med_run_time_gpu``
  total; 124-280 s per cluster), mean 6,652 s (Table 2), ~3/4 of GPU jobs under 1,000 s
  (§3.2.1), maximum 50 days (Table 2). A three-component log-normal mixture (debug/evaluation,
  short training, long training) with a per-name base duration reproduces median ~200 s,
  mean ~6,400 s and 73 % under 1,000 s.
* Arrivals: hour-of-day factors (:data:`HOURLY`) and weekday factors (:data:`WEEKDAY`) are the
  average Venus GPU-job submissions per hour / weekday, April-September 2020 (computed once from
  ``venus_cluster_throughput.csv.gz``); they show the night trough and the lunch/dinner dips of
  Fig. 2(b).
* Users: Zipf-like activity (exponent 0.9): the top 5 % of users get ~50-70 % of the GPU
  time (55 % at 200k jobs), as "the top 5 % of users consume 45~60 % GPU time" (§3.3, Fig. 8a).
* Job names repeat: each user owns a few named job templates (model, task, GPUs, base
  duration) and resubmits them with +/-50 % log-normal duration noise, as the QSSF estimator
  exploits ("strong correlations between the job duration and ... job name, user, GPU demands",
  §4.2.1).
* Final statuses (:data:`STATUS_BY_GPUS`): GPU jobs complete 62.4 %, cancelled 22.1 %, failed
  15.5 % (summary ``*_rate_gpu`` total); completion falls with GPU count (2-GPU jobs the
  exception) and >= 64-GPU jobs complete < 25 % and are ~70 % cancelled (§3.2.2, Fig. 7b).
  Failed jobs stop early (summary: failed GPU time per job is ~0.7 x the average).
* Cluster load: the span (``days``) is chosen so the offered GPU load is ``load`` (default 0.8)
  of the cluster -- Helios clusters run at 65-90 % utilisation (§3.1.1, Fig. 2a) and queue.
  Each user submits to one VC whose size is at least 4x the user's largest job; users are
  spread over VCs to balance GPU time per VC GPU, so every VC sees about the same load (real
  VCs are less even, Fig. 4, but a VC far past 100 % would only measure an ever-growing
  queue). With FIFO (no backfill) on :data:`DEFAULT_CLUSTER` the mean queueing delay is then
  ~60,000 s, the order of Helios's FIFO simulation of Venus (52,933 s, Table 3).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from dlsched.core.truth import duration as true_duration
from dlsched.traces.model import LoadReport, Trace
from dlsched.traces.pipeline import Columns, LoadOptions, finish

GPUS_PER_NODE = 8

# VC -> nodes (8 GPUs each): 98 nodes / 784 GPUs in 8 VCs of unequal size, about Venus's scale
# (133 nodes, 27 VCs, Table 1); the largest VC holds the 64- and 128-GPU jobs.
DEFAULT_CLUSTER: dict[str, int] = {
    "vc01": 32, "vc02": 16, "vc03": 16, "vc04": 12, "vc05": 8, "vc06": 6, "vc07": 4, "vc08": 4,
}

GPU_MIX: tuple[tuple[int, float], ...] = (
    (1, 0.64), (2, 0.12), (4, 0.15), (8, 0.055), (16, 0.02), (32, 0.01), (64, 0.004), (128, 0.001),
)
# (weight, median seconds, log-sigma) of the per-name base duration
DURATION_MIX: tuple[tuple[float, float, float], ...] = (
    (0.60, 80.0, 1.1),      # debugging / evaluation
    (0.30, 900.0, 1.1),     # short training / fine-tuning
    (0.10, 6 * 3600.0, 1.1),  # long training
)
# A user's largest job takes at most 1/4 of their VC (128-GPU jobs: 1/2 of the largest VC).
# Jobs the size of a whole VC make FIFO drain it for days: queues then grow without bound.
MAX_JOB_SHARE = 4
GPU_DURATION_COUPLING = 0.1  # log-duration grows with log2(GPUs): big jobs run longer (Fig. 6b)
NAME_NOISE_SIGMA = 0.5       # resubmissions of one name vary by ~±50 %
MAX_DURATION = 50 * 86400.0  # Table 2
HOURLY = np.array([0.90, 0.66, 0.60, 0.38, 0.27, 0.21, 0.19, 0.22, 0.37, 0.80, 1.29, 1.47,
                   1.16, 1.30, 1.56, 1.66, 1.73, 1.73, 1.28, 1.31, 1.34, 1.36, 1.15, 1.04])
WEEKDAY = np.array([1.03, 1.07, 1.28, 1.21, 0.95, 0.68, 0.78])  # Monday .. Sunday
STATUSES = ("COMPLETED", "CANCELLED", "FAILED")
# GPU count -> (completed, cancelled, failed) probabilities; weighted by GPU_MIX: 0.62/0.21/0.17
STATUS_BY_GPUS: dict[int, tuple[float, float, float]] = {
    1: (0.64, 0.19, 0.17), 2: (0.68, 0.17, 0.15), 4: (0.58, 0.25, 0.17), 8: (0.52, 0.32, 0.16),
    16: (0.42, 0.44, 0.14), 32: (0.32, 0.56, 0.12), 64: (0.22, 0.68, 0.10), 128: (0.22, 0.68, 0.10),
}
# Model names are those of the graph model zoo (dlsched.graph.zoo), so that predictors can
# resolve each job's computation graph: the architectures profiled by Lucid and Gavel.
MODELS = ("resnet50", "resnet18_cifar", "vgg11_cifar", "mobilenet_v2_cifar", "mobilenet_v3_large",
          "efficientnet_b0_cifar", "dcgan", "cyclegan", "pointnet", "neumf", "lstm_lm", "transformer",
          "bert_base_squad", "gpt2_small", "a3c_pong", "recommendation_vae", "ppo_lunarlander",
          "td3_bipedalwalker")
TASKS_BY_KIND = (("eval", "debug", "test"), ("finetune", "train"), ("train", "pretrain"))
BATCH_SIZES = np.array([16, 32, 64, 128, 256])
DEFAULT_START = datetime(2020, 9, 1)  # a Tuesday, as the Helios September evaluation window


def default_cluster(trace: Trace | None = None, load: float = 0.8) -> dict[str, int]:
    """VC -> nodes to simulate on: :data:`DEFAULT_CLUSTER` for the default workload.

    ``generate`` already sets the arrival span so that the default cluster runs at ``load``;
    for a trace whose VCs are not the default ones (custom ``vcs``, or any other trace), each
    VC is sized so its offered GPU load is ``load`` and its largest job fits.
    """
    if trace is None or not trace.jobs or set(trace.vcs) <= set(DEFAULT_CLUSTER):
        return dict(DEFAULT_CLUSTER)
    span = max(trace.jobs[-1].submit_time - trace.jobs[0].submit_time, 3600.0)
    work: dict[str, float] = {}
    largest: dict[str, int] = {}
    for job in trace.jobs:
        work[job.vc] = work.get(job.vc, 0.0) + job.gpus * true_duration(job)
        largest[job.vc] = max(largest.get(job.vc, 0), job.gpus)
    return {vc: max(1, -(-largest[vc] // GPUS_PER_NODE), round(work[vc] / (load * span * GPUS_PER_NODE)))
            for vc in work}


def generate(jobs: int = 20_000, seed: int = 0, vcs: dict[str, int] | None = None,
             days: float | None = None, *, load: float = 0.8, users: int | None = None,
             start: datetime = DEFAULT_START, model_fields: bool = True) -> Trace:
    """A deterministic synthetic trace of ``jobs`` GPU jobs for the cluster ``vcs`` (VC -> nodes).

    ``days`` fixes the arrival span; by default it is chosen so that the offered GPU load
    (sum of GPUs x duration over cluster GPUs x span) equals ``load``. ``users`` defaults to
    ~1.2 sqrt(jobs). ``model_fields`` fills ``model_name`` and ``batch_size``.
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    cluster = dict(vcs or DEFAULT_CLUSTER)
    if not cluster or min(cluster.values()) < 1:
        raise ValueError("vcs must map at least one VC to a positive node count")
    # the columns come from a function of their own: its dozen job-length intermediates are
    # freed before the jobs are built (at 1M jobs, ~100 MB less at the loader's peak)
    cols, days = _columns(jobs, seed, cluster, days, load, users, start, model_fields)
    report = LoadReport(source=f"synthetic(jobs={jobs}, seed={seed}, days={days:.3f})", rows_read=jobs)
    trace = finish(cols, LoadOptions(include_cpu_jobs=True), report, "synthetic", name=report.source)
    trace.origin = start
    return trace


def _columns(jobs: int, seed: int, cluster: dict[str, int], days: float | None, load: float,
             users: int | None, start: datetime, model_fields: bool) -> tuple[Columns, float]:
    """The trace's validated columns and its arrival span in days (see :func:`generate`)."""
    rng = np.random.default_rng(seed)
    n_users = users or int(np.clip(round(1.2 * jobs ** 0.5), 4, 5000))
    user_w = 1.0 / np.arange(1, n_users + 1) ** 0.9
    user_w /= user_w.sum()
    tmpl = _templates(rng, n_users, user_w, max(n_users, jobs // 8))

    user = rng.choice(n_users, size=jobs, p=user_w)
    pick = np.minimum((tmpl["count"][user] * rng.random(jobs) ** 1.5).astype(np.int64),
                      tmpl["count"][user] - 1)
    t = tmpl["offset"][user] + pick
    gpus = tmpl["gpus"][t].copy()
    resize = rng.random(jobs)
    gpus = np.where(resize < 0.05, gpus * 2, np.where(resize < 0.10, np.maximum(gpus // 2, 1), gpus))
    gpus = np.minimum(gpus, GPU_MIX[-1][0])
    duration = np.exp(tmpl["log_dur"][t] + NAME_NOISE_SIGMA * rng.standard_normal(jobs))
    status = _statuses(rng, gpus)
    failed = status == 2
    duration[failed] *= rng.uniform(0.1, 1.0, failed.sum())
    duration = np.clip(np.round(duration), 1.0, MAX_DURATION)

    vc_names = np.array(list(cluster), dtype=object)
    capacity = np.array([n * GPUS_PER_NODE for n in cluster.values()])
    gpus = np.minimum(gpus, max(capacity.max() // 2, 1))  # no job fills the whole cluster
    work = np.bincount(user, weights=gpus * duration, minlength=n_users)
    biggest = np.zeros(n_users, dtype=np.int64)
    np.maximum.at(biggest, user, gpus)
    vc = _home_vcs(work, biggest, capacity)[user]

    total_gpus = float(capacity.sum())
    if days is None:
        days = max(float((gpus * duration).sum()) / (load * total_gpus * 86400.0), 1.0 / 24)
    submit = _arrivals(rng, jobs, days, start)

    extra = {"user": tmpl["user_name"][user], "name": tmpl["name"][t],
             "status": np.array(STATUSES, dtype=object)[status],
             "cpus": gpus * tmpl["cpus_per_gpu"][t]}
    if model_fields:
        extra["model_name"] = tmpl["model"][t]
        extra["batch_size"] = tmpl["batch"][t]
    ids = np.empty(jobs, dtype=object)
    ids[:] = [f"syn{i:07d}" for i in range(jobs)]
    return Columns(ids, vc_names[vc], gpus.astype(np.int64), submit, duration,
                   np.arange(jobs, dtype=np.int64) + 1, extra, origin=None), days


def _templates(rng: np.random.Generator, n_users: int, user_w: np.ndarray, n: int) -> dict:
    """Named job templates, grouped by user (``offset``/``count`` index them per user)."""
    owner = np.concatenate([np.arange(n_users),
                            rng.choice(n_users, size=n - n_users, p=_norm(user_w ** 0.6))])
    owner.sort(kind="stable")
    count = np.bincount(owner, minlength=n_users)
    offset = np.concatenate([[0], np.cumsum(count)[:-1]])
    sizes, size_p = zip(*GPU_MIX)
    gpus = np.array(sizes)[rng.choice(len(sizes), size=n, p=_norm(np.array(size_p)))]
    w, med, sig = (np.array(c) for c in zip(*DURATION_MIX))
    kind = rng.choice(len(w), size=n, p=_norm(w))
    log_dur = (np.log(med[kind]) + sig[kind] * rng.standard_normal(n)
               + GPU_DURATION_COUPLING * np.log2(gpus))
    model = np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)]
    task_choice = rng.integers(0, 3, n)
    task = np.array([TASKS_BY_KIND[k][c % len(TASKS_BY_KIND[k])] for k, c in zip(kind, task_choice)],
                    dtype=object)
    variant = rng.integers(1, 40, n)
    name = np.array([f"{tk}_{m}_v{v}" for tk, m, v in zip(task, model, variant)], dtype=object)
    return {"count": count, "offset": offset, "gpus": gpus, "log_dur": log_dur, "model": model,
            "name": name, "batch": BATCH_SIZES[rng.integers(0, len(BATCH_SIZES), n)],
            "cpus_per_gpu": rng.choice(np.array([2, 4, 6, 8]), size=n),
            "user_name": np.array([f"user{u:04d}" for u in range(n_users)], dtype=object)}


def _statuses(rng: np.random.Generator, gpus: np.ndarray) -> np.ndarray:
    """0 completed, 1 cancelled, 2 failed, with probabilities by GPU count (nearest power of 2)."""
    keys = np.array(sorted(STATUS_BY_GPUS))
    probs = np.array([STATUS_BY_GPUS[k] for k in keys])
    row = np.clip(np.searchsorted(keys, gpus), 0, len(keys) - 1)
    cum = np.cumsum(probs[row], axis=1)
    return (rng.random(len(gpus))[:, None] > cum[:, :-1]).sum(axis=1)


def _home_vcs(work: np.ndarray, biggest: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each user's VC, balancing GPU time per VC GPU (heaviest users first, greedy).

    A user only goes to a VC at least ``MAX_JOB_SHARE`` times their largest job (else the
    largest VC). Without balancing, one heavy user can push a small VC far past 100 % load
    and its queue never drains.
    """
    assigned = np.zeros(len(capacity))
    home = np.empty(len(work), dtype=np.int64)
    for u in np.argsort(-work, kind="stable"):
        fits = capacity >= MAX_JOB_SHARE * biggest[u]
        if not fits.any():
            fits = capacity == capacity.max()
        ratio = np.where(fits, (assigned + work[u]) / capacity, np.inf)
        v = int(np.argmin(ratio))
        home[u] = v
        assigned[v] += work[u]
    return home


def _arrivals(rng: np.random.Generator, n: int, days: float, start: datetime) -> np.ndarray:
    """Sorted submit seconds over ``days`` following the hourly x weekday rate (10-min bins)."""
    span = days * 86400.0
    bins = max(int(np.ceil(span / 600.0)), 1)
    t0 = (start - datetime(start.year, start.month, start.day)).total_seconds()
    seconds = t0 + np.arange(bins) * 600.0  # bin starts, seconds since start's midnight
    hour = ((seconds // 3600) % 24).astype(int)
    dow = ((start.weekday() + seconds // 86400) % 7).astype(int)
    cum = np.cumsum(HOURLY[hour] * WEEKDAY[dow])
    u = np.sort(rng.random(n)) * cum[-1]
    b = np.searchsorted(cum, u, side="right").clip(0, bins - 1)
    return np.sort(np.minimum(b * 600.0 + rng.random(n) * 600.0, span).round(0))


def _norm(p: np.ndarray) -> np.ndarray:
    return p / p.sum()


def offered_load(trace: Trace, cluster: dict[str, int]) -> float:
    """GPU-seconds requested / (cluster GPUs x arrival span): > 1 means the queue must grow."""
    if not trace.jobs:
        return 0.0
    span = max(trace.jobs[-1].submit_time - trace.jobs[0].submit_time, 1.0)
    work = sum(j.gpus * true_duration(j) for j in trace.jobs)
    return work / (sum(cluster.values()) * GPUS_PER_NODE * span)

