"""Pairs a profile table should not be trusted on as they stand: those whose combined throughput is
below time slicing (``1/s(a|b) + 1/s(b|a) < 1``: the two jobs together do less work than if the GPU
simply alternated between them), and the documented rule the truths apply to them.

The rule (:func:`cap_at_time_slicing`): such a pair is scaled to time slicing. Each side's
normalised throughput is divided by the pair's combined throughput, so the pair delivers exactly
1 and keeps its asymmetry (``s' = s x combined``, still >= 1). A GPU driver can always fall back
to plain time slicing, and Gavel's pairs were measured under CUDA MPS, where a few (notably
the V100 Recommendation rows, whose isolated throughput is inconsistent: ``docs/sharing-policies.md``)
come out far worse than that. Nothing is dropped: every changed pair is listed.

Entries equal to the isolated throughput (:func:`equal_to_isolated`, ``s = 1.000`` exactly: 80 of
the built-in table's 636 V100 entries, 70 of them with ResNet-18 as the first job) are flagged and
used as measured (:data:`ISOLATED_RULE`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.models.colocation_table import ColocationTable

TOLERANCE = 1e-9  # a capped pair sums to 1 up to rounding


@dataclass(frozen=True)
class PairIssue:
    """One pair below time slicing: GPU type, the two type ids, both slowdowns, combined throughput."""

    gpu: str
    a: str
    b: str
    s_a: float
    s_b: float

    @property
    def combined(self) -> float:
        return 1.0 / self.s_a + 1.0 / self.s_b


def below_time_slicing(table: ColocationTable, gpu: str | None = None) -> list[PairIssue]:
    """Every measured pair (both orders known) whose combined throughput is below 1, worst first."""
    out: list[PairIssue] = []
    for g, pairs in table.pairs.items():
        if gpu is not None and g != gpu:
            continue
        for (i, j), s_i in pairs.items():
            s_j = pairs.get((j, i))
            if i > j or s_j is None:
                continue
            if 1.0 / s_i + 1.0 / s_j < 1.0 - TOLERANCE:
                out.append(PairIssue(g, table.types[i].type_id, table.types[j].type_id, s_i, s_j))
    out.sort(key=lambda p: p.combined)
    return out


def cap_at_time_slicing(table: ColocationTable) -> tuple[ColocationTable, list[PairIssue]]:
    """A copy of ``table`` with every pair below time slicing scaled to it, and the pairs changed."""
    issues: list[PairIssue] = []
    new_pairs: dict[str, dict[tuple[int, int], float]] = {}
    for g, pairs in table.pairs.items():
        fixed = dict(pairs)
        for (i, j), s_i in pairs.items():
            s_j = pairs.get((j, i))
            if i > j or s_j is None:
                continue
            combined = 1.0 / s_i + 1.0 / s_j
            if combined < 1.0 - TOLERANCE:
                issues.append(PairIssue(g, table.types[i].type_id, table.types[j].type_id, s_i, s_j))
                fixed[(i, j)] = max(1.0, s_i * combined)
                fixed[(j, i)] = max(1.0, s_j * combined)
        new_pairs[g] = fixed
    issues.sort(key=lambda p: p.combined)
    return ColocationTable(table.name, list(table.types), new_pairs, table.default_gpu), issues


def combined_throughputs(table: ColocationTable, gpu: str) -> list[float]:
    """Combined throughput of every measured unordered pair on ``gpu`` (for the median the docs quote)."""
    pairs = table.pairs.get(gpu, {})
    return [1.0 / s + 1.0 / pairs[(j, i)] for (i, j), s in pairs.items() if i <= j and (j, i) in pairs]


@dataclass(frozen=True)
class IsolatedEntry:
    """A pair entry equal to the isolated throughput (``s(a|b) = 1.000`` exactly), and its partner's."""

    gpu: str
    a: str
    b: str
    s_b: float | None  # the partner's slowdown beside ``a`` (None when that order is not measured)


ISOLATED_RULE = ("entries equal to the isolated throughput (s = 1.000 exactly, most likely a throughput clipped "
                 "at the isolated one) are used as measured: no slowdown for that job beside that partner, the "
                 "partner's own entry unchanged; nothing re-estimates them")


def equal_to_isolated(table: ColocationTable, gpu: str | None = None) -> list[IsolatedEntry]:
    """Every ordered pair entry of exactly 1.000 (the job ran as fast as alone beside its partner),
    by GPU type and first job. A real co-runner almost never costs nothing, so these are flagged,
    not trusted silently; the simulator's use of them is :data:`ISOLATED_RULE`."""
    out = []
    for g, pairs in table.pairs.items():
        if gpu is not None and g != gpu:
            continue
        for (i, j), s in sorted(pairs.items(), key=lambda kv: (table.types[kv[0][0]].type_id,
                                                               table.types[kv[0][1]].type_id)):
            if s == 1.0:
                out.append(IsolatedEntry(g, table.types[i].type_id, table.types[j].type_id, pairs.get((j, i))))
    return out


def util_slowdown_rho(table: ColocationTable, gpu: str) -> tuple[float, int]:
    """Spearman's rank correlation between a pair entry's summed isolated utilisation (job +
    partner, on ``gpu``) and the job's slowdown, over the ordered entries; and their count. It
    measures how far "a pair's slowdown follows the summed utilisation" holds on this table."""
    from scipy.stats import spearmanr

    xs, ys = [], []
    for (i, j), s in table.pairs.get(gpu, {}).items():
        u, v = table.types[i].gpu_util.get(gpu), table.types[j].gpu_util.get(gpu)
        if u is not None and v is not None:
            xs.append(u + v)
            ys.append(s)
    if len(xs) < 3:
        return float("nan"), len(xs)
    return float(spearmanr(xs, ys).statistic), len(xs)
