"""Small event-driven loop for the topology experiments (Sec. 5).

Jobs arrive, wait in a queue ordered by arrival (Alg. 1), start when the placer places them
and finish when their work -- the solo time, consumed at a placement- and interference-
dependent rate (:mod:`dlsched.topology.effects`) -- is done. Rates of every job on a machine
are recomputed whenever that machine's set of running jobs changes. Finish times live in a
heap with per-job versions, so a rate change costs O(log n).

Queue discipline: FCFS is a strict FIFO (the head blocks). The others scan the queue in
arrival order and place whatever they can (Alg. 1: a job that cannot be placed is postponed
to the next iteration). Within one scan, a job type that failed is not retried: a placement
only takes resources and adds co-runners, so it cannot make a failed type feasible.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from dlsched.topology.effects import bits, interference_factor, placement_factor
from dlsched.topology.graph import MachineGraph
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.placer import Placer, make_placer
from dlsched.topology.state import ClusterState

POLICIES = ("fcfs", "best-fit", "topo-aware", "topo-aware-p")


@dataclass(slots=True)
class JobRun:
    """Outcome of one job under one policy."""

    profile: JobProfile
    start: float = math.nan
    end: float = math.nan
    placement: tuple[tuple[int, int], ...] = ()
    utility: float = math.nan
    placement_factor: float = 1.0
    postponements: int = 0
    # live state
    remaining: float = 0.0
    rate: float = 1.0
    t_upd: float = 0.0
    version: int = 0

    @property
    def wait(self) -> float:
        return self.start - self.profile.arrival

    @property
    def exec_time(self) -> float:
        return self.end - self.start

    @property
    def slowdown(self) -> float:
        """Execution time over the solo time on the best placement (Fig. 8e, 10, 11)."""
        return self.exec_time / self.profile.solo_time

    @property
    def slowdown_with_wait(self) -> float:
        """Same, counting the queue wait (Fig. 8f)."""
        return (self.end - self.profile.arrival) / self.profile.solo_time


class Simulation:
    """One policy over one job list on one cluster."""

    def __init__(self, graphs: Sequence[MachineGraph], jobs: Sequence[JobProfile], placer: Placer) -> None:
        self.state = ClusterState(graphs)
        self.placer = placer
        self.jobs = sorted(jobs, key=lambda p: (p.arrival, p.job_id))
        self.runs = {p.job_id: JobRun(p, remaining=p.solo_time) for p in self.jobs}
        self.queues: dict[tuple, deque] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.now = 0.0
        self.decision_count = 0

    # --- queue -------------------------------------------------------------------------
    def _enqueue(self, p: JobProfile) -> None:
        key = (p.type_key, p.min_utility, p.single_node)
        self.queues.setdefault(key, deque()).append(p)

    def _schedule(self) -> set[int]:
        """One pass of Alg. 1; returns the machines whose job set changed."""
        touched: set[int] = set()
        heads = [(q[0].arrival, q[0].job_id, key) for key, q in self.queues.items() if q]
        heapq.heapify(heads)
        while heads and any(self.state.free):
            _, _, key = heapq.heappop(heads)
            q = self.queues[key]
            p = q[0]
            d = self.placer.decide(self.state, p)
            self.decision_count += 1
            if not d.placed:
                if d.postponed:
                    self.runs[p.job_id].postponements += 1
                if self.placer.strict_fifo:
                    break
                continue
            q.popleft()
            self._start(p, d.placement, d.utility)
            touched.update(m for m, _ in d.placement)
            if q:
                heapq.heappush(heads, (q[0].arrival, q[0].job_id, key))
        return touched

    # --- execution ---------------------------------------------------------------------
    def _start(self, p: JobProfile, placement, u: float) -> None:
        self.state.allocate(p, placement)
        r = self.runs[p.job_id]
        r.start = self.now
        r.placement = tuple(placement)
        r.utility = u
        r.placement_factor = placement_factor(p, placement, self.state.graphs)
        r.t_upd = self.now
        r.rate = 0.0

    def _rerate(self, machines: set[int]) -> None:
        st = self.state
        for co in st.co_runners(sorted(machines)):
            r = self.runs[co.profile.job_id]
            others = [o.profile for o in st.co_runners([m for m, _ in co.placement])
                      if o is not co and o.footprint & co.footprint]
            rate = 1.0 / (r.placement_factor * interference_factor(co.profile, others))
            if rate == r.rate:
                continue
            r.remaining -= (self.now - r.t_upd) * r.rate
            r.t_upd = self.now
            r.rate = rate
            r.version += 1
            heapq.heappush(self.heap, (self.now + max(0.0, r.remaining) / rate, r.version, co.profile.job_id))

    def run(self) -> list[JobRun]:
        arrivals = deque(self.jobs)
        while arrivals or self.heap:
            # drop stale finish entries
            while self.heap and self.heap[0][1] != self.runs[self.heap[0][2]].version:
                heapq.heappop(self.heap)
            t_fin = self.heap[0][0] if self.heap else math.inf
            t_arr = arrivals[0].arrival if arrivals else math.inf
            if t_fin == math.inf and t_arr == math.inf:
                break
            self.now = min(t_fin, t_arr)
            touched: set[int] = set()
            while self.heap and self.heap[0][0] <= self.now + 1e-9:
                _, ver, jid = heapq.heappop(self.heap)
                r = self.runs[jid]
                if ver != r.version:
                    continue
                r.end = self.now
                r.remaining = 0.0
                r.version += 1
                rel = self.state.release(jid)
                touched.update(m for m, _ in rel.placement)
            while arrivals and arrivals[0].arrival <= self.now + 1e-9:
                self._enqueue(arrivals.popleft())
            touched |= self._schedule()
            if touched:
                self._rerate(touched)
        unplaced = [j for j, r in self.runs.items() if math.isnan(r.end)]
        if unplaced:
            raise RuntimeError(f"{len(unplaced)} jobs never ran (e.g. {unplaced[0]}): they do not fit the cluster")
        return [self.runs[p.job_id] for p in self.jobs]


def simulate(graphs: Sequence[MachineGraph], jobs: Sequence[JobProfile], policy: str | Placer) -> list[JobRun]:
    placer = make_placer(policy) if isinstance(policy, str) else policy
    return Simulation(graphs, jobs, placer).run()


def summarize(runs: Sequence[JobRun]) -> dict:
    """Per-policy figures: cumulative execution time, slowdowns, waits, SLO violations."""
    import numpy as np

    exec_t = np.array([r.exec_time for r in runs])
    waits = np.array([r.wait for r in runs])
    slow = np.array([r.slowdown for r in runs])
    first = min(r.profile.arrival for r in runs)
    return {
        "jobs": len(runs),
        "cumulative_time": round(float(exec_t.sum()), 3),
        "makespan": round(max(r.end for r in runs) - first, 3),
        "total_response_time": round(float(sum(r.end - r.profile.arrival for r in runs)), 3),
        "slowdown": round(float(slow.mean()), 4),
        "slowdown_max": round(float(slow.max()), 4),
        "slowdown_with_wait": round(float(np.mean([r.slowdown_with_wait for r in runs])), 4),
        "jobs_slowed_over_5pct": int((slow > 1.05).sum()),
        "mean_wait": round(float(waits.mean()), 3),
        "p95_wait": round(float(np.percentile(waits, 95)), 3),
        "max_wait": round(float(waits.max()), 3),
        "slo_violations": int(sum(r.slowdown > r.profile.slo_slowdown + 1e-9 for r in runs)),
        "placed_below_min_utility": int(sum(r.utility < r.profile.min_utility - 1e-9 for r in runs)),
        "postponements": int(sum(r.postponements for r in runs)),
    }


def timeline_rows(policy: str, runs: Sequence[JobRun]) -> list[dict]:
    """Fig. 8 (a)-(d): which GPUs each job held and when."""
    rows = []
    for r in runs:
        gpus = ";".join(f"M{m}:GPU{g}" for m, mask in r.placement for g in bits(mask))
        rows.append({
            "policy": policy, "job": r.profile.job_id, "model": r.profile.model,
            "batch": r.profile.batch_size, "gpus_requested": r.profile.gpus,
            "arrival": round(r.profile.arrival, 3), "start": round(r.start, 3), "end": round(r.end, 3),
            "wait": round(r.wait, 3), "exec_time": round(r.exec_time, 3), "solo_time": r.profile.solo_time,
            "slowdown": round(r.slowdown, 4), "placement_factor": round(r.placement_factor, 4),
            "utility": round(r.utility, 4), "postponements": r.postponements, "gpus": gpus,
        })
    return rows
