"""RequestQueue: its arrays always match its jobs, in queue order, through pushes, removes (and
the squeezing out of dead slots), growth and refreshed predictions."""

from __future__ import annotations

import math
import random

import numpy as np

from dlsched.core.job import Job
from dlsched.sched.requestqueue import RequestQueue


def _expected(queue: RequestQueue) -> tuple[list[int], list[float]]:
    jobs = list(queue)
    return [j.gpus for j in jobs], [j.pred_gpu_mem_mib for j in jobs]


def test_arrays_follow_the_queue_through_random_changes():
    rng = random.Random(0)
    queue, waiting, made = RequestQueue(), [], 0
    for _ in range(3000):
        if waiting and rng.random() < 0.45:
            job = waiting.pop(rng.randrange(len(waiting)))
            queue.remove(job)
        else:
            job = Job(f"j{made}", "v", rng.choice([1, 2, 4, 8]), 0.0, 1.0)
            job.pred_gpu_mem_mib = rng.choice([math.nan, rng.uniform(100, 30000)])
            made += 1
            queue.push(job)
            waiting.append(job)
        if waiting and rng.random() < 0.05:  # a waiting job's prediction corrected
            job = rng.choice(waiting)
            job.pred_gpu_mem_mib = rng.uniform(100, 30000)
            queue.refresh(job)
        gpus, mem = queue.requests()
        want_gpus, want_mem = _expected(queue)
        assert gpus.tolist() == want_gpus
        np.testing.assert_array_equal(mem, np.array(want_mem, float))
        assert queue.gpus == sum(want_gpus)


def test_requests_are_copies():
    queue = RequestQueue()
    job = Job("a", "v", 2, 0.0, 1.0)
    job.pred_gpu_mem_mib = 1000.0
    queue.push(job)
    gpus, mem = queue.requests()
    mem[0] = 5.0
    queue.remove(job)
    queue.push(Job("b", "v", 1, 0.0, 1.0))
    assert gpus.tolist() == [2] and mem.tolist() == [5.0]
    assert queue.requests()[0].tolist() == [1]
