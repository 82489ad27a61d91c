"""A tiny preemptive, non-oracle policy for the eviction tests: SRTF by *predicted* remaining
time, the prediction read from the job's model name (``long`` 3,600 s, ``short`` 60 s, else
600 s) minus the GPU-seconds it attained. When the head of the queue does not fit, running jobs
predicted to need longer are preempted, longest first, until it would. ``serve_main`` runs
``dlsched serve`` with it registered as ``test-srtf-pred`` (a child process a test can kill -9)."""

from __future__ import annotations

import sys

from dlsched.kernel.decisions import Preempt
from dlsched.sched.ordering import OrderingPolicy

DURATIONS = {"long": 3600.0, "short": 60.0}


class PredictedSrtf(OrderingPolicy):
    name = "test-srtf-pred"
    preemptive = True

    def job_submitted(self, job, now: float) -> None:
        job.pred_duration = DURATIONS.get(job.model_name, 600.0)

    def remaining(self, job, now: float) -> float:
        done = job.attained + (job.gpus * (now - job.run_since) if job.state.name == "RUNNING" else 0.0)
        return job.pred_duration - done / job.gpus

    def key(self, job) -> float:
        return self.remaining(job, 0.0)

    def schedule(self, view, vc):
        head = vc.queue.head()
        if head is not None and head.gpus > vc.free:
            mine = self.key(head)
            victims = sorted((j for j in vc.running if self.remaining(j, view.now) > mine),
                             key=lambda j: -self.remaining(j, view.now))
            freed, chosen = vc.free, []
            for job in victims:
                if freed >= head.gpus:
                    break
                chosen.append(job)
                freed += job.gpus
            if freed >= head.gpus:
                for job in chosen:
                    yield Preempt(job)
        yield from super().schedule(view, vc)


def register() -> None:
    from dlsched.registry import POLICIES

    POLICIES._entries["test-srtf-pred"] = PredictedSrtf


def serve_main() -> None:
    register()
    from dlsched.cli.main import app

    sys.argv[0] = "dlsched"
    app()


if __name__ == "__main__":
    serve_main()
