"""Failure models: out of memory when the true memory on a GPU exceeds its capacity.

:class:`OutOfMemory` (Horus §4.2's failover case): when a job starts on GPUs whose holders'
*true* peak memory (measured, ``gpu_mem_mib``) adds up to more than the GPU's capacity, the job
that just joined crashes ``delay`` seconds later (the time to build the model and reach the
first training step's peak). It goes back to its queue with the attempt counted, its progress
since the start lost, and the observed memory recorded on the job (``observed_mem_mib``: the
crash report says how much it needed; written when the crash happens, never before, so no pass
between the start and the crash sees it), so a policy's ``job_failed`` hook can correct its
request before it runs again. Jobs without a measured memory never fail.

The crash also shows who filled the GPU: when the kernel fails the job it tells the model
(:meth:`OutOfMemory.failed`), and every co-runner on a GPU the crashed job overfilled whose true
peak exceeds its predicted memory gets that peak as an *observation*
(:func:`dlsched.kernel.correction.observe`: the prediction is replaced, the prior kept), as a node
agent would report it for a running process. Correcting only the crashed job would let a policy
put it back beside an under-predicted co-runner until ``max_failures``.

**Re-checked whenever a GPU's holders change.** A crash is *armed* at the start and decided by
the state when it would strike: when a holder of the job's GPUs stops before then (finishes, is
preempted or crashes) and the GPU no longer holds more than it has, the crash is disarmed and the
job runs on (the partner left before the peak was reached); the engine asks :meth:`still_due` at
the crash time, so a disarmed crash never fires, and the progress lost is the progress made up to
that moment (the rates of the state in between). A job reaches its peak within its first steps,
so the crash comes at ``min(delay, remaining solo time / 2)``: a job shorter than the delay
cannot overfill a GPU and simply finish.

**The retry rule** (so that a run never aborts on one job's repeated crashes, issue 36): on its
first out-of-memory crash a job's memory request becomes its largest observed peak (the crash
report), whatever policy runs; a job that crashes out of memory *again* is not co-located until
it has run: its request becomes the whole memory of the largest GPU it crashed on, so no partner
fits beside it and it fits beside none (it runs alone, where its true peak fits if it can run at
all). :attr:`OutOfMemory.isolated` counts the jobs this rule isolated.
"""

from __future__ import annotations

import math

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.correction import observe
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stop import OOM_PREFIX, StopReason


def true_gpu_mem(state: ClusterState, node: int, gpu: int) -> float:
    """True peak memory (MiB) of the jobs holding GPU ``gpu`` of ``node``: ground truth, which
    the kernel does not keep (its books hold predictions); jobs without a measurement count 0."""
    total = 0.0
    for job in state.gpu_holders(node, gpu):
        mem = job._measured.gpu_mem_mib
        total += mem if mem == mem else 0.0
    return total


class OutOfMemory:
    name = "oom"

    def __init__(self, delay: float = 60.0) -> None:
        if delay < 0:
            raise ValueError(f"the OOM delay must be >= 0 s, got {delay}")
        self.delay = delay
        self.armed: dict[Job, int] = {}  # job -> run_seq of the start whose crash is pending
        self.disarmed = 0                # crashes called off because a holder left in time
        self.ooms: dict[Job, int] = {}   # job -> out-of-memory crashes so far (the retry rule)
        self.isolated = 0                # jobs the retry rule made run alone
        self._state: ClusterState | None = None

    def on_start(self, job: Job, state: ClusterState, now: float) -> list[tuple[float, Job, str]]:
        need = job._measured.gpu_mem_mib
        if need != need:  # no measurement: nothing to check
            return []
        if self._state is not state:  # hear every stop of this run: a stop may call a crash off
            self._state = state
            self.armed.clear()
            state.add_observer(self)
        reason = self._overfilled(job, state, None)
        if reason is None:
            return []
        self.armed[job] = job.run_seq
        return [(now + min(self.delay, job._remaining / 2.0), job, reason)]

    def _overfilled(self, job: Job, state: ClusterState, leaving: Job | None) -> str | None:
        """Why ``job``'s GPUs hold more than they have (``leaving`` not counted), or None."""
        for node, mask in job.placement or ():
            cap = state.node_mem[node]
            for g in set_bits(mask):
                used = true_gpu_mem(state, node, g)
                if leaving is not None and leaving.placement:
                    for n2, m2 in leaving.placement:
                        if n2 == node and m2 >> g & 1:
                            mem = leaving._measured.gpu_mem_mib
                            used -= 0.0 if math.isnan(mem) else mem
                if used > cap:
                    return (f"{OOM_PREFIX} on GPU {g} of node {state.node_ids[node]}: its jobs need "
                            f"{used:,.0f} MiB, it has {cap:,.0f} MiB")
        return None

    def stopped(self, job: Job, vc, now: float, why: StopReason) -> None:
        """A holder leaves (called before it releases its GPUs): re-check the armed crashes of
        the jobs that share a GPU with it."""
        self.armed.pop(job, None)
        if not self.armed or self._state is None:
            return
        state = self._state
        for other in state.co_runners(job, "gpu"):
            if other in self.armed and self._overfilled(other, state, job) is None:
                del self.armed[other]
                self.disarmed += 1

    def _retry_rule(self, job: Job, state: ClusterState, now: float) -> None:
        """First crash: request := largest observed peak; a later one: the whole GPU (run alone)."""
        n = self.ooms[job] = self.ooms.get(job, 0) + 1
        seen = max(job.observed_mem_mib, job.pred_gpu_mem_mib if job.pred_gpu_mem_mib == job.pred_gpu_mem_mib
                   else 0.0)
        if n >= 2:
            cap = max((state.node_mem[node] for node, _ in job.placement or ()), default=seen)
            if not job.pred_gpu_mem_mib >= cap:
                self.isolated += 1
            seen = max(seen, cap)
        if not job.pred_gpu_mem_mib >= seen:
            observe(job, float("nan"), seen, now)

    def still_due(self, job: Job, state: ClusterState, now: float) -> bool:
        """Asked by the engine when an armed crash would strike: only if it is still armed."""
        return self.armed.pop(job, None) == job.run_seq

    def failed(self, job: Job, state: ClusterState, now: float, reason: str) -> None:
        """``job`` crashes now (before it releases its GPUs): its crash report gives its peak
        memory, and its co-runners' peaks are observed on each of its GPUs whose holders truly
        need more than the GPU has."""
        if not reason.startswith(OOM_PREFIX):
            return
        job.observed_mem_mib = job._measured.gpu_mem_mib  # the crash report: how much it needed
        self._retry_rule(job, state, now)
        for node, mask in job.placement or ():
            cap = state.node_mem[node]
            for g in set_bits(mask):
                if not true_gpu_mem(state, node, g) > cap:
                    continue
                for other in state.gpu_holders(node, g):
                    peak = other._measured.gpu_mem_mib
                    if other is not job and peak == peak and not other.pred_gpu_mem_mib >= peak:
                        observe(other, float("nan"), peak, now, state)
