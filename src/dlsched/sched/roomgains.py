"""Room gains: per VC, the changes that can give a pending job more room, and where.

Between two scheduling passes of a VC only starts (which take room away) and arrivals (which
add no room) happen, unless a job stopped (finish, failure, preemption, a forgotten assumed
start), a node changed (added, removed, cordoned, powered) or a running job's prediction was
corrected. A placement that failed stays failed until one of those: a policy may carry what
failed from one pass to the next while :meth:`RoomGains.mark` is unchanged, and after stops
re-check it on the nodes they freed alone (:meth:`RoomGains.nodes_since`; Horus does, for its
cost placement's "a job needing at least what failed fails too").

A kernel observer, one per :class:`~dlsched.kernel.state.ClusterState`: a policy that reads it
declares ``needs_indexes = ("room-gains",)`` and the driver makes it
(:mod:`dlsched.sched.indexes`); the policy reads it as ``view.index("room-gains")``. Node changes
and prediction corrections are rare and count for every VC.
"""

from __future__ import annotations

from dlsched.core.job import Job


class RoomGains:
    """The nodes of the stops per VC, in order, plus a count of the changes that count for every
    VC (node changes, corrected predictions)."""

    __slots__ = ("everywhere", "stops")

    LOG_LIMIT = 1 << 16  # a longer log is dropped (and every VC counts as changed)

    def __init__(self) -> None:
        self.everywhere = 0
        self.stops: dict[int, list[int]] = {}  # VC id -> nodes of its stops

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        log = self.stops.get(vc.vid)
        if log is None:
            log = self.stops[vc.vid] = []
        elif len(log) > self.LOG_LIMIT:
            log.clear()
            self.everywhere += 1
        for node, _ in job.placement or ():
            log.append(node)
        log.append(-1)  # a stop without nodes still counts

    def node_changed(self, node: int, now: float) -> None:
        self.everywhere += 1

    def predictions_changed(self, job: Job) -> None:
        """A running job's prediction was corrected: its GPUs' predicted load (so their room) moved."""
        self.everywhere += 1

    def mark(self, vid: int) -> tuple[int, int]:
        """Equal marks: no room was gained in VC ``vid`` in between."""
        return self.everywhere, len(self.stops.get(vid, ()))

    def nodes_since(self, vid: int, mark: tuple[int, int]) -> set[int] | None:
        """The nodes where VC ``vid`` gained room since ``mark`` (None: anywhere)."""
        if mark[0] != self.everywhere:
            return None
        log = self.stops.get(vid, ())
        if len(log) < mark[1]:
            return None
        nodes = set(log[mark[1]:])
        nodes.discard(-1)
        return nodes
