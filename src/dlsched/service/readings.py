"""A node agent's readings of running pods: kept for the operator's predicted-vs-observed view,
turned into ``PredictionCorrected`` once a pod is warm, and into the OOM failover (``JobFailed``)
when the memory read does not fit the GPU or its co-runners."""

from __future__ import annotations

from dlsched.core.job import Job, JobState
from dlsched.kernel.correction import observe
from dlsched.kernel.stimuli import JobFailed, PredictionCorrected
from dlsched.service.adoption import gpu_list
from dlsched.service.host import LiveHost

RUNNING = JobState.RUNNING


class Readings:
    """The agent's readings -> the kernel (corrections, OOM failovers)."""

    def __init__(self, host: LiveHost, predict) -> None:
        self.host = host
        self.predict = predict   # its ``calibration`` (when it has one) learns from every memory peak

    def observe(self, uid: str, util: float, mem_mib: float, warmup: float, speed: float = float("nan")) -> str:
        """A reading of a running pod; once the pod has run ``warmup`` seconds it replaces the
        predictions (the simulator's :class:`~dlsched.sim.observe.ObservedCorrection`). ``speed``,
        when the pod's framework reports it, is its throughput relative to running alone: the
        job's observed rate, which PAB's check reads. Returns what happened."""
        host = self.host
        job = host.book.jobs.get(uid)
        if job is None or job.state is not RUNNING:
            return "unknown"
        now = host.now()
        if speed == speed:   # an observation, as the reading of utilisation is
            job.speed = speed
            host.record("speed", uid=uid, speed=speed)
        host.book.observed[uid] = (util, mem_mib, now)
        kept = host.memory   # what the store keeps across restarts (service/memory_kept.py)
        if (cal := getattr(self.predict, "calibration", None)) is not None and cal.observe(uid, mem_mib):
            kept.peak(uid, mem_mib, now)   # the cluster's memory calibration learns from every peak
        host.record("observe", uid=uid, gpu_util=util, gpu_mem_mib=mem_mib)
        over = self.over_memory(job, mem_mib)
        if over:
            self.oom(job, mem_mib, over, now)
            return "oom"
        if now - job.run_since < warmup:
            return "warming up"
        if observe(job, util, mem_mib, now):
            host.handle(PredictionCorrected(job), now)   # the sharing load index re-reads its GPUs
            kept.corrected(job, host.book.pods[uid].key, "observe", now)
        return "corrected"

    def over_memory(self, job: Job, mem_mib: float) -> str:
        """Why the reading means the job ran out of GPU memory, or ''. Over the GPU alone; or, on a
        shared GPU, the holders' memory (observed, else predicted) over it, with this job the
        newest holder (the one whose allocation fails)."""
        if mem_mib != mem_mib:
            return ""
        st = self.host.state
        for idx, mask in job.placement or ():
            cap = st.node_mem[idx]
            if mem_mib > cap:
                return f"observed {mem_mib:.0f} MiB on a {cap:.0f} MiB GPU"
            for g in gpu_list(mask):
                holders = st.gpu_holders(idx, g)
                if len(holders) < 2 or max(h.run_seq for h in holders) != job.run_seq:
                    continue
                total = sum(self.seen_mem(h) for h in holders)
                if total > cap:
                    return f"GPU {g} of {st.node_ids[idx]} holds {total:.0f} MiB of {cap:.0f} MiB"
        return ""

    def seen_mem(self, job: Job) -> float:
        seen = self.host.book.observed.get(job.job_id)
        if seen is not None and seen[1] == seen[1]:
            return seen[1]
        return job.pred_gpu_mem_mib if job.pred_gpu_mem_mib == job.pred_gpu_mem_mib else 0.0

    def oom(self, job: Job, mem_mib: float, why: str, now: float) -> None:
        """The OOM failover, as in the simulator: GPUs freed, the job queued again with its
        observed memory, and the policy's ``job_failed`` told (it corrects the prediction)."""
        host = self.host
        uid = job.job_id
        pod = host.book.pods[uid]
        reason = f"out of GPU memory: {why}"
        job.observed_mem_mib = mem_mib
        self.correct_partners(job, now)
        host.handle(JobFailed(job, reason), now)   # GPUs freed, queued again, the policy's job_failed
        host.memory.corrected(job, pod.key, "oom", now)   # what job_failed corrected, kept for a restart
        host.noms.slots.pop(uid, None)
        host.book.observed.pop(uid, None)
        host.book.waiting[uid] = reason
        host.store.release(uid, pod.key, "oom", now, detail=reason)
        host.record("oom", uid=uid, why=reason, gpu_mem_mib=mem_mib)

    def correct_partners(self, job: Job, now: float) -> None:
        """Co-runners on the failed job's GPUs whose agent reading is above their predicted memory
        get that reading as their prediction now (as the simulator's OOM model does), even inside
        their warm-up: otherwise the failed pod is re-placed beside a partner that is bigger than the
        policy believes, and the same collision repeats."""
        host = self.host
        st = host.state
        for idx, mask in job.placement or ():
            for g in gpu_list(mask):
                for h in st.gpu_holders(idx, g):
                    seen = host.book.observed.get(h.job_id)
                    if h is job or seen is None or not seen[1] > h.pred_gpu_mem_mib:
                        continue
                    observe(h, float("nan"), seen[1], seen[2])
                    host.handle(PredictionCorrected(h), now)
                    host.memory.corrected(h, host.book.pods[h.job_id].key, "partner", now)
                    host.record("corrected", uid=h.job_id, gpu_mem_mib=seen[1],
                                why=f"co-runner of {job.job_id} ran out of memory")
