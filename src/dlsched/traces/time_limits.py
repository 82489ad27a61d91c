"""User-style time limits for traces that have none (``--time-limits overestimate=2,round=3600``).

Helios and Philly record no maximum runtime, but reservation policies (docs/backfill.md) read one
as their estimate. Users' limits are known to be poor estimates: they overestimate, and they round
up to round numbers (Tsafrir, Etsion and Feitelson 2007). This draws such a limit from a job's
true duration: ``ceil(duration x factor / round) x round`` (at least ``round``), where ``factor``
is ``overestimate`` (a number) or drawn log-uniformly per job from ``overestimate=LO:HI``;
``share`` is the fraction of jobs that get a limit at all (drawn per job). Every draw comes from
one generator seeded by ``seed``, one draw per job in trace order, so a run is reproducible and a
job's draw does not depend on which others have limits. A job that already has a limit keeps it;
nothing is given silently: :class:`LimitCounts` says how many jobs got one, kept theirs, have none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlsched.core import truth
from dlsched.core.job import Job


@dataclass(frozen=True, slots=True)
class TimeLimitSpec:
    """How limits are drawn: the overestimate factor (or its log-uniform range), the rounding, the share."""

    low: float = 2.0        # overestimate factor (low == high: a fixed factor)
    high: float = 2.0
    round_s: float = 3600.0  # limits are rounded up to a multiple of this many seconds
    share: float = 1.0       # fraction of jobs that get a limit

    def describe(self) -> str:
        factor = f"{self.low:g}" if self.low == self.high else f"{self.low:g}..{self.high:g} (log-uniform)"
        share = "" if self.share == 1 else f", {self.share:.0%} of jobs"
        return f"true duration x {factor}, rounded up to {self.round_s:,.0f} s{share}"


@dataclass(frozen=True, slots=True)
class LimitCounts:
    """What :func:`apply_time_limits` did, job by job."""

    given: int     # jobs that got a drawn limit
    kept: int      # jobs whose own limit was kept
    without: int   # jobs left without a limit (share < 1)


_KEYS = ("overestimate", "round", "share")


def parse_time_limits(text: str) -> TimeLimitSpec:
    """``overestimate=F|LO:HI,round=S,share=P`` (every key optional) -> the spec; ValueError
    names the key and the value that is wrong."""
    values: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise ValueError(f"--time-limits: {part!r} is not KEY=VALUE with KEY one of {', '.join(_KEYS)}")
        if key in values:
            raise ValueError(f"--time-limits: {key} is given twice")
        values[key] = value.strip()
    low = high = 2.0
    if "overestimate" in values:
        lo, _, hi = values["overestimate"].partition(":")
        low, high = _number("overestimate", lo), _number("overestimate", hi or lo)
        if not 1 <= low <= high:
            raise ValueError(f"--time-limits: overestimate must be >= 1 (LO:HI with LO <= HI), "
                             f"got {values['overestimate']!r}")
    round_s = _number("round", values.get("round", "3600"))
    if not round_s > 0:
        raise ValueError(f"--time-limits: round must be > 0 seconds, got {values['round']!r}")
    share = _number("share", values.get("share", "1"))
    if not 0 < share <= 1:
        raise ValueError(f"--time-limits: share must be in (0, 1], got {values['share']!r}")
    return TimeLimitSpec(low, high, round_s, share)


def _number(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--time-limits: {key} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"--time-limits: {key} must be a finite number, got {text!r}")
    return value


def apply_time_limits(jobs: list[Job], spec: TimeLimitSpec, seed: int) -> LimitCounts:
    """Give each job without a limit one drawn by ``spec`` (see the module docstring)."""
    rng = np.random.default_rng([seed, 0x7117])   # a stream of its own: the workload's draws are unchanged
    n = len(jobs)
    factors = np.exp(rng.uniform(math.log(spec.low), math.log(spec.high), n)) if spec.high > spec.low \
        else np.full(n, spec.low)
    chosen = rng.random(n) < spec.share
    given = kept = without = 0
    step = spec.round_s
    for job, factor, take in zip(jobs, factors.tolist(), chosen.tolist()):
        if job.time_limit_s is not None:
            kept += 1
        elif not take:
            without += 1
        else:
            job.time_limit_s = max(step, math.ceil(truth.duration(job) * factor / step - 1e-9) * step)
            given += 1
    return LimitCounts(given, kept, without)


def note(counts: LimitCounts, spec: TimeLimitSpec) -> str:
    """The one line a command prints about what :func:`apply_time_limits` did."""
    total = counts.given + counts.kept + counts.without
    line = f"note: --time-limits gave {counts.given:,} of {total:,} jobs a limit ({spec.describe()})"
    if counts.kept:
        line += f"; {counts.kept:,} kept the trace's own"
    if counts.without:
        line += f"; {counts.without:,} have none"
    return line
