"""Queues with quotas that lend and borrow (Kueue-style cohorts) on top of the VC partition.

Each VC is a leaf queue of a tree (:mod:`dlsched.kernel.queue_tree`). Its **guarantee** is its
own nodes' GPUs (per GPU type), exactly the Helios partition; what the queues add is that idle
GPUs move between VCs of one tree:

* **Borrow.** After the ordering policy's passes, a VC whose head job (in the policy's order)
  does not fit on its own nodes may start it on the idle GPUs of another VC of its tree, found
  by the policy's own placer on the lender's nodes, when the lender has no job waiting and every
  queue between borrower / lender and their nearest common ancestor stays within its borrow /
  lend limit (in GPUs of any type, or per GPU type). Blocked heads borrow in fair-share order:
  the queue with the least time-decayed usage per weight first (compared level by level down
  the tree). Only the head borrows: a blocked head is not overtaken (the policy's no-backfill
  rule), and the next head may borrow after it.
* **Reclaim.** When a VC's head job does not fit on its own nodes while other VCs' jobs hold
  some of them, and its free GPUs plus those borrowed GPUs would be enough, borrowing jobs on
  its nodes are preempted (checkpoint, the run's preemption overhead, back to their own queue
  with their attained service) one by one until the head fits: the borrowing queue with the most
  decayed usage per weight first, its most recently started job first; then the VC's policy
  pass runs again.

When no queue may borrow the manager is not installed and the run is today's, decision for
decision. The manager is a kernel observer: it integrates per queue the GPU time used, borrowed
and lent and the decayed usage, and counts reclaims, for ``summary.json``'s ``per_queue``.
"""

from __future__ import annotations

from collections.abc import Iterable

from dlsched.core.job import Job
from dlsched.kernel.decisions import Status
from dlsched.kernel.queue_tree import DecayedUsage, QueueSpec, QueueTree, allows, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError, VcState
from dlsched.kernel.stop import FINAL, StopReason

__all__ = ["QueueSpec", "QuotaManager", "borrowing_possible", "head_of", "jain"]

