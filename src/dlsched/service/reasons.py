"""Why a pod waits, in words (the filter's answer, GET /api/v1/queue): its place in the
policy's queue order, the GPUs free, its estimated start (its reservation, under a reserving
policy), GPUs being reclaimed for its queue, or the reservation that holds it back."""

from __future__ import annotations

from bisect import bisect_left

from dlsched.core.job import Job, JobState
from dlsched.kernel.queues import KeyedQueue
from dlsched.service.host import LiveHost
from dlsched.service.reserved import clock_text, holder_ahead, reserved_start

RUNNING = JobState.RUNNING


class Reasons:
    """The waiting reasons of pending jobs, with the sorted ranks of each VC's queue cached."""

    def __init__(self, host: LiveHost) -> None:
        self.host = host
        # the queue is ordered by policy.key (FIFO, QSSF, ...), or by arrival (Horus's ArrivalQueue)
        self.keyed = isinstance(host.policy.new_queue(), KeyedQueue)
        self.eta = None   # the live start estimates (service/eta.py), set by the facade once built
        self.ranks: dict[int, tuple[tuple, list[tuple], bool]] = {}   # vid -> (stamp, sorted ranks, NaN among them)

    def why_waiting(self, uid: str) -> str:
        host = self.host
        job = host.book.jobs.get(uid)
        if job is None:
            return host.book.waiting.get(uid, "dlsched does not know this pod")
        if job.state is RUNNING:
            return f"already running on {host.state.node_ids[job.placement[0][0]]}"
        if uid in host.book.waiting:
            return host.book.waiting[uid]
        vc = job.vc_state
        ahead = self.ahead(job)
        name = host.policy.name
        own = reserved_start(host.policy, job)
        if own is not None:   # the policy's promise, not a forecast
            eta = f"; reserved to start at {clock_text(own)} (in {_span(max(0.0, own - host.last_now))}, {name})"
        else:
            eta = self.eta.reason(uid, host.last_now) if self.eta is not None else ""   # the last refresh's ETA
        held = self.held(job)
        if held:
            return f"{held}{eta}"
        if not self.keyed:   # e.g. Horus: its own rounds pick among the pending jobs, skipping misfits
            return (f"queued by dlsched ({name}): no room the policy accepts in its last pass; "
                    f"{ahead} of {vc.pending} pending jobs of VC {vc.name} arrived earlier; {vc.free} GPUs free{eta}")
        return (f"queued by dlsched ({name}): {ahead} of {vc.pending} pending jobs of VC {vc.name} "
                f"go first; {vc.free} GPUs free{eta}{self.reclaiming(vc)}")

    def held(self, job: Job) -> str:
        """'' or, for a pending job whose GPUs are free but that a reservation ahead of it holds
        back, ``held back by dlsched (...): ... reserved for NS/POD from T``."""
        host, vc = self.host, job.vc_state
        if job.gpus > vc.free:
            return ""
        found = holder_ahead(host.policy, job, self.rank, host.book.jobs)
        if found is None:
            return ""
        holder, start = found
        return (f"held back by dlsched ({host.policy.name}): its {job.gpus} GPUs are free ({vc.free} in VC "
                f"{vc.name}), but reserved for {host.book.pods[holder.job_id].key} from {clock_text(start)}")

    def reserved(self, job: Job) -> float | None:
        """The start the policy reserved for a pending job (None: none, or not a reserving policy)."""
        return reserved_start(self.host.policy, job)

    def reclaiming(self, vc) -> str:
        """'' or, for a VC whose lent GPUs are being taken back, how many and from which queues."""
        quotas = self.host.kernel.quotas
        if quotas is None or not quotas.evicting:
            return ""
        going = [j for j, lender in quotas.evicting.items() if lender is vc]
        if not going:
            return ""
        queues = ", ".join(sorted({j.vc_state.name for j in going}))
        return f"; {sum(j.gpus for j in going)} GPUs being reclaimed from queue {queues}"

    def ahead(self, job: Job) -> int:
        """How many pending jobs of the job's VC go before it: a binary search in the VC's
        sorted ranks, sorted again only when its queue may have changed (a job entered or left
        it, or a pass ran: passes are where keys are assigned), not a walk of the whole queue
        on every filter of every waiting pod. A NaN key (no total order) counts by the walk."""
        vc = job.vc_state
        stamp = (self.host.passes, self.host.state.enqueued, len(vc.queue))
        cached = self.ranks.get(vc.vid)
        if cached is None or cached[0] != stamp:
            ranks = sorted(map(self.rank, vc.queue))
            cached = self.ranks[vc.vid] = (stamp, ranks, any(r[0] != r[0] for r in ranks))
        mine = self.rank(job)
        if cached[2] or mine[0] != mine[0]:
            return sum(1 for rank in cached[1] if rank < mine)
        return bisect_left(cached[1], mine)

    def rank(self, job: Job) -> tuple:
        """A pending job's place in the policy's queue order: its key, or for a policy whose
        queue has none (Horus, Horus-f: arrival order, their rounds decide) its arrival."""
        return (self.host.policy.key(job), job.enq_seq) if self.keyed else (job.enq_seq,)


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
