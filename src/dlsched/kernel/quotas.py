"""The accounting of queues with quotas that lend and borrow (Kueue-style cohorts) on top of the
VC partition.

Each VC is a leaf queue of a tree (:mod:`dlsched.kernel.queue_tree`). Its **guarantee** is its
own nodes' GPUs (per GPU type), exactly the Helios partition; what the queues add is that idle
GPUs move between VCs of one tree:

* **Borrow.** After the ordering policy's passes, a VC whose head job does not fit on its own
  nodes may start it on the idle GPUs of another VC of its tree, when the lender has no job
  waiting and every queue between borrower / lender and their nearest common ancestor stays
  within its borrow / lend limit (in GPUs of any type, or per GPU type), in fair-share order.
* **Reclaim.** When a VC's head does not fit on its own nodes while other VCs' jobs hold some of
  them, borrowing jobs on its nodes are preempted until the head fits.

Those two **decisions** run the policy's placer, so they are policy and live above the kernel,
in :mod:`dlsched.sched.actions` (``rebalance``: reclaim, then borrow; the rules in detail are
there). This module is the kernel's half, the **accounting**: :class:`QuotaManager` is a kernel
observer that books every loan along the queues of its two paths (:meth:`QuotaManager.loan`
says whether a new one keeps every limit, :meth:`~QuotaManager.allowance` how much room is
left, :meth:`~QuotaManager.book_loan` books it), checks the books against what runs
(:meth:`~QuotaManager.check`), integrates per queue the GPU time used, borrowed and lent and
the decayed usage, counts reclaims, and reports ``summary.json``'s ``per_queue``. The driver
that installs a manager gives the kernel the rebalance function (``Kernel(rebalance=...)``):
the kernel cannot import ``sched``.

When no queue may borrow the manager is not installed and the run is today's, decision for
decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from dlsched.core.job import Job
from dlsched.kernel.queue_tree import DecayedUsage, QueueSpec, QueueTree, allows, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError, VcState
from dlsched.kernel.stop import FINAL, StopReason

__all__ = ["QueueSpec", "QuotaManager", "borrowing_possible", "jain"]

DEFAULT_HALF_LIFE = 7 * 86400.0  # seconds: Slurm's PriorityDecayHalfLife default


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one has all."""
    sq = sum(x * x for x in values)
    if not values or sq == 0.0:
        return None
    return sum(values) ** 2 / (len(values) * sq)


def check_leaves_are_vcs(tree: QueueTree, state: ClusterState) -> None:
    """ValueError naming each leaf queue that is no VC of ``state`` (a typo, or a VC the cluster
    lacks): its limits would bind nothing."""
    unknown = sorted(set(tree.leaves) - set(state.vc_index))
    if unknown:
        raise ValueError(f"queue(s) {', '.join(unknown)} name no VC of the cluster and are no queue's parent")


