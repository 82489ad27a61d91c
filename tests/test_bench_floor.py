"""benchmarks/bench_floor.py: the floor's FIFO with consolidate placement gives exactly the start
times of dlsched's simulator (head of line per VC, the reference's node choices), on congested
random workloads with single-node and multi-node jobs, so the floor it prints is of the same work."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sim.config import SimConfig
from dlsched.sim.engine import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_floor  # noqa: E402


def _workload(seed: int, n: int) -> tuple[list[str], list[int], list[float], list[float]]:
    rng = random.Random(seed)
    vcs = [rng.choice(["a", "b", "c"]) for _ in range(n)]
    gpus = [rng.choice([1, 1, 2, 3, 4, 8, 8, 12, 16, 20]) for _ in range(n)]
    submit = sorted(float(rng.randrange(0, n * 20, 5)) for _ in range(n))  # ties on purpose
    duration = [float(rng.randrange(1, 3000)) for _ in range(n)]
    return vcs, gpus, submit, duration


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_floor_starts_every_job_when_dlsched_does(seed):
    nodes = {"a": 4, "b": 3, "c": 3}
    vcs, gpus, submit, duration = _workload(seed, 1500)
    floor = bench_floor.floor_fifo(vcs, gpus, submit, duration, nodes)
    jobs = [Job(f"j{i}", vcs[i], gpus[i], submit[i], duration[i]) for i in range(len(vcs))]
    result = simulate(jobs, ClusterSpec.from_vc_sizes(nodes, bench_floor.GPUS_PER_NODE),
                      make_policy("fifo", "consolidate"), SimConfig(compat="helios"))
    ours = {job.job_id: job.start_time for job in result.jobs}
    assert [ours[f"j{i}"] for i in range(len(vcs))] == floor
    assert sum(s > t for s, t in zip(floor, submit)) > 300  # congested: the queue order matters


def test_floor_waits_when_a_multi_node_remainder_has_no_room():
    # 2 nodes of 8: a 4-GPU job leaves 4 free on node 0; a 12-GPU job needs node 1 whole and 4 on
    # node 0 (the remaining node with the most free GPUs): it fits; a second 4-GPU job then waits
    start = bench_floor.floor_fifo(["a"] * 3, [4, 12, 4], [0.0, 1.0, 2.0], [10.0, 10.0, 10.0], {"a": 2})
    assert start == [0.0, 1.0, 10.0]
