"""EASY and conservative backfill with user limits, predictions, predictions + correction and the
truth (``dlsched experiment backfill``), beside the findings of Tsafrir, Etsion & Feitelson,
"Backfilling using system-generated predictions rather than user runtime estimates", IEEE TPDS
18(6), 2007 (EASY++). The paper's findings are qualitative here: its figures are on HPC traces
(CTC, KTH, SDSC, BLUE) with the users' own estimates, so the direction is what compares.

``seeds``, ``jobs`` and ``nodes`` are constructor options so that tests run a tiny case through
the same code; the registry holds the defaults the docs quote.
"""

from __future__ import annotations

import copy
import math

from dlsched.reproduce.base import NA, Context, Reproduction, Table
from dlsched.reproduce.helios_fidelity import TRACE

PAPER = ('Tsafrir, Etsion & Feitelson, "Backfilling using system-generated predictions rather than user runtime '
         'estimates", IEEE TPDS 18(6), 2007 (EASY++)')
# (a, b, the paper's finding, the sign it implies for a - b: -1 lower, 0 no direction claimed)
FINDINGS: tuple[tuple[str, str, str, int], ...] = (
    ("easy-pred+corr", "easy-limit", "EASY++ beats EASY on user estimates", -1),
    ("easy-truth", "easy-pred+corr", "accurate estimates help", -1),
    ("easy-pred+corr", "easy-pred", "correct short predictions (no speed claim)", 0),
)
METRIC_HEADS = (("bsld", "mean bounded slowdown", 2), ("avg_jct", "mean JCT s", 0))


def _verdict(low: float, high: float, sign: int) -> str:
    if math.isnan(low):
        return "one seed: no CI"
    said = "lower" if high < 0 else "higher" if low > 0 else "tied"
    if sign == 0:
        return said
    return said + (" (agrees)" if (sign < 0 and said == "lower") else " (differs)" if said == "higher" else "")


class Backfill(Reproduction):
    name = "backfill"
    title = "EASY / conservative backfill with limits, predictions, predictions + correction, truth (built-in)"
    paper = PAPER + ", findings (qualitative)"
    command = "dlsched experiment backfill --seeds 10 --jobs 2000 --nodes 32"

    def __init__(self, seeds: int = 10, jobs: int = 2000, nodes: int = 32) -> None:
        self.seeds, self.jobs, self.nodes = seeds, jobs, nodes

    uses_truth = False   # --profiles does not apply (the CLI says so)

    def configured(self, seeds: int | None = None, truth: str | None = None) -> Backfill:
        """A copy with other seeds (``dlsched reproduce --seeds N``); ``truth`` does not apply."""
        other = copy.copy(self)
        if seeds is not None:
            from dlsched.experiments.protocol import check_seeds

            check_seeds(seeds)
            other.seeds = seeds
        return other

    def _experiment(self, ctx: Context) -> dict:
        from dlsched.experiments.dlsched.backfill import experiment

        return experiment(self.seeds, self.jobs, nodes=self.nodes)

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        from dlsched.experiments.dlsched.backfill import METRICS, means, pairs

        res = self._experiment(ctx)
        results = res["results"]
        rows = [[r["variant"], *[round(r[k], 4 if k == "utilization" else 2 if k == "bsld" else 1 if k == "broken"
                                       else 0) for k, _, _ in METRICS]] for r in means(results)]
        where = (f"{res['jobs']:,} jobs on one pool of {res['nodes']} x 8 GPUs, {self.seeds} seeds, limits "
                 f"`{res['limits']}`")
        table = Table(f"every variant, means over the seeds ({where})", ["variant", *[t for _, t, _ in METRICS]],
                      rows, note="fifo+greedy: a later job starts whenever it fits (no reservation)")
        compared = {(p["a"], p["b"]): p for p in pairs(results)}
        level = len(compared) * 4
        found = []
        for a, b, claim, sign in FINDINGS:
            p = compared[(a, b)]
            cells: list[object] = [f"{a} - {b}", claim]
            for key, _, digits in METRIC_HEADS:
                d = p[key]
                cells += [round(d["diff"], digits),
                          NA if math.isnan(d["low"]) else f"{d['low']:+.{digits}f} .. {d['high']:+.{digits}f}",
                          _verdict(d["low"], d["high"], sign)]
            found.append(cells)
        heads = ["a - b", "paper's finding"]
        for _, title, _ in METRIC_HEADS:
            heads += [f"Δ {title}", "CI", "dlsched"]
        findings = Table("the paper's findings beside ours, paired per seed", heads, found,
                         note=f"CIs Bonferroni-corrected over the experiment's {level} differences (family-wise 95 %); "
                              "'agrees' / 'differs': the corrected CI excludes 0 on the side the paper found")
        pair_rows = [[f"{p['a']} - {p['b']}", *[round(p[k]["diff"], 2) for k in ("avg_jct", "p95_jct", "bsld",
                                                                                  "max_wait_large")]]
                     for p in compared.values()]
        pair_table = Table("every compared pair (means of the per-seed differences a - b; CIs: --markdown of the "
                           "experiment)", ["a - b", "Δ mean JCT s", "Δ p95 JCT s", "Δ bounded slowdown",
                                           "Δ max wait >= 8 GPUs s"], pair_rows)
        notes = [f"computed in {res['seconds']:.1f} s",
                 "The paper (abstract): system predictions, killed at the user's estimate and corrected adaptively "
                 "when proved short, give significant improvements in performance, predictability and accuracy over "
                 "EASY on user estimates; that inaccuracy improves backfilling is a misconception it resolves.",
                 "The paper's predictor averages the user's last two runtimes and its EASY++ also backfills "
                 "shortest-predicted-first (SJBF); dlsched predicts with QSSF's online estimator (finished jobs only) "
                 "and backfills in queue order, and its 'limits' are drawn (docs/backfill.md), not users' own.",
                 "'reservations broken' counts reservations that moved because an estimate ran short: where ours "
                 "differs from the paper, compare it between the pred and limit rows (docs/backfill.md)."]
        return [findings, table, pair_table], notes


class BackfillPhilly(Backfill):
    name = "backfill-philly"
    title = "The backfill comparison on Philly's first 1,000 jobs (reference window), drawn limits per seed"
    command = ("dlsched experiment backfill --philly $REF/input_cluster_log_helios_format.csv.gz --seeds 10 "
               "--jobs 1000 --nodes 16")
    needs = (TRACE,)

    def __init__(self, seeds: int = 10, jobs: int = 1000, nodes: int = 16) -> None:
        # a slice: the first 2,000 jobs on 32 nodes took 383 s per seed (10 variants) on the shared
        # 2-core machine; the first 500 on 32 nodes barely queue. --jobs 0 runs all 68,503.
        super().__init__(seeds, jobs, nodes)

    def _experiment(self, ctx: Context) -> dict:
        from dlsched.experiments.dlsched.backfill import experiment

        return experiment(self.seeds, self.jobs, nodes=self.nodes, philly=ctx.data(TRACE))