_FITS = Status.FITS
DEFAULT_HALF_LIFE = 7 * 86400.0  # seconds: Slurm's PriorityDecayHalfLife default


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

    def __init__(self, specs: Iterable[QueueSpec], state: ClusterState,
                 half_life: float = DEFAULT_HALF_LIFE, strict: bool = True) -> None:
        self.state = state
        specs = list(specs)
        tree = QueueTree(specs)
        unknown = sorted(set(tree.leaves) - set(state.vc_index))
        if unknown and strict:  # live (strict=False) a queue's nodes may not have joined yet
            raise ValueError(f"queue(s) {', '.join(unknown)} name no VC of the cluster and are no queue's parent")
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
                    for t, n in self._types_of(job.placement).items():
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

    # -- one instant ---------------------------------------------------------------------
    def rebalance(self, decider, now: float) -> None:
        """Reclaim for lenders whose head is blocked, then let blocked heads borrow, the queue with
        the least decayed usage per weight first. Every decision goes through ``decider``, the
        kernel's one dispatcher, and is reported to its backend as a pass's decisions are: the
        simulator's schedules finishes, the live kernel's log turns a borrowed start into a
        ``Bind`` on the lender's node and a reclaim into an ``Evict`` (``decider.assume``)."""
        view, place = decider.view, decider.policy.placer.place
        vcs = self.state.vcs[:len(self.specs)]  # live, a VC whose first node just joined waits for a rebuild
        for vc in vcs:  # a borrowed job that ended freed GPUs of a VC the engine did not pass over
            if vc.pending and place(view, vc, head_of(vc, now)).status is _FITS:
                decider.pass_over(vc, now)
        for vc in vcs:
            if vc.pending and self.in_total[vc.name]:
                self._reclaim(decider, vc, now)
        waiting = set(self.evicting.values())  # live: heads that wait for evictions in flight
        borrowers = [vc for vc in vcs if vc.pending and self.specs[vc.vid].may_borrow and vc not in waiting]
        if len(borrowers) > 1:
            upw = self.usage_per_weight(now)
            borrowers.sort(key=lambda vc: self.tree.fair_key(vc.name, upw))
        for vc in borrowers:
            if vc.pending:
                self._borrow(decider, vc, now)

    def _borrowers_on(self, vc: VcState, now: float) -> list[Job]:
        """Other VCs' jobs on ``vc``'s nodes in reclaim order: the borrowing queue with the most
        decayed usage per weight first, its most recently started job first. Jobs whose eviction
        is already asked for (live) are not candidates again."""
        upw = self.usage_per_weight(now)
        evicting = self.evicting
        return sorted((j for j, h in self.state.hosts.items() if h is vc and j not in evicting),
                      key=lambda j: (-upw[j.vc_state.name], -j.run_seq))

    def _fits_once_gone(self, view, place, vc: VcState, head: Job, going: list[Job]) -> bool:
        """Whether ``head`` fits on ``vc``'s nodes once the jobs ``going`` (evictions in flight,
        live) have released their GPUs. With none going (always, in the simulator) it is the
        plain placement question."""
        if not going:
            return place(view, vc, head).status is _FITS
        with self.state.as_if(released=going):
            return place(view, vc, head).status is _FITS

    def _reclaim(self, decider, vc: VcState, now: float) -> None:
        """Preempt borrowing jobs on ``vc``'s nodes until its blocked head fits, then pass over
        ``vc``. Live, a preemption is an eviction request: the victim keeps its GPUs until its
        pod is gone, so GPUs of evictions in flight count as becoming free (none is asked for
        twice, and no more victims than the head needs) and the head starts at the pass that
        follows the last ``JobEvicted``."""
        view, place = decider.view, decider.policy.placer.place
        assume = decider.assume
        while vc.pending and self.in_total[vc.name]:
            head = head_of(vc, now)
            if place(view, vc, head).status is _FITS:
                break  # its own pass starts it (it was not dirty, or it became free just now)
            going = [j for j, lender in self.evicting.items() if lender is vc]
            if going and self._fits_once_gone(view, place, vc, head, going):
                break  # enough is on its way out
            if vc.free + self.in_total[vc.name] < head.gpus:
                break  # its own jobs hold the rest: reclaiming would not make it fit
            reason = f"reclaim for queue {vc.name}: its guaranteed GPUs are lent"
            for victim in self._borrowers_on(vc, now):
                self.reclaimed[victim.vc_state.vid] += 1
                self.reclaims[vc.vid] += 1
                if assume:  # live: it holds its GPUs until the driver reports it gone (or, a
                    # nomination not bound yet, until the driver withdraws it)
                    self.evicting[victim] = vc
                    going.append(victim)
                decider.reclaim(victim, now, reason, head)
                if self._fits_once_gone(view, place, vc, head, going):
                    break
            if not decider.pass_over(vc, now):
                break

    def _loan(self, borrower: str, lender: str, want: dict[str, int]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
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

    def _allowance(self, paths: tuple[tuple[str, ...], tuple[str, ...]], types: Iterable[str]) -> dict[str, int]:
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

    def _lender_nodes(self, vc: VcState, other: VcState, g: int) -> list[int] | None:
        """Nodes of ``other`` to close before its placer looks for ``g`` GPUs for ``vc``'s head:
        those whose GPU type the loan's limits leave too little room for (per-type limits are
        checked before the placer picks, so that a disallowed type it would prefer does not hide
        an allowed one). [] when every type is allowed; None when no type is."""
        paths = self.tree.below_common(vc.name, other.name)
        if paths is None:
            return None
        specs = self.state.node_specs
        types = {specs[n].gpu_type.name for n in other.nodes}
        room = self._allowance(paths, types)
        ok = {t for t in types if room[t] >= g}
        if not ok:  # a placement across types may still fit the room left of several
            ok = {t for t in types if room[t] > 0}
            if sum(room[t] for t in ok) < g:
                return None
        if len(ok) == len(types):
            return []
        return [n for n in other.nodes if specs[n].gpu_type.name not in ok]

    def _types_of(self, placement) -> dict[str, int]:
        """GPUs per type a placement takes (per-type limits count them)."""
        specs = self.state.node_specs
        out: dict[str, int] = {}
        for node, mask in placement:
            t = specs[node].gpu_type.name
            out[t] = out.get(t, 0) + int(mask).bit_count()
        return out

    def _borrow(self, decider, vc: VcState, now: float) -> None:
        state, view, spec, place = self.state, decider.view, self.specs[vc.vid], decider.policy.placer.place
        while vc.pending:
            head = head_of(vc, now)
            if place(view, vc, head).status is _FITS:
                if not decider.pass_over(vc, now):  # fits at home after all
                    break
                continue
            g = head.gpus
            if spec.borrow_types is None and spec.borrow_limit is not None and \
                    self.out_total[vc.name] + g > spec.borrow_limit:
                break
            lender = None
            for other in sorted(state.vcs, key=lambda o: (-o.free, o.vid)):
                if other is vc or other.pending or other.free < g or other.vid >= len(self.specs) \
                        or not self.specs[other.vid].may_lend:
                    continue
                closed = self._lender_nodes(vc, other, g)
                if closed is None:
                    continue
                if closed:
                    with state.as_if(closed=closed):
                        fit = place(view, other, head)
                else:
                    fit = place(view, other, head)
                if fit.status is not _FITS:
                    continue
                want = self._types_of(fit.placement)
                loan = self._loan(vc.name, other.name, want)
                if loan is not None:
                    lender = (other, fit.placement, loan[0], loan[1], want)
                    break
            if lender is None:
                break
            other, placement, outs, ins, want = lender
            self._loans[head] = (outs, ins, want)
            self._book(head, 1)
            self.borrow_starts[vc.vid] += 1
            decider.start_borrowed(head, other, placement, now)

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
        self._loans[job] = (paths[0], paths[1], self._types_of(job.placement))
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
