"""``dlsched experiment backfill``: no backfill, greedy backfill, EASY and conservative backfill
with time limits, predictions, predictions + correction and the truth, paired per seed.

Every variant runs on the same seeded built-in workloads (``--jobs``, seeds 0..N-1), whose jobs
all get user-style time limits drawn by ``--time-limits`` (the same limits for every variant:
the draw is seeded by the workload's seed). Per run: mean and p95 JCT, mean queue delay, mean
bounded slowdown (``max(1, (wait + run) / max(run, 10 s))``), the longest wait of a job of >= 8
GPUs (starvation of large jobs), GPU utilisation and broken reservations. The pairs the docs
compare (:data:`PAIRS`) get the mean per-seed difference ``a - b`` with a Bonferroni-corrected
95 % CI over all of them (:func:`dlsched.metrics.paired.paired_difference`). The per-seed
numbers are kept (``--results``) so the docs table can be re-rendered and checked without
rerunning (``scripts/backfill_table.py``).
"""

from __future__ import annotations

import csv
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.experiments.protocol import check_seeds
from dlsched.metrics.paired import paired_difference

Say = Callable[[str], None]
LIMITS = "overestimate=1:5,round=900"   # users overestimate 1-5x and round up to 15 minutes
BSLD_TAU_S = 10.0                       # bounded slowdown's floor on the run time
LARGE_GPUS = 8
BUILTIN = "Built-in workload"   # the workload of a --results file that names none
NODES = 32   # one pool of 8-GPU nodes: the built-in workload's own VCs are too large to queue much


@dataclass(frozen=True)
class Variant:
    """One row: a label, a registered policy, its ``--param`` values, greedy backfill or not."""

    label: str
    policy: str
    params: dict[str, str] = field(default_factory=dict)
    backfill: bool = False


def _reserving(policy: str) -> tuple[Variant, ...]:
    return (Variant(f"{policy}-limit", policy, {"estimate": "limit"}),
            Variant(f"{policy}-pred", policy, {"estimate": "prediction"}),
            Variant(f"{policy}-pred+corr", policy, {"estimate": "prediction", "correction": "limit"}),
            Variant(f"{policy}-truth", policy, {"estimate": "truth"}))


VARIANTS: tuple[Variant, ...] = (Variant("fifo", "fifo"), Variant("fifo+greedy", "fifo", backfill=True),
                                 *_reserving("easy"), *_reserving("conservative"))
# the comparisons docs/backfill.md discusses, a - b (negative: a is lower)
PAIRS: tuple[tuple[str, str], ...] = (
    ("fifo+greedy", "fifo"), ("easy-limit", "fifo"), ("easy-limit", "fifo+greedy"),
    ("easy-pred", "easy-limit"), ("easy-pred+corr", "easy-pred"), ("easy-pred+corr", "easy-limit"),
    ("easy-truth", "easy-pred+corr"), ("conservative-limit", "easy-limit"),
    ("conservative-pred+corr", "easy-pred+corr"), ("conservative-truth", "easy-truth"))
METRICS: tuple[tuple[str, str, str], ...] = (   # key, column title, format
    ("avg_jct", "mean JCT s", ",.0f"), ("p95_jct", "p95 JCT s", ",.0f"), ("avg_queue_delay", "mean wait s", ",.0f"),
    ("bsld", "mean bounded slowdown", ",.2f"), ("max_wait_large", f"max wait >= {LARGE_GPUS} GPUs s", ",.0f"),
    ("utilization", "GPU utilisation", ".4f"), ("broken", "reservations broken", ",.1f"))
PAIR_METRICS = ("avg_jct", "p95_jct", "bsld", "max_wait_large")


