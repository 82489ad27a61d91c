"""Queues with quotas that lend and borrow (Kueue-style cohorts) on top of the VC partition.

Each VC is a leaf queue. Its **guarantee** is its own nodes' GPUs (per GPU type), exactly the
Helios partition; what the queues add is that idle GPUs move between VCs of one cohort:

* **Borrow.** After the ordering policy's passes, a VC whose head job (in the policy's order)
  does not fit on its own nodes may start it on the idle GPUs of another VC of its cohort, found
  by the policy's own placer on the lender's nodes, when ``borrowed + gpus <= borrow_limit`` and
  the lender has no job waiting and ``lent + gpus <= lend_limit``. Only the head borrows: a
  blocked head is not overtaken (the policy's no-backfill rule), and the next head may borrow
  after it.
* **Reclaim.** When a VC's head job does not fit on its own nodes while other VCs' jobs hold
  some of them, and its free GPUs plus those borrowed GPUs would be enough, the most recently
  started borrowing jobs on its nodes are preempted (checkpoint, the run's preemption overhead,
  back to their own queue with their attained service) one by one until the head fits; then the
  VC's policy pass runs again.

With every ``borrow_limit`` 0 the manager is not installed and the run is today's, decision for
decision. The manager is a kernel observer: it integrates per queue the GPU time used, borrowed
and lent, and counts reclaims, for ``summary.json``'s ``per_queue``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dlsched.core.job import Job
from dlsched.kernel.decisions import Status
from dlsched.kernel.state import ClusterState, VcState

_FITS = Status.FITS


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One leaf queue (a VC): GPU limits on what it may borrow and lend (``None``: no limit) and
    its cohort (``parent``): only queues with the same parent lend to each other."""

    name: str
    borrow_limit: int | None = 0
    lend_limit: int | None = None
    parent: str | None = None
    namespaces: tuple[str, ...] = ()   # live service: Kubernetes namespaces whose pods join this VC


def borrowing_possible(specs: Iterable[QueueSpec]) -> bool:
    """True when some queue may borrow from another of its cohort that may lend."""
    specs = list(specs)
    for a in specs:
        if a.borrow_limit == 0:
            continue
        if any(b is not a and b.parent == a.parent and b.lend_limit != 0 for b in specs):
            return True
    return False


