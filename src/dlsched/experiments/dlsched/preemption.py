"""Preemption on predictions, with and without guards, beside the non-preemptive orders.

Every variant runs on the same seeded built-in workloads (``--jobs``, seeds 0..N-1); per seed
the difference ``variant - baseline`` of mean and p95 JCT is paired (the seed fixes the jobs),
and the table gives its mean, 95 % CI (Student's t over the seeds) and wins (seeds on which the
variant's JCT was lower). Evictions are summary.json's ``preemptions``.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlsched.experiments.protocol import check_seeds, t_quantile

Say = Callable[[str], None]


@dataclass(frozen=True)
class Variant:
    """One row: a label, a registered policy and its ``--param`` values."""

    label: str
    policy: str
    params: dict[str, str] = field(default_factory=dict)


GUARDS = {"min_run_s": "1800", "max_evictions": "2", "grace_s": "60"}
DEFAULT_VARIANTS = (Variant("fifo", "fifo"), Variant("qssf", "qssf"), Variant("srtf-pred", "srtf-pred"),
                    Variant("srtf-pred+guards", "srtf-pred", GUARDS))
BASELINE = "qssf"
METRICS = (("avg_jct", "mean JCT"), ("p95_jct", "p95 JCT"))


@dataclass(frozen=True)
class Paired:
    """Mean paired difference (variant - baseline) over seeds, its 95 % CI, wins and seeds."""

    mean: float
    low: float
    high: float
    wins: int
    seeds: int


def paired_difference(base: list[float], values: list[float]) -> Paired:
    """Per-seed ``values - base``; wins are seeds where the value is lower."""
    if len(base) != len(values) or not base:
        raise ValueError(f"paired difference needs equal, non-empty runs ({len(base)} vs {len(values)})")
    diffs = [v - b for b, v in zip(base, values)]
    n, mean = len(diffs), statistics.fmean(diffs)
    half = t_quantile(n - 1) * statistics.stdev(diffs) / math.sqrt(n) if n > 1 else math.nan
    return Paired(mean, mean - half, mean + half, sum(d < 0 for d in diffs), n)


def run_variants(seeds: int, jobs: int, variants: tuple[Variant, ...] = DEFAULT_VARIANTS,
                 say: Say | None = None) -> dict[str, list[dict]]:
    """label -> one summary.json per seed (seed order), every variant on the same workloads."""
    from dlsched.run.build import build_run, load_inputs
    from dlsched.run.options import configs_from_options

    out: dict[str, list[dict]] = {v.label: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="dlsched-preempt-") as tmp:
        for seed in check_seeds(seeds):
            inputs = None
            for v in variants:
                values = {"policy": v.policy, "jobs": jobs, "seed": seed,
                          "param": [f"{k}={x}" for k, x in v.params.items()]}
                (config,), _ = configs_from_options(values)
                if inputs is None:
                    inputs = load_inputs(config)
                run = build_run(config, inputs=inputs)
                out[v.label].append(run.simulate(f"{tmp}/{seed}-{v.label}"))
                if say is not None:
                    say(f"seed {seed}: {v.label} done")
    return out


def table(results: dict[str, list[dict]], baseline: str = BASELINE) -> list[dict]:
    """Rows: per variant, the means over seeds and the paired differences to ``baseline``."""
    if baseline not in results:
        raise ValueError(f"baseline {baseline!r} is not one of the variants ({', '.join(results)})")
    rows = []
    for label, runs in results.items():
        row: dict = {"variant": label, "seeds": len(runs),
                     "evictions": statistics.fmean(r.get("preemptions", 0) for r in runs)}
        for key, _ in METRICS:
            row[key] = statistics.fmean(r[key] for r in runs)
            if label != baseline:
                d = paired_difference([r[key] for r in results[baseline]], [r[key] for r in runs])
                row[f"d_{key}"], row[f"d_{key}_ci"], row[f"{key}_wins"] = d.mean, (d.low, d.high), d.wins
        rows.append(row)
    return rows


def markdown(rows: list[dict], baseline: str, seeds: int, jobs: int, seconds: float) -> str:
    """The table as docs print it."""
    head = ("| variant | mean JCT s | p95 JCT s | evictions | Δ mean JCT vs "
            f"{baseline} s [95 % CI] | wins | Δ p95 JCT vs {baseline} s [95 % CI] | wins |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [r["variant"], f"{r['avg_jct']:,.0f}", f"{r['p95_jct']:,.0f}", f"{r['evictions']:,.1f}"]
        for key, _ in METRICS:
            if f"d_{key}" in r:
                lo, hi = r[f"d_{key}_ci"]
                cells += [f"{r[f'd_{key}']:+,.0f} [{lo:+,.0f}, {hi:+,.0f}]", f"{r[f'{key}_wins']}/{r['seeds']}"]
            else:
                cells += ["(baseline)", ""]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Built-in workload, {jobs:,} jobs, seeds 0-{seeds - 1}; {seconds:.0f} s to run.")
    return "\n".join(lines)


def experiment(seeds: int = 10, jobs: int = 4000, baseline: str = BASELINE,
               variants: tuple[Variant, ...] = DEFAULT_VARIANTS, say: Say | None = None) -> dict:
    """Run every variant on every seed and tabulate; ``markdown`` holds the docs table."""
    labels = [v.label for v in variants]
    if baseline not in labels:
        raise ValueError(f"--baseline {baseline!r} is not one of the variants ({', '.join(labels)})")
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    t0 = time.perf_counter()
    results = run_variants(seeds, jobs, variants, say)
    rows = table(results, baseline)
    seconds = time.perf_counter() - t0
    return {"rows": rows, "baseline": baseline, "seeds": seeds, "jobs": jobs, "seconds": seconds,
            "guards": GUARDS, "markdown": markdown(rows, baseline, seeds, jobs, seconds)}