def run_metrics(run_dir: Path, summary: dict) -> dict[str, float]:
    """The numbers of one run: from its summary and, for slowdown and large-job waits, its jobs.csv."""
    bsld, waits, n = 0.0, [0.0], 0
    with open(run_dir / "jobs.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            wait, run = float(row["queue_delay"]), float(row["jct"]) - float(row["queue_delay"])
            bsld += max(1.0, (wait + run) / max(run, BSLD_TAU_S))
            n += 1
            if int(row["gpus"]) >= LARGE_GPUS:
                waits.append(wait)
    return {"avg_jct": summary["avg_jct"], "p95_jct": summary["p95_jct"], "avg_queue_delay": summary["avg_queue_delay"],
            "bsld": bsld / max(n, 1), "max_wait_large": max(waits), "utilization": summary["gpu_utilization"],
            "broken": float(summary.get("reservations", {}).get("broken", 0))}


def run_variants(seeds: int, jobs: int, limits: str = LIMITS, variants: tuple[Variant, ...] = VARIANTS,
                 say: Say | None = None, nodes: int = NODES,
                 source: Callable[[int], object] | None = None) -> dict[str, list[dict[str, float]]]:
    """label -> the metrics of one run per seed (seed order), every variant on the same workloads
    (``source``: ``seed -> Inputs`` with the limits drawn, e.g. Philly's; else the built-in workload)."""
    from dlsched.run.build import build_run, load_inputs
    from dlsched.run.options import configs_from_options

    out: dict[str, list[dict[str, float]]] = {v.label: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="dlsched-backfill-") as tmp:
        for seed in check_seeds(seeds):
            inputs = None if source is None else source(seed)
            for v in variants:
                values = {"policy": v.policy, "jobs": jobs, "seed": seed, "time_limits": limits, "nodes": nodes,
                          "backfill": v.backfill, "param": [f"{k}={x}" for k, x in v.params.items()]}
                (config,), _ = configs_from_options(values)
                if inputs is None:
                    inputs = load_inputs(config)
                for job in inputs.jobs:   # each variant starts from the workload's own (absent) predictions:
                    job.pred_duration = job.priority = math.nan   # a variant estimates only a job that has none
                run_dir = Path(tmp) / f"{seed}-{v.label}"
                summary = build_run(config, inputs=inputs).simulate(run_dir)
                out[v.label].append(run_metrics(run_dir, summary))
                if say is not None:
                    say(f"seed {seed}: {v.label} done")
    return out


def means(results: dict[str, list[dict[str, float]]]) -> list[dict]:
    """Per variant, each metric's mean over the seeds."""
    return [{"variant": label, "seeds": len(runs), **{k: statistics.fmean(r[k] for r in runs) for k, _, _ in METRICS}}
            for label, runs in results.items()]


def pairs(results: dict[str, list[dict[str, float]]], compared: tuple[tuple[str, str], ...] = PAIRS) -> list[dict]:
    """Each compared pair's paired differences ``a - b`` per metric, CIs Bonferroni-corrected over
    every (pair, metric) shown (family-wise 95 %)."""
    present = [(a, b) for a, b in compared if a in results and b in results]
    m = len(present) * len(PAIR_METRICS)
    rows = []
    for a, b in present:
        row: dict = {"a": a, "b": b}
        for key in PAIR_METRICS:
            d = paired_difference(a, b, [r[key] for r in results[a]], [r[key] for r in results[b]],
                                  1 - 0.05 / m, m)
            row[key] = {"diff": d.mean, "low": d.low, "high": d.high, "n": d.n}
        rows.append(row)
    return rows


def markdown(results: dict[str, list[dict[str, float]]], jobs: int, limits: str, nodes: int = NODES,
             workload: str = BUILTIN) -> str:
    """The two tables docs/backfill.md prints: means per variant, then the compared pairs."""
    seeds = len(next(iter(results.values())))
    head = "| variant | " + " | ".join(title for _, title, _ in METRICS) + " |"
    lines = [head, "|---|" + "---:|" * len(METRICS)]
    for row in means(results):
        lines.append("| " + " | ".join([row["variant"]] + [format(row[k], f) for k, _, f in METRICS]) + " |")
    titles = {k: t for k, t, _ in METRICS}
    lines += ["", "| a - b | " + " | ".join(f"Δ {titles[k]} [CI]" for k in PAIR_METRICS) + " |",
              "|---|" + "---:|" * len(PAIR_METRICS)]
    fmt = {k: f for k, _, f in METRICS}
    compared = pairs(results)
    for row in compared:
        cells = [f"{row['a']} - {row['b']}"]
        for key in PAIR_METRICS:
            d, f = row[key], fmt[key]
            cells.append(f"{d['diff']:+{f}} [{d['low']:+{f}}, {d['high']:+{f}}]")
        lines.append("| " + " | ".join(cells) + " |")
    m = len(compared) * len(PAIR_METRICS)
    lines += ["", f"{workload}, {jobs:,} jobs on one pool of {nodes} 8-GPU nodes, seeds 0-{seeds - 1}, "
                  f"time limits `{limits}`; CIs are "
                  f"paired over the seeds, Bonferroni-corrected over the {m} differences shown (family-wise 95 %)."]
    return "\n".join(lines)


def select_variants(labels: str | None) -> tuple[Variant, ...]:
    """The variants named in a comma-separated ``--variants`` value (all for ``None``), in table order."""
    if labels is None:
        return VARIANTS
    asked = [x.strip() for x in labels.split(",") if x.strip()]
    known = {v.label for v in VARIANTS}
    unknown = [x for x in asked if x not in known]
    if unknown or not asked:
        bad = unknown[0] if unknown else repr(labels)
        raise ValueError(f"--variants: unknown variant {bad} "
                         f"(known: {', '.join(v.label for v in VARIANTS)})")
    return tuple(v for v in VARIANTS if v.label in asked)


def merge_results(kept: dict, fresh: dict) -> dict:
    """``kept`` (a ``--results`` file) with the variants ``fresh`` reran replaced, in table order.
    Why: a slow variant can be rerun alone without mixing workloads -- the two must share seeds,
    jobs, nodes and limits, else the pairs would compare different runs."""
    fresh = {"workload": BUILTIN, **fresh}
    kept = {"workload": BUILTIN, **kept}   # files written before the key was kept are the built-in workload's
    for key in ("workload", "seeds", "jobs", "nodes", "limits"):
        if kept.get(key) != fresh[key]:
            raise ValueError(f"--update: the kept results have {key}={kept.get(key)!r}, this run {fresh[key]!r}")
    results = {**kept["results"], **fresh["results"]}
    ordered = {v.label: results[v.label] for v in VARIANTS if v.label in results}
    return {**{k: fresh[k] for k in ("workload", "seeds", "jobs", "nodes", "limits")}, "results": ordered}


def experiment(seeds: int = 10, jobs: int = 2000, limits: str = LIMITS, say: Say | None = None,
               nodes: int = NODES, philly: Path | None = None, variants: tuple[Variant, ...] = VARIANTS) -> dict:
    """Run the variants on every seed; ``markdown`` holds the docs tables, ``results`` the per-seed numbers.
    ``philly``: the reference run's trace, whose first ``jobs`` jobs (0: all) replace the built-in workload."""
    if philly is not None and jobs == 0:
        jobs = -1   # every job of the window
    elif jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    if nodes < 1:
        raise ValueError(f"--nodes must be >= 1, got {nodes}")
    from dlsched.traces.time_limits import parse_time_limits

    parse_time_limits(limits)
    check_seeds(seeds)
    t0 = time.perf_counter()
    source, workload, extra = None, BUILTIN, {}
    if philly is not None:
        from dlsched.experiments.dlsched.backfill_philly import philly_source

        source, extra = philly_source(philly, None if jobs < 0 else jobs, nodes, limits)
        jobs = extra["jobs"]
        part = "every job" if jobs == extra["window_jobs"] else "the first jobs (by submit time)"
        workload = f"Philly reference window (Oct-Nov 2017, {extra['window_jobs']:,} jobs), {part}"
        if extra["too_wide"]:
            workload += f" ({extra['too_wide']} wider than the pool left out)"
    results = run_variants(seeds, jobs, limits, variants, say, nodes, source)
    return {"seeds": seeds, "jobs": jobs, "nodes": nodes, "limits": limits, "seconds": time.perf_counter() - t0,
            "results": results, "markdown": markdown(results, jobs, limits, nodes, workload), **extra,
            "workload": workload}