class QuotaManager:
    """The books of borrowing and reclaim between VCs: loans per queue, usage, reclaim counts
    (the decisions are ``sched/actions/``'s, called by the driver once per instant after its
    passes)."""

    def __init__(self, specs: Iterable[QueueSpec], state: ClusterState,
                 half_life: float = DEFAULT_HALF_LIFE, strict: bool = True) -> None:
        self.state = state
        specs = list(specs)
        tree = QueueTree(specs)
        if strict:  # live (strict=False) a queue's nodes may not have joined yet
            check_leaves_are_vcs(tree, state)
        inner_vcs = sorted(tree.inner & set(state.vc_index))
        if inner_vcs:
            raise ValueError(f"VC(s) {', '.join(inner_vcs)} are named as a parent: a VC is a leaf queue")
        # a VC without an entry keeps its guarantee and neither borrows nor lends
        self.tree = QueueTree([*specs, *(QueueSpec(vc.name, 0, 0) for vc in state.vcs if vc.name not in tree.specs)])
        self.specs = [self.tree.specs[vc.name] for vc in state.vcs]
        names = list(self.tree.specs)
        self.half_life = half_life
        # per queue of the tree (leaves and inner): GPUs its subtree's jobs hold outside it ("out",
        # borrowed) and GPUs of its subtree's nodes held by jobs from outside ("in", lent), per type
        self.out_total = dict.fromkeys(names, 0)
        self.in_total = dict.fromkeys(names, 0)
        self.out_types: dict[str, dict[str, int]] = {n: {} for n in names}
        self.in_types: dict[str, dict[str, int]] = {n: {} for n in names}
        self.usage = {n: DecayedUsage(half_life) for n in names}  # decayed GPU-seconds, subtree
        self._loans: dict[Job, tuple[tuple[str, ...], tuple[str, ...], dict[str, int]]] = {}
        n = len(state.vcs)
        self.used_area = [0.0] * n      # GPU-seconds run by the VC's jobs (anywhere)
        self.borrowed_area = [0.0] * n  # ... of them on other VCs' nodes
        self.lent_area = [0.0] * n      # GPU-seconds other VCs' jobs ran on its nodes
        self.reclaimed = [0] * n        # the VC's borrowing jobs preempted by a reclaim
        self.reclaims = [0] * n         # preemptions the VC triggered to get its GPUs back
        self.borrow_starts = [0] * n
        self._since: dict[Job, tuple[float, int]] = {}  # running job -> (start, host vid or -1)
        self._in_system = [0] * n       # the VC's jobs submitted and not finished
        self._active_since = [0.0] * n
        self.active_time = [0.0] * n    # seconds with >= 1 job waiting or running
        # live (the decider assumes): borrowing jobs whose eviction a reclaim asked for -> the
        # lender VC; they keep their GPUs until the driver reports them gone (always empty in
        # the simulator, where a reclaim stops the job at once)
        self.evicting: dict[Job, VcState] = {}
        self.stranded: set[Job] = set()  # loans found running by rebuild() that the tree forbids now
        state.add_observer(self)

    @property
    def borrowed(self) -> list[int]:
        """GPUs each VC's jobs hold on other VCs' nodes now."""
        return [self.out_total[vc.name] for vc in self.state.vcs]

    @property
    def lent(self) -> list[int]:
        """GPUs of each VC's nodes held by other VCs' jobs now."""
        return [self.in_total[vc.name] for vc in self.state.vcs]

    def usage_per_weight(self, now: float) -> dict[str, float]:
        """Each queue's decayed usage (GPU-seconds) divided by its weight, at ``now``."""
        return {n: u.at(now) / self.tree.specs[n].weight for n, u in self.usage.items()}

    # -- observer: GPU time per queue ------------------------------------------------------
    def submitted(self, job: Job, vc: VcState, now: float) -> None:
        if not self._in_system[vc.vid]:
            self._active_since[vc.vid] = now
        self._in_system[vc.vid] += 1

    def started(self, job: Job, vc: VcState, now: float) -> None:
        host = self.state.hosts.get(job)
        self._since[job] = (now, -1 if host is None else host.vid)
        for q in (vc.name, *self.tree.ancestors[vc.name]):
            self.usage[q].change(job.gpus, now)

    def stopped(self, job: Job, vc: VcState, now: float, why: StopReason) -> None:
        t0, host = self._since.pop(job)
        area = (now - t0) * job.gpus
        self.used_area[vc.vid] += area
        for q in (vc.name, *self.tree.ancestors[vc.name]):
            self.usage[q].change(-job.gpus, now)
        if host >= 0:
            self.borrowed_area[vc.vid] += area
            self.lent_area[host] += area
            if job in self._loans:
                self._book(job, -1)
            self.evicting.pop(job, None)
            self.stranded.discard(job)
        if why in FINAL:  # finished or killed at its time limit: it leaves the queue for good
            self._in_system[vc.vid] -= 1
            if not self._in_system[vc.vid]:
                self.active_time[vc.vid] += now - self._active_since[vc.vid]

    def _book(self, job: Job, sign: int) -> None:
        """Add (``sign`` 1) or release (-1) a borrowing job's GPUs along both paths of its loan."""
        outs, ins, types = self._loans[job]
        g = sum(types.values())
        for q in outs:
            self.out_total[q] += sign * g
            for t, n in types.items():
                self.out_types[q][t] = self.out_types[q].get(t, 0) + sign * n
        for q in ins:
            self.in_total[q] += sign * g
            for t, n in types.items():
                self.in_types[q][t] = self.in_types[q].get(t, 0) + sign * n
        if sign < 0:
            del self._loans[job]

    def check(self) -> None:
        """The loan counters equal what the borrowing jobs hold (per queue of the tree, per GPU
        type) and every queue is within its limits; :class:`StateError` otherwise (the engine
        calls it with the kernel's invariants)."""
        out: dict[str, dict[str, int]] = {n: {} for n in self.out_types}
        into: dict[str, dict[str, int]] = {n: {} for n in self.in_types}
        for job, host in self.state.hosts.items():
            paths = self._paths(job, host)
            if paths is None:
                raise StateError(f"job {job.job_id} of {job.vc_state.name} runs on {host.name}, outside its tree")
            for names, held in ((paths[0], out), (paths[1], into)):
                for q in names:
                    for t, n in self.types_of(job.placement).items():
                        held[q][t] = held[q].get(t, 0) + n
        specs = self.tree.specs
        for name, spec in specs.items():
            for what, held, types, total, limit, limit_types in (
                    ("borrowed", out[name], self.out_types[name], self.out_total[name], spec.borrow_limit,
                     spec.borrow_types),
                    ("lent", into[name], self.in_types[name], self.in_total[name], spec.lend_limit,
                     spec.lend_types)):
                counted = {t: n for t, n in types.items() if n}
                if held != counted or sum(held.values()) != total:
                    raise StateError(f"queue {name}: {what} GPUs counted {counted}, held {held}")
                if limit_types is not None:
                    over = any(n > dict(limit_types).get(t, 0) for t, n in held.items())
                else:
                    over = limit is not None and total > limit
                if over:
                    raise StateError(f"queue {name}: {what} GPUs {held} over its limit")

    def _paths(self, job: Job, host: VcState) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The queues a running loan is booked on: both paths below the common ancestor; a loan
        :meth:`rebuild` found that the configuration no longer allows, its two leaves alone."""
        if job in self.stranded:
            return (job.vc_state.name,), (host.name,)
        return self.tree.below_common(job.vc_state.name, host.name)

    # -- loans: the limits a new one must keep, and its booking (sched/actions/ decides) ------
    def loan(self, borrower: str, lender: str, want: dict[str, int]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The queues on both paths of a loan of ``want`` GPUs (per type), or None when a limit on
        the way (or the trees) forbids it."""
        paths = self.tree.below_common(borrower, lender)
        if paths is None:
            return None
        outs, ins = paths
        specs = self.tree.specs
        for q in outs:
            s = specs[q]
            if not allows(s.borrow_limit, s.borrow_types, self.out_total[q], self.out_types[q], want):
                return None
        for q in ins:
            s = specs[q]
            if not allows(s.lend_limit, s.lend_types, self.in_total[q], self.in_types[q], want):
                return None
        return outs, ins

    def allowance(self, paths: tuple[tuple[str, ...], tuple[str, ...]], types: Iterable[str]) -> dict[str, int]:
        """GPUs of each type a new loan along ``paths`` may still take: the least room any queue
        on the way has left, under its per-type limit or (without one) its limit in GPUs of any
        type (a type a per-type limit does not name: 0; no limit: unbounded)."""
        room: dict[str, int] = {}
        specs = self.tree.specs
        for t in types:
            left = None
            for names, borrow in ((paths[0], True), (paths[1], False)):
                for q in names:
                    s = specs[q]
                    limit_types = s.borrow_types if borrow else s.lend_types
                    if limit_types is not None:
                        held = (self.out_types if borrow else self.in_types)[q].get(t, 0)
                        r = dict(limit_types).get(t, 0) - held
                    else:
                        limit = s.borrow_limit if borrow else s.lend_limit
                        if limit is None:
                            continue
                        r = limit - (self.out_total if borrow else self.in_total)[q]
                    left = r if left is None else min(left, r)
            room[t] = 1 << 62 if left is None else max(left, 0)
        return room

    def types_of(self, placement) -> dict[str, int]:
        """GPUs per type a placement takes (per-type limits count them)."""
        specs = self.state.node_specs
        out: dict[str, int] = {}
        for node, mask in placement:
            t = specs[node].gpu_type.name
            out[t] = out.get(t, 0) + int(mask).bit_count()
        return out

    def book_loan(self, job: Job, outs: tuple[str, ...], ins: tuple[str, ...], want: dict[str, int]) -> None:
        """Book a new loan: ``job`` is about to start on another VC's nodes taking ``want`` GPUs
        per type, along the paths :meth:`loan` allowed (released when the job stops); counted as
        a borrowed start of its VC."""
        self._loans[job] = (outs, ins, want)
        self._book(job, 1)
        self.borrow_starts[job.vc_state.vid] += 1

    def book_reclaim(self, victim: Job, lender: VcState, in_flight: bool) -> None:
        """Count a reclaim: ``victim`` (a borrowing job) is preempted for ``lender``'s head. With
        ``in_flight`` (live) it keeps its GPUs until the driver reports it gone, and the lender's
        head waits for it (:attr:`evicting`)."""
        self.reclaimed[victim.vc_state.vid] += 1
        self.reclaims[lender.vid] += 1
        if in_flight:
            self.evicting[victim] = lender

    # -- live: a manager built on a running state ----------------------------------------
    def rebuild(self, now: float, previous: QuotaManager | None = None) -> None:
        """Book what already runs, for a manager installed on a live state (the service, when its
        queue configuration changes): each running job's GPU-time clock and usage from ``now``,
        the decayed usage of queues ``previous`` knew carried over, and every job that holds
        another VC's GPUs (``state.hosts``) booked as a loan along the paths the new tree gives.
        A loan the new tree forbids (another top-level tree, a limit of 0) is not undone --
        the job runs until it ends or is reclaimed -- but booked on its two leaves alone
        (``stranded``), so that the lender still sees its GPUs as lent. Evictions ``previous``
        had asked for stay in flight."""
        state = self.state
        if previous is not None:
            for name, u in previous.usage.items():
                if name in self.usage:
                    mine = self.usage[name]
                    mine.value, mine.t = u.at(now), max(now, u.t)
        for vc in state.vcs:
            if vc.vid >= len(self._in_system):
                continue
            self._in_system[vc.vid] = vc.pending + len(vc.running)
            self._active_since[vc.vid] = now
            for job in vc.running:
                host = state.hosts.get(job)
                self._since[job] = (now, -1 if host is None else host.vid)
                for q in (vc.name, *self.tree.ancestors[vc.name]):
                    self.usage[q].change(job.gpus, now)
        for job in state.hosts:
            self.adopt(job)
        if previous is not None:
            self.evicting.update((j, v) for j, v in previous.evicting.items() if j in state.hosts)

    def adopt(self, job: Job) -> None:
        """Book the loan of ``job``, which already holds another VC's GPUs (``state.hosts``):
        along the paths the tree gives, or on its two leaves alone when the tree forbids it
        (``stranded``: it runs until it ends or is reclaimed)."""
        host = self.state.hosts[job]
        paths = self.tree.below_common(job.vc_state.name, host.name)
        if paths is None:
            self.stranded.add(job)
            paths = (job.vc_state.name,), (host.name,)
        self._loans[job] = (paths[0], paths[1], self.types_of(job.placement))
        self._book(job, 1)

    def loans(self) -> list[tuple[Job, VcState]]:
        """The jobs that hold another VC's GPUs now, with the lender."""
        return list(self.state.hosts.items())

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
            decayed = self.usage[vc.name].at(t1)
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
                "weight": spec.weight, "decayed_usage_gpu_hours": decayed / 3600.0,
                "usage_per_weight": decayed / 3600.0 / spec.weight,
            }
            if spec.borrow_types is not None or spec.lend_types is not None:
                row["borrow_limit_by_type"] = None if spec.borrow_types is None else dict(spec.borrow_types)
                row["lend_limit_by_type"] = None if spec.lend_types is None else dict(spec.lend_types)
            if guaranteed:
                shares.append(row["share_of_guarantee"])
            if entitled:
                active_shares.append(row["share_of_active_guarantee"])
            out[vc.name] = row
        result = {"per_queue": out, "queue_fairness_jain": jain(shares),
                  "queue_fairness_jain_active": jain(active_shares), "fair_share_half_life": self.half_life}
        if self.tree.inner:
            result["per_inner_queue"] = self._inner_rows(t1)
        return result

    def _inner_rows(self, t1: float) -> dict:
        """Per inner queue (cohort): its limits, weight, the leaves under it and their totals."""
        rows: dict = {}
        for name in self.tree.specs:
            if name not in self.tree.inner:
                continue
            spec = self.tree.specs[name]
            under = [vc for vc in self.state.vcs if name in self.tree.ancestors[vc.name]]
            decayed = self.usage[name].at(t1)
            rows[name] = {
                "parent": spec.parent, "queues": [vc.name for vc in under],
                "guarantee_gpus": sum(vc.total_gpus for vc in under),
                "borrow_limit": spec.borrow_limit if spec.borrow_types is None else dict(spec.borrow_types),
                "lend_limit": spec.lend_limit if spec.lend_types is None else dict(spec.lend_types),
                "used_gpu_hours": sum(self.used_area[vc.vid] for vc in under) / 3600.0,
                "weight": spec.weight, "decayed_usage_gpu_hours": decayed / 3600.0,
                "usage_per_weight": decayed / 3600.0 / spec.weight,
            }
        return rows
