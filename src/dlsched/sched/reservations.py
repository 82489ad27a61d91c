"""Runtime estimates and the record of reservations, shared by the ``easy`` and ``conservative`` policies.

A reservation is the start time a backfilling policy promises a waiting job: later jobs may start
ahead of it only when they do not push it back (docs/backfill.md). Both need a run time for every
running and waiting job; :class:`Estimates` gives it from what a policy may read:

* ``limit``: the user's time limit (``job.time_limit_s``; a job without one: unknown, inf);
* ``prediction``: QSSF's online estimate (``job.pred_duration``, learnt from finished jobs only);
* ``capped``: the prediction, capped by the limit where there is one;
* ``truth``: the true duration, through the oracle's view (a declared oracle, refused live).

A running job that has outlived its estimate is either taken to end now (``correction=off``: the
estimate says nothing more) or corrected as in EASY++ (Tsafrir, Etsion and Feitelson 2007):
``double`` doubles the estimate until it lies ahead, ``limit`` moves it to the job's time limit
(doubling where there is none or it has passed too). Reservations are recomputed at every pass,
so a correction moves them at once.

:class:`ReservationBook` keeps, per job that ever held one, its first and last reserved start and
its actual start: kept when it started no later than first promised, else broken by the
difference. ``summary.json`` gets the counts and ``reservations.csv`` the rows.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from dlsched.core.job import Job

ESTIMATES = ("limit", "prediction", "capped", "truth")
CORRECTIONS = ("off", "double", "limit")
_INF = math.inf
KEPT_SLACK_S = 1e-6   # a start this close after the promise still keeps it (float noise)


class Estimates:
    """A job's estimated run time and a running job's estimated end, per the policy's choice."""

    __slots__ = ("kind", "correction", "corrected", "n_corrected")

    def __init__(self, kind: str, correction: str) -> None:
        if kind not in ESTIMATES:
            raise ValueError(f"--param estimate must be one of {', '.join(ESTIMATES)}, got {kind!r}")
        if correction not in CORRECTIONS:
            raise ValueError(f"--param correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
        self.kind, self.correction = kind, correction
        self.corrected: set[Job] = set()   # running jobs whose estimate a correction replaced
        self.n_corrected = 0               # jobs ever corrected (``corrected`` forgets the ended ones)

    def ended(self, job: Job) -> None:
        """The job ended: the set of corrected jobs forgets it (bounded in a long-running service)."""
        self.corrected.discard(job)

    def clear(self) -> None:
        self.corrected.clear()
        self.n_corrected = 0

    def run_time(self, job: Job, view) -> float:
        """Estimated seconds from start to end (inf: unknown)."""
        kind = self.kind
        if kind == "truth":
            return view.duration(job)
        limit = job.time_limit_s
        if kind == "limit":
            return _INF if limit is None else limit
        pred = job.pred_duration
        pred = pred if pred == pred else _INF   # noqa: PLR0124 - NaN: nothing predicted
        if kind == "capped" and limit is not None:
            return min(pred, limit)
        return pred

    def end_of(self, job: Job, view, now: float) -> float:
        """A running job's estimated end (>= now), corrected once it has outlived its estimate."""
        start = job.run_since
        est = self.run_time(job, view)
        end = start + est
        if end > now or self.correction == "off":
            return max(end, now)
        if job not in self.corrected:
            self.corrected.add(job)
            self.n_corrected += 1
        limit = job.time_limit_s
        if self.correction == "limit" and limit is not None and start + limit > now:
            return start + limit
        est = max(est, 1.0)
        while start + est <= now:
            est *= 2.0
        if limit is not None and start + limit > now:
            est = min(est, limit)
        return start + est


class ReservationBook:
    """Per job: first and last reserved start, when the reservation was first made, actual start;
    and per VC the reservations its latest pass made (``current``: what the live service shows
    as a waiting job's ETA and why another waits; a pass of the VC replaces them).

    In the simulator every record is kept (``reservations.csv`` has a row per job). A
    long-running service bounds them (:meth:`bound`): a started job's record is folded into the
    totals that :meth:`summary` reports and only the last ``keep`` started ones stay as rows; a
    record of a job that left without starting (its pod deleted) is dropped at the next pass of
    its VC that finds it no longer waiting (counted in ``withdrawn``)."""

    __slots__ = ("records", "backfilled", "current", "keep", "withdrawn", "stopped", "_started", "_folded",
                 "_open")

    def __init__(self) -> None:
        self.records: dict[Job, list[float]] = {}   # job -> [first, last, made at, started (nan: not yet)]
        self.backfilled = 0                         # starts ahead of a waiting job that held a reservation
        self.stopped = 0                            # backfilled jobs stopped at a reservation (on_overrun=stop)
        self.current: dict[int, dict[Job, float]] = {}   # vid -> job -> reserved start, from its latest pass
        self.keep: int | None = None   # started records kept as rows (None: all, the simulator)
        self.withdrawn = 0             # records dropped: the job left without starting (bounded book only)
        self._started: dict[Job, None] = {}   # bounded book: started records, oldest first
        self._folded = [0, 0, 0.0, 0.0]       # records folded away: started, broken, sum and max of delays
        self._open: dict[int, dict[Job, None]] = {}   # bounded book: vid -> jobs with a record, not started

    def bound(self, keep: int) -> None:
        """Keep at most ``keep`` started records as rows (the live service); totals stay exact."""
        if keep < 0:
            raise ValueError(f"a reservation book keeps >= 0 started records, got {keep}")
        self.keep = keep

    def clear(self) -> None:
        self.records.clear()
        self.backfilled = 0
        self.stopped = 0
        self.current.clear()
        self.withdrawn = 0
        self._started.clear()
        self._folded = [0, 0, 0.0, 0.0]
        self._open.clear()

    def begin(self, vid: int) -> None:
        """A pass of VC ``vid`` begins: its earlier reservations are void (it makes them afresh)."""
        self.current.pop(vid, None)

    def waiting(self, vid: int, queue) -> None:
        """A bounded book, at a pass of VC ``vid`` over its waiting ``queue``: the VC's records of
        jobs that never started and no longer wait (withdrawn) are dropped. The simulator, whose
        jobs never leave unstarted, does not call it."""
        unstarted = self._open.get(vid)
        if not unstarted:
            return
        waiting = set(queue)
        for job in [j for j in unstarted if j not in waiting]:
            del unstarted[job]
            del self.records[job]
            self.withdrawn += 1

    def reserve(self, job: Job, start: float, now: float) -> None:
        record = self.records.get(job)
        vid = job.vc_state.vid
        if record is None:
            self.records[job] = [start, start, now, math.nan]
            if self.keep is not None:
                self._open.setdefault(vid, {})[job] = None
        else:
            record[1] = start
        held = self.current.get(vid)
        if held is None:
            held = self.current[vid] = {}
        held[job] = start

    def started(self, job: Job, now: float) -> None:
        record = self.records.get(job)
        if record is not None:
            record[3] = now
            held = self.current.get(job.vc_state.vid)
            if held:
                held.pop(job, None)
            if self.keep is not None:
                self._open.get(job.vc_state.vid, {}).pop(job, None)
                self._keep_started(job)

    def _keep_started(self, job: Job) -> None:
        started = self._started
        started.pop(job, None)   # started again (an assumed start undone, then redone): newest
        started[job] = None
        while len(started) > self.keep:
            old = next(iter(started))
            del started[old]
            first, _, _, start = self.records.pop(old)
            folded = self._folded
            folded[0] += 1
            if start > first + KEPT_SLACK_S:
                folded[1] += 1
                folded[2] += start - first
                folded[3] = max(folded[3], start - first)

    def reserved(self, job: Job) -> float | None:
        """The start the latest pass of the job's VC reserved for it (None: none)."""
        vc = job.vc_state
        held = self.current.get(vc.vid) if vc is not None else None
        return held.get(job) if held else None

    def summary(self, corrected: int = 0) -> dict:
        """Counts for ``summary.json``: made, kept, broken, the broken ones' delays, backfills
        (the records folded away by a bounded book included)."""
        delays = [r[3] - r[0] for r in self.records.values() if r[3] == r[3] and r[3] > r[0] + KEPT_SLACK_S]
        started = sum(1 for r in self.records.values() if r[3] == r[3])
        n_folded, broken_folded, sum_folded, max_folded = self._folded
        broken = len(delays) + broken_folded
        started += n_folded
        made = len(self.records) + n_folded + self.withdrawn
        out = {"made": made, "kept": started - broken, "broken": broken,
               "mean_delay_broken_s": (sum(delays) + sum_folded) / broken if broken else 0.0,
               "max_delay_broken_s": max(max(delays, default=0.0), max_folded), "backfilled_jobs": self.backfilled,
               "estimates_corrected": corrected}
        if self.stopped:
            out["overruns_stopped"] = self.stopped
        if self.keep is not None:
            out["withdrawn"] = self.withdrawn
        return out

    def write(self, path: str | Path) -> None:
        """``reservations.csv``: one row per job that held a reservation, in order of the first one."""
        rows = sorted(self.records.items(), key=lambda kv: (kv[1][2], kv[0].index))
        with open(path, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(["job_id", "vc", "gpus", "submit_time", "reserved_at", "first_reserved_start",
                          "last_reserved_start", "start_time", "kept", "delay_s"])
            for job, (first, last, made, start) in rows:
                ran = start == start
                delay = max(0.0, start - first) if ran else math.nan
                kept = "" if not ran else ("yes" if delay <= KEPT_SLACK_S else "no")
                out.writerow([job.job_id, job.vc, job.gpus, repr(job.submit_time), repr(made), repr(first),
                              repr(last), repr(start) if ran else "", kept, repr(delay) if ran else ""])