def head_of(vc: VcState, now: float) -> Job | None:
    """The job the VC's ordering policy looks at first: the queue's head as its last pass left it
    (a queue that re-sorts itself at each pass is not re-sorted here: its pass has side effects,
    e.g. the Helios QSSF queue's count of this instant's arrivals)."""
    return vc.queue.head()


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has all."""
    sq = sum(x * x for x in values)
    if not values or sq == 0.0:
        return None
    return sum(values) ** 2 / (len(values) * sq)


class QuotaManager:
    """Borrowing and reclaim between VCs, driven by the engine once per instant after its passes."""

    def __init__(self, specs: Iterable[QueueSpec], state: ClusterState) -> None:
        self.state = state
        by_name = {s.name: s for s in specs}
        unknown = sorted(set(by_name) - set(state.vc_index))
        if unknown:
            raise ValueError(f"queue(s) {', '.join(unknown)} name no VC of the cluster")
        # a VC without an entry keeps its guarantee and neither borrows nor lends
        self.specs = [by_name.get(vc.name, QueueSpec(vc.name, 0, 0)) for vc in state.vcs]
        self.borrowed = [0] * len(state.vcs)   # GPUs the VC's jobs hold on other VCs' nodes now
        self.lent = [0] * len(state.vcs)       # GPUs of the VC's nodes held by other VCs' jobs now
        self.used_area = [0.0] * len(state.vcs)      # GPU-seconds run by the VC's jobs (anywhere)
        self.borrowed_area = [0.0] * len(state.vcs)  # ... of them on other VCs' nodes
        self.lent_area = [0.0] * len(state.vcs)      # GPU-seconds other VCs' jobs ran on its nodes
        self.reclaimed = [0] * len(state.vcs)   # the VC's borrowing jobs preempted by a reclaim
        self.reclaims = [0] * len(state.vcs)    # preemptions the VC triggered to get its GPUs back
        self.borrow_starts = [0] * len(state.vcs)
        self._since: dict[Job, tuple[float, int]] = {}  # running job -> (start, host vid or -1)
        self._in_system = [0] * len(state.vcs)      # the VC's jobs submitted and not finished
        self._active_since = [0.0] * len(state.vcs)
        self.active_time = [0.0] * len(state.vcs)   # seconds with >= 1 job waiting or running
        state.add_observer(self)

    # -- observer: GPU time per queue ------------------------------------------------------
    def submitted(self, job: Job, vc: VcState, now: float) -> None:
        if not self._in_system[vc.vid]:
            self._active_since[vc.vid] = now
        self._in_system[vc.vid] += 1

    def started(self, job: Job, vc: VcState, now: float) -> None:
        host = self.state.hosts.get(job)
        self._since[job] = (now, -1 if host is None else host.vid)

    def stopped(self, job: Job, vc: VcState, now: float, why: str) -> None:
        t0, host = self._since.pop(job)
        area = (now - t0) * job.gpus
        self.used_area[vc.vid] += area
        if host >= 0:
            self.borrowed_area[vc.vid] += area
            self.lent_area[host] += area
            self.borrowed[vc.vid] -= job.gpus
            self.lent[host] -= job.gpus
        if why == "finish":
            self._in_system[vc.vid] -= 1
            if not self._in_system[vc.vid]:
                self.active_time[vc.vid] += now - self._active_since[vc.vid]

    # -- one instant ---------------------------------------------------------------------
    def rebalance(self, decider, now: float) -> list[Job]:
        """Reclaim for lenders whose head is blocked, then let blocked heads borrow. Carries out the
        decisions (policy passes through ``decider``, the kernel's one dispatcher) and returns the
        jobs whose finish time moved (started ones first)."""
        state = self.state
        policy, view = decider.policy, decider.view
        changed: list[Job] = []
        place = policy.placer.place
        for vc in state.vcs:  # a borrowed job that ended freed GPUs of a VC the engine did not pass over
            if vc.pending and place(view, vc, head_of(vc, now)).status is _FITS:
                changed.extend(self._pass(decider, vc, now))
        for vc in state.vcs:
            if vc.pending and self.lent[vc.vid]:
                changed.extend(self._reclaim(decider, vc, now))
        for vc in state.vcs:
            if vc.pending and self.specs[vc.vid].borrow_limit != 0:
                changed.extend(self._borrow(decider, vc, now))
        return changed

    def _pass(self, decider, vc: VcState, now: float) -> list[Job]:
        """The VC's own policy pass, carried out; the jobs whose finish moved."""
        return decider.collect_pass(vc, now)

    def _borrowers_on(self, vc: VcState) -> list[Job]:
        """Other VCs' jobs on ``vc``'s nodes, most recently started first."""
        return sorted((j for j, h in self.state.hosts.items() if h is vc), key=lambda j: -j.run_seq)

    def _reclaim(self, decider, vc: VcState, now: float) -> list[Job]:
        view, place = decider.view, decider.policy.placer.place
        changed: list[Job] = []
        while vc.pending and self.lent[vc.vid]:
            head = head_of(vc, now)
            if place(view, vc, head).status is _FITS:
                break  # its own pass starts it (it was not dirty, or it became free just now)
            if vc.free + self.lent[vc.vid] < head.gpus:
                break  # its own jobs hold the rest: reclaiming would not make it fit
            for victim in self._borrowers_on(vc):
                self.reclaimed[victim.vc_state.vid] += 1
                self.reclaims[vc.vid] += 1
                changed.extend(decider.collect_preempt(victim, now))
                if place(view, vc, head).status is _FITS:
                    break
            moved = self._pass(decider, vc, now)
            if not moved:
                break
            changed.extend(moved)
        return changed

    def _borrow(self, decider, vc: VcState, now: float) -> list[Job]:
        state, view, spec, place = self.state, decider.view, self.specs[vc.vid], decider.policy.placer.place
        changed: list[Job] = []
        while vc.pending:
            head = head_of(vc, now)
            if place(view, vc, head).status is _FITS:
                moved = self._pass(decider, vc, now)  # fits at home after all
                if not moved:
                    break
                changed.extend(moved)
                continue
            g = head.gpus
            if spec.borrow_limit is not None and self.borrowed[vc.vid] + g > spec.borrow_limit:
                break
            lender = None
            for other in sorted(state.vcs, key=lambda o: (-o.free, o.vid)):
                ospec = self.specs[other.vid]
                if other is vc or ospec.parent != spec.parent or other.pending or other.free < g:
                    continue
                if ospec.lend_limit is not None and self.lent[other.vid] + g > ospec.lend_limit:
                    continue
                fit = place(view, other, head)
                if fit.status is _FITS:
                    lender = (other, fit.placement)
                    break
            if lender is None:
                break
            other, placement = lender
            self.borrowed[vc.vid] += g
            self.lent[other.vid] += g
            self.borrow_starts[vc.vid] += 1
            changed.extend(decider.collect_borrowed(head, other, placement, now))
        return changed

    # -- report ----------------------------------------------------------------------------
    def per_queue(self, jobs: list[Job], t0: float, t1: float) -> dict:
        """Per queue: guaranteed vs used vs borrowed vs lent GPU time (GPU-hours), reclaims, queue
        delay; Jain's index over used / guaranteed GPU time (over the run: with every job done it
        mostly measures how demand matches the guarantees), and over used / guarantee x the time
        the queue had jobs (its entitlement while it wanted GPUs: borrowing moves it)."""
        state = self.state
        span = max(t1 - t0, 0.0)
        delays: dict[int, list[float]] = {}
        for job in jobs:
            delays.setdefault(job.vc_state.vid, []).append(job.queue_delay)
        out: dict = {}
        shares: list[float] = []
        active_shares: list[float] = []
        for vc in state.vcs:
            spec = self.specs[vc.vid]
            by_type: dict[str, int] = {}
            for node in vc.nodes:
                if not state.node_removed[node]:
                    name = state.node_specs[node].gpu_type.name
                    by_type[name] = by_type.get(name, 0) + state.node_gpus[node]
            guaranteed = vc.total_gpus * span
            active = self.active_time[vc.vid] + (t1 - self._active_since[vc.vid] if self._in_system[vc.vid] else 0.0)
            entitled = vc.total_gpus * active  # its guarantee while it had jobs to run
            d = delays.get(vc.vid, [])
            row = {
                "guarantee_gpus": vc.total_gpus, "guarantee_by_type": by_type,
                "borrow_limit": spec.borrow_limit, "lend_limit": spec.lend_limit, "parent": spec.parent,
                "guaranteed_gpu_hours": guaranteed / 3600.0,
                "used_gpu_hours": self.used_area[vc.vid] / 3600.0,
                "borrowed_gpu_hours": self.borrowed_area[vc.vid] / 3600.0,
                "lent_gpu_hours": self.lent_area[vc.vid] / 3600.0,
                "share_of_guarantee": self.used_area[vc.vid] / guaranteed if guaranteed else None,
                "active_hours": active / 3600.0,
                "share_of_active_guarantee": self.used_area[vc.vid] / entitled if entitled else None,
                "borrowed_starts": self.borrow_starts[vc.vid],
                "reclaimed": self.reclaimed[vc.vid], "reclaims": self.reclaims[vc.vid],
                "jobs": len(d), "avg_queue_delay": sum(d) / len(d) if d else 0.0,
            }
            if guaranteed:
                shares.append(row["share_of_guarantee"])
            if entitled:
                active_shares.append(row["share_of_active_guarantee"])
            out[vc.name] = row
        return {"per_queue": out, "queue_fairness_jain": jain(shares),
                "queue_fairness_jain_active": jain(active_shares)}
