"""Policy passes live, and the actions they return carried out: a ``Bind`` becomes a nomination
(store first), a ``Postponed`` the pod's waiting reason, a ``Timer`` a timer (fired as
``TimerFired``), an ``Evict`` an eviction through the Eviction API (one at a job's time limit
goes to :class:`~dlsched.service.live_limits.LiveLimits`: the kubelet's, or that eviction)."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from dlsched.core.job import JobState
from dlsched.kernel.stimuli import (
    TIME_LIMIT_REASON,
    Bind,
    BindFailed,
    Evict,
    PassRequested,
    Postponed,
    Timer,
    TimerFired,
)
from dlsched.service.adapter import Adapter
from dlsched.service.adoption import gpu_list
from dlsched.service.gangs import is_gang_id

ASSUMED = JobState.ASSUMED


class Passes:
    """The passes of the live kernel (``PassRequested``, ``TimerFired``) and their actions."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.timers: list[tuple[float, tuple]] = []   # (time, key) heap of the kernel's Timer actions
        adapter.limits.timers = self.timers   # limit timers armed outside a pass (an adoption) join it
        # Replicas with leader election (service/leader.py) set this: a replica that does not hold the
        # lease nominates nothing (its changed VCs stay marked and are decided once it leads).
        self.may_nominate: Callable[[], bool] = lambda: True

    def run_pass(self) -> int:
        """One policy pass over every changed VC (``PassRequested``: the kernel's one dispatcher,
        with starts assumed), its actions carried out; returns the number of new nominations."""
        ad = self.adapter
        if not ad.kernel.pending_pass or not self.may_nominate():
            return 0
        now = ad.now()
        decider = ad.kernel.decider
        ad.passes += sum(1 for vc in decider.dirty if vc.pending or vc in decider.woken)
        actions = ad.handle(PassRequested(), now)
        count = self.carry_out(actions, now)
        if ad.gangs.by_job:
            ad.gangs.after_pass()   # gang hook: why a gang's pods find no room (said once)
        return count

    def carry_out(self, actions: list, now: float) -> int:
        """The kernel's actions, in its order. A refused nomination stands while the rest are
        booked, then goes back (``BindFailed``). Returns the number of nominations."""
        ad = self.adapter
        count = 0
        refused: list[tuple[Bind, str, str]] = []
        for action in actions:
            kind = type(action)
            if kind is Bind:
                if is_gang_id(action.job.job_id):   # gang hook: every pod of the gang nominated at once
                    outcome = ad.gangs.nominate(action, now)
                else:
                    outcome = ad.noms.nominate(action, now)
                if outcome is None:
                    count += 1
                else:
                    refused.append((action, *outcome))
            elif kind is Postponed:
                ad.book.waiting[action.job.job_id] = f"postponed by the policy: {action.reason}"
            elif kind is Timer:
                heapq.heappush(self.timers, (action.time, action.key))   # kept until fire_timers
            elif kind is Evict and action.reason == TIME_LIMIT_REASON and action.for_job is None:
                ad.limits.due(action, now)   # the kubelet's, or an eviction at the limit
            elif kind is Evict:
                ad.evictions.evict(action, now)
        for action, counter, why in refused:
            job = action.job
            ad.counters[counter] += 1
            idx, mask = action.placement[0]
            ad.record("refused", uid=job.job_id, node=ad.state.node_ids[idx], gpus=gpu_list(mask), why=why)
            if job.state is ASSUMED:
                ad.handle(BindFailed(job, why), now)
            ad.noms.slots.pop(job.job_id, None)
            ad.book.waiting[job.job_id] = why
        return count

    def next_timer(self) -> float | None:
        """When the earliest timer is due (service clock), or None."""
        return self.timers[0][0] if self.timers else None

    def fire_timers(self) -> int:
        """Every timer due by now becomes ``TimerFired`` (a pass over its VC, even with nothing
        new), its actions carried out; returns how many fired."""
        ad = self.adapter
        if not self.timers or not self.may_nominate():
            return 0
        now = ad.now()
        fired = 0
        while self.timers and self.timers[0][0] <= now:
            _, key = heapq.heappop(self.timers)
            fired += 1
            ad.passes += 1
            actions = ad.handle(TimerFired(key), now)
            self.carry_out(actions, now)
        return fired
