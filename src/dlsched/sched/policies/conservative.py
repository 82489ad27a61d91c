"""Conservative backfilling (Mu'alem and Feitelson 2001): a reservation for every waiting job.

A pass plans the VC afresh from the running jobs' estimated ends; each waiting job in queue order
(``--param order``) gets the earliest start at which its GPUs are free for its estimated run
time, given the reservations of the jobs ahead of it. A job the placement can place now, on GPUs
that no reservation ahead of it needs during its run, starts; any other keeps its reservation. So
no job starts ahead of another if that could delay it, by the estimates.

With a placement that keeps a job on one node (consolidate) the plan is per node
(:class:`~dlsched.sched.nodeplan.NodePlan`): a reservation is a set of nodes that has the GPUs
then, so a job can be placed at its reserved time. With any other placer a job may take any free
GPUs of the VC and the plan counts GPUs (:class:`~dlsched.sched.profile.FreeProfile`). A job the
placement would put now where a reservation ahead of it needs the GPUs (or cannot place now) is
planned from the next estimated end. ``on_overrun=stop`` stops a job started ahead of
reservations it could delay (reserved from its estimated end on, per node on one of its nodes)
once it outlives its estimate into the earliest of them and that job cannot start
(:mod:`dlsched.sched.overrun_stops`). Estimates, corrections and the reservation record:
:mod:`dlsched.sched.reservations`. docs/backfill.md.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import take_gpus
from dlsched.sched.nodeplan import NodePlan
from dlsched.sched.profile import FreeProfile
from dlsched.sched.reserving import ReservingPolicy

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE


class ConservativePolicy(ReservingPolicy):
    """Backfill in which every waiting job holds a reservation (per node under consolidate)."""

    name = "conservative"

    def __init__(self, placer, **options) -> None:
        super().__init__(placer, **options)
        # starts the placement would have put where a reservation ahead needs the GPUs (held back)
        self.held_by_placement = 0
        # starts the plan moved to another node the placement ranks (its own choice was reserved)
        self.moved_by_plan = 0
        # job -> (reserved start, (node, GPUs) taken) of the last pass: a replan that gives the
        # same start keeps the same nodes, so a tie between nodes cannot move a reservation ahead
        # onto the nodes of one behind it
        self.last: dict = {}

    def prepare(self, view: ClusterView) -> None:
        super().prepare(view)
        self.held_by_placement = 0
        self.moved_by_plan = 0
        self.last.clear()

    def schedule(self, view: ClusterView, vc) -> Iterator[Decision]:
        if self.stops.armed:   # a dict test, not a method call: every pass makes it
            yield from self.stops.due(view, vc, self.book, self.placer, self.name)
        order = self.pass_order(view, vc)
        if not order:
            return
        if self.placer.single_node_only and vc.gpus_per_node:
            yield from self._per_node(view, vc, order)
        else:
            yield from self._counted(view, vc, order)

    def _per_node(self, view: ClusterView, vc, order) -> Iterator[Decision]:
        now = view.now
        place = self.placer.place
        book, estimates = self.book, self.estimates
        node_free, node_slot = view.node_free, view.node_slot
        releases: dict[int, list[tuple[float, int]]] = {}
        ends: list[float] = []
        for r in vc.running:
            end = estimates.end_of(r, view, now)
            ends.append(end)
            for node, mask in r.placement or ():
                if node_slot[node] >= 0:
                    releases.setdefault(node, []).append((end, mask.bit_count()))
        ends.sort()
        nxt = bisect_right(ends, now)
        later = ends[nxt] if nxt < len(ends) else None   # the next estimated end: the next change
        nodes = vc.nodes
        plan = NodePlan(now, nodes, [node_free[n] for n in nodes], releases, vc.gpus_per_node, vc.max_node_gpus)
        ahead = 0   # waiting jobs before this one that hold a reservation
        last, local_of = self.last, plan.local_of
        held: list | None = [] if self.on_overrun == "stop" else None   # (job, start, its nodes) reserved ahead
        for job in order:
            run = estimates.run_time(job, view)
            after = now
            before = last.pop(job, None)
            if job.gpus <= vc.free:
                fit = place(view, vc, job)
                if fit.status is _FITS:
                    if plan.admits(fit.placement, now, run):
                        plan.take_placement(fit.placement, now, run)
                        if later is None or now + run < later:
                            later = now + run   # its end is the plan's next change now
                        book.started(job, now)
                        if ahead:
                            book.backfilled += 1
                        yield Start(job, fit.placement, fit.shared)
                        if held:   # after the start: the stop is for this run
                            self._arm(view, vc, job, run, held, fit.placement)
                        continue
                    other = self._planned_node(view, vc, job, run, plan)
                    if other is not None:   # the placement's node is reserved; another it ranks fits the plan
                        plan.take_placement(other, now, run)
                        if later is None or now + run < later:
                            later = now + run
                        book.started(job, now)
                        self.moved_by_plan += 1
                        if ahead:
                            book.backfilled += 1
                        yield Start(job, other)
                        if held:
                            self._arm(view, vc, job, run, held, other)
                        continue
                    self.held_by_placement += 1
                elif fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)
                if later is None:
                    continue   # not now, and no known end changes anything: no reservation to give
                after = later
            found = plan.earliest(job.gpus, run, after)
            if found is None:
                continue   # no planned time has room for it (a running job of unknown end holds it)
            start, taken = found
            if start == now:   # the plan has room now but the placement did not place it: from the next end
                if later is None:
                    if held is not None:   # GPUs held past their estimates: reserved now, as EASY's head is
                        self._reserve_now(job, now, held)
                        ahead += 1
                    continue
                found = plan.earliest(job.gpus, run, later)
                if found is None:
                    continue
                start, taken = found
            if before is not None and before[0] == start:
                kept = [(local_of.get(node, -1), g) for node, g in before[1]]
                if all(k >= 0 and plan.profiles[k].room(start, run, g) for k, g in kept):
                    taken = kept
            plan.take(start, run, taken)
            last[job] = (start, tuple((nodes[k], g) for k, g in taken))
            book.reserve(job, start, now)
            ahead += 1
            if held is not None:
                held.append((job, start, {nodes[k] for k, _ in taken}))

    def _reserve_now(self, job, now: float, held: list) -> None:
        """on_overrun=stop: a job the estimates give room now that cannot be placed (its GPUs are
        held by jobs past their estimates, so no later end is known) is reserved now, on any node,
        as EASY's head is: the jobs started ahead of it are stopped for it."""
        self.book.reserve(job, now, now)
        held.append((job, now, None))

    def _arm(self, view: ClusterView, vc, job, run: float, held: list, placement) -> None:
        """on_overrun=stop: ``job`` starts ahead of the reservations in ``held``; those it could
        delay by outliving its estimate (reserved from its estimated end on, and per node on one of
        its nodes) are its heads, and it is stopped at the earliest of them (plus the grace) if
        it still runs and a head cannot start (:mod:`dlsched.sched.overrun_stops`)."""
        end = view.now + run
        mine = None if placement is None else {node for node, _ in placement}
        heads = [(start, h) for h, start, nodes in held
                 if start >= end and (mine is None or nodes is None or not mine.isdisjoint(nodes))]
        if heads:
            self.stops.arm(view, vc, job, [h for _, h in heads], min(start for start, _ in heads))

    def _planned_node(self, view: ClusterView, vc, job, run: float, plan: NodePlan):
        """A one-node placement now that keeps the plan, on the best node the placement ranks
        (its ``scores``: every node that passes its filters) among those the plan admits; None
        where the placement cannot be asked (no ``scores``, permits, a job of several pods or
        nodes) or no ranked node keeps the plan."""
        placer = self.placer
        scores = getattr(placer, "scores", None)
        per_pod = job.gpus_per_pod
        if scores is None or getattr(placer, "permits", True) or job.gpus > vc.max_node_gpus \
                or (per_pod and job.gpus > per_pod):
            return None
        best = None
        for node, score in scores(view, vc, job).items():
            if best is not None and (score, -node) <= best[0]:
                continue
            placement = ((node, take_gpus(view, node, job.gpus)),)
            if plan.admits(placement, view.now, run):
                best = ((score, -node), placement)
        return None if best is None else best[1]

    def _counted(self, view: ClusterView, vc, order) -> Iterator[Decision]:
        now = view.now
        place = self.placer.place
        book, estimates = self.book, self.estimates
        plan = FreeProfile(now, vc.free, [(estimates.end_of(r, view, now), r.gpus) for r in vc.running])
        ahead = 0
        held: list | None = [] if self.on_overrun == "stop" else None   # (job, start, None) reserved ahead
        for job in order:
            run = estimates.run_time(job, view)
            start = plan.earliest(job.gpus, run, now)
            if start is None:
                continue   # no planned time has room for it (a running job of unknown end holds it)
            if start == now and job.gpus <= vc.free:
                fit = place(view, vc, job)
                if fit.status is _FITS:
                    plan.take(now, run, job.gpus)
                    book.started(job, now)
                    if ahead:
                        book.backfilled += 1
                    yield Start(job, fit.placement, fit.shared)
                    if held:   # after the start: the stop is for this run
                        self._arm(view, vc, job, run, held, None)
                    continue
                if fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)
            if start == now:   # free by the count, not placeable now: plan it from the next end
                later = plan.times[1] if len(plan.times) > 1 else None
                start = plan.earliest(job.gpus, run, later) if later is not None else None
                if start is None:
                    if later is None and held is not None:   # as in the per-node plan
                        self._reserve_now(job, now, held)
                        ahead += 1
                    continue
            plan.take(start, run, job.gpus)
            book.reserve(job, start, now)
            ahead += 1
            if held is not None:
                held.append((job, start, None))
