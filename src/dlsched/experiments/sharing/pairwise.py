"""Between-policy comparisons of a sharing table, and the seed count the protocol chooses.

Every policy a table ranks (every row but the no-sharing baseline) is compared with every other,
paired by seed, on its per-seed gain over the baseline (``g = (base - x) / base``; a difference
of +0.02 is 2 points more gain for ``a``), with Bonferroni-corrected CIs
(:func:`dlsched.metrics.paired.pairwise_paired`): "tied" where the corrected CI spans 0.

**Seed rule** (:func:`run_with_seed_rule`). A table runs ``DEFAULT_SEEDS`` (10) seeds. A pair is
*close* when it is tied at those seeds but would separate, at the observed mean difference and
spread, within ``max_seeds`` (30 by default) seeds (:func:`dlsched.metrics.paired.replicates_needed`
at the corrected level). Then every policy is run on the further seeds up to the largest such
count (seeds stay paired), once, and every pair is judged again on all the seeds. A pair still
tied is printed "tied" with its estimate of the seeds it would need (or "> max" when beyond).
Runs with fewer seeds than ``DEFAULT_SEEDS`` are quick looks and never extended. The extension
is decided from the first seeds' data, a second look the Bonferroni level does not pay for: a
verdict that appears only after the extension is the weaker kind, and the result says which
pairs were extended.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dlsched.experiments.protocol import DEFAULT_SEEDS
from dlsched.experiments.sharing.run import RunResult
from dlsched.metrics.paired import CORRECTION, pairwise_paired, replicates_needed

MAX_SEEDS = 30

Runs = dict[str, list[RunResult]]


def seed_gains(runs: Runs, base: str, key: str) -> dict[str, list[float]]:
    """Per ranked label (every label but ``base``): its per-seed gains over ``base`` on ``key``."""
    ref = [r.metrics[key] for r in runs[base]]
    return {label: [(b - r.metrics[key]) / b if b else math.nan for b, r in zip(ref, rs)]
            for label, rs in runs.items() if label != base}


def comparisons(runs: Runs, base: str, key: str, max_seeds: int = MAX_SEEDS) -> list[dict]:
    """Every pair of ranked labels: mean difference of gains, corrected CI, verdict, seeds needed."""
    gains = seed_gains(runs, base, key)
    out = []
    for d in pairwise_paired(gains):
        row = d.as_dict()
        need = replicates_needed(gains[d.a], gains[d.b], d.level, limit=max(max_seeds, 1000)) if d.tied else d.n
        row["seeds_needed"] = need
        row["seeds_needed_text"] = (str(need) if need is not None and need <= max_seeds
                                    else f"> {max_seeds}" if d.tied else str(d.n))
        row["correction"] = CORRECTION
        out.append(row)
    return out


def _merge(first: Runs, more: Runs) -> Runs:
    return {label: [*rs, *more.get(label, [])] for label, rs in first.items()}


def run_with_seed_rule(run_seeds: Callable[[list[int]], Runs], seeds: list[int], base: str, key: str,
                       max_seeds: int | None) -> tuple[Runs, list[int], dict]:
    """Run ``seeds``, then extend every policy to more seeds by the seed rule when a pair is close.

    Returns the runs, the seeds run and what the rule did (``seed_rule``: the seeds asked, the
    seeds run, the pairs that asked for more and the limit)."""
    runs = run_seeds(seeds)
    rule = {"seeds_asked": len(seeds), "max_seeds": max_seeds, "extended_for": [], "correction": CORRECTION}
    if max_seeds is None or len(seeds) < DEFAULT_SEEDS or max_seeds <= len(seeds):
        rule["seeds_run"] = len(seeds)
        return runs, seeds, rule
    close = [c for c in comparisons(runs, base, key, max_seeds)
             if c["verdict"] == "tied" and c["seeds_needed"] is not None and len(seeds) < c["seeds_needed"] <= max_seeds]
    if close:
        target = max(c["seeds_needed"] for c in close)
        more = list(range(seeds[-1] + 1, seeds[-1] + 1 + target - len(seeds)))
        runs = _merge(runs, run_seeds(more))
        seeds = [*seeds, *more]
        rule["extended_for"] = [f"{c['a']} / {c['b']} (~{c['seeds_needed']})" for c in close]
    rule["seeds_run"] = len(seeds)
    return runs, seeds, rule


def rule_text(rule: dict) -> str:
    """The seed count beside a table, in words."""
    text = f"{rule['seeds_run']} seeds"
    if rule.get("extended_for"):
        text += (f" (protocol: {rule['seeds_asked']}, extended for the close pair(s) "
                 f"{', '.join(rule['extended_for'])}; limit {rule['max_seeds']})")
    elif rule.get("max_seeds") and rule["seeds_asked"] >= DEFAULT_SEEDS:
        text += f" (protocol: {rule['seeds_asked']}; no tied pair would separate within {rule['max_seeds']} seeds)"
    else:
        text += " (fixed; not extended by the seed rule)"
    return text + f"; between-policy CIs {rule['correction']}-corrected"
