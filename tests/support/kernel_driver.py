"""A simulation driven through the kernel's entry point alone (``Kernel.handle``), for the tests
that check it makes the engine's decisions: arrivals, finishes at start + true remaining time,
the policy's timers, and every action carried out the moment it is returned.

With ``assume=True`` (the live kernel) a ``Bind`` is confirmed at once (``BindSucceeded``) and an
``Evict`` is reported done at once (``JobEvicted``); with ``assume=False`` both are already
carried out when returned. A preempted job's remaining time loses what it ran and gains
``overhead`` seconds, as the simulator's physics books it.
"""

from __future__ import annotations

import heapq
import itertools

from dlsched.core.job import Job, JobState
from dlsched.core.truth import remaining as true_remaining
from dlsched.core.truth import set_remaining
from dlsched.kernel.entry import Kernel
from dlsched.kernel.stimuli import (
    Bind,
    BindSucceeded,
    Evict,
    JobEvicted,
    JobFinished,
    JobSubmitted,
    PassRequested,
    Timer,
    TimerFired,
)


def feed(kernel: Kernel, jobs: list[Job], overhead: float = 0.0) -> dict[str, tuple[float, tuple]]:
    """Run ``jobs`` through ``kernel`` (prepared, on a fresh state) to the end; job id -> (first
    start time, first placement). The jobs keep their start/end times and preemptions."""
    by_id = {vc.name: vc for vc in kernel.state.vcs}
    for job in jobs:
        if job.state is not JobState.CREATED:
            job.reset()
        job.vc_state = by_id[job.vc]
    assume = kernel.decider.assume
    arrivals = sorted(jobs, key=lambda j: j.submit_time)
    heap: list[tuple] = []   # (time, 0 = finish / 1 = timer, seq, job, epoch or timer key)
    seq = itertools.count()
    since: dict[Job, float] = {}
    first: dict[str, tuple[float, tuple]] = {}
    i = 0
    while i < len(arrivals) or heap:
        now = min(arrivals[i].submit_time if i < len(arrivals) else float("inf"),
                  heap[0][0] if heap else float("inf"))
        while heap and heap[0][0] == now and heap[0][1] == 0:
            _, _, _, job, epoch = heapq.heappop(heap)
            if epoch == job.epoch and job.state is JobState.RUNNING:
                kernel.handle(JobFinished(job), now)
        while i < len(arrivals) and arrivals[i].submit_time == now:
            kernel.handle(JobSubmitted(arrivals[i]), now)
            i += 1
        while heap and heap[0][0] == now and heap[0][1] == 1:
            kernel.handle(TimerFired(heapq.heappop(heap)[4]), now)
        for action in kernel.handle(PassRequested(), now):
            kind = type(action)
            if kind is Bind:
                job = action.job
                if assume:
                    kernel.handle(BindSucceeded(job), now)
                since[job] = now
                first.setdefault(job.job_id, (now, action.placement))
                heapq.heappush(heap, (now + true_remaining(job), 0, next(seq), job, job.epoch))
            elif kind is Evict:
                job = action.job
                if assume:
                    kernel.handle(JobEvicted(job), now)
                set_remaining(job, true_remaining(job) + overhead - (now - since.pop(job)))
            elif kind is Timer:
                heapq.heappush(heap, (action.time, 1, next(seq), None, action.key))
    return first
