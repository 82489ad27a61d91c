"""Delivered GPU utilisation: measured utilisation x current rate, summed per GPU, capped at 100 %,
integrated exactly between transitions; reported beside the busy-GPU share."""

from __future__ import annotations

import json
import random

import pytest

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job
from dlsched.metrics.delivered import DeliveredUtilisation
from dlsched.models.colocation import ColocationSpeed
from dlsched.models.colocation_table import ColocationTable, JobType
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.runner import RunSpec, run_observers, run_one
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead


def table() -> ColocationTable:
    types = [JobType("a", "net_a", 32, {"T": 60.0}, 6000.0), JobType("b", "net_b", 32, {"T": 40.0}, 4000.0)]
    return ColocationTable("small", types, {"T": {(0, 1): 1.25, (1, 0): 2.0}})


def job(jid: str, model: str, submit: float, duration: float, util: float, gpus: int = 1) -> Job:
    j = Job(jid, "v", gpus, submit, duration, model_name=model, batch_size=32, gpu_util=util, gpu_mem_mib=1000)
    j.pred_gpu_mem_mib = 1000
    return j


def cluster(nodes: int = 1, gpus: int = 1) -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": nodes}, gpus_per_node=gpus, gpu_type=GpuType("T", 16 * 1024))


def run(jobs, speed_model=None, cap=2, nodes=1, gpus=1):
    obs = DeliveredUtilisation()
    res = Simulator(cluster(nodes, gpus), make_policy("fifo", share=cap > 1),
                    SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=cap),
                    speed_model=speed_model, observers=(obs,)).run(jobs)
    return res, obs.summary(res.metrics)


def test_delivered_utilisation_by_hand_with_interference():
    """A (60 %) alone 0-20: 0.6; with B (40 %) 20-100: A at 0.8 delivers 0.48, B at 0.5 delivers
    0.2; A alone 100-116: 0.6. Area 12 + 54.4 + 9.6 = 76 GPU-s over 116 s on one GPU."""
    res, s = run([job("A", "net_a", 0, 100, 60), job("B", "net_b", 20, 40, 40)],
                 ColocationSpeed(table()))
    assert res.metrics.gpu_utilization() == pytest.approx(1.0)
    assert s["delivered_gpu_utilization"] == pytest.approx(76 / 116)
    assert s["delivered_per_busy_gpu"] == pytest.approx(76 / 116)


def test_a_gpu_delivers_at_most_100_percent_and_idle_gpus_nothing():
    """No speed model, cap 2: A (70 %) and B (60 %) share GPU 0 for 0-100 (capped at 1.0);
    C (50 %) runs alone on GPU 1 for 0-50. Area 100 + 25 over 2 GPUs x 100 s; busy 150 GPU-s."""
    jobs = [job("A", "x", 0, 100, 70), job("C", "y", 0, 50, 50), job("B", "z", 0, 100, 60)]
    jobs[1].pred_gpu_mem_mib = 16 * 1024  # C takes a GPU of its own
    res, s = run(jobs, gpus=2)
    assert {j.job_id: j.end_time for j in res.jobs} == {"A": 100, "B": 100, "C": 50}
    assert s["delivered_gpu_utilization"] == pytest.approx(125 / 200)
    assert s["delivered_per_busy_gpu"] == pytest.approx(125 / 150)


def test_a_job_spanning_two_nodes_and_a_job_without_a_measurement():
    """W (2 GPUs on 2 one-GPU nodes, no measured utilisation: counts as 100 %) runs 0-10 alone:
    2 GPUs of work; then U (30 %) alone on one node 10-20. Area 20 + 3 over 2 GPUs x 20 s."""
    w = Job("W", "v", 2, 0, 10, gpu_mem_mib=1000)
    w.pred_gpu_mem_mib = 16 * 1024
    u = job("U", "x", 10, 10, 30)
    _, s = run([w, u], cap=1, nodes=2)
    assert s["delivered_gpu_utilization"] == pytest.approx(23 / 40)


def test_observer_only_with_a_speed_model_or_sharing_and_keys_in_summary(tmp_path):
    assert run_observers(RunSpec(), has_speed_model=False) == ()
    assert len(run_observers(RunSpec(config=SimConfig(max_jobs_per_gpu=2)), False)) == 1
    assert len(run_observers(RunSpec(), has_speed_model=True)) == 1
    jobs = [job("A", "net_a", 0, 100, 60), job("B", "net_b", 20, 40, 40)]
    spec = RunSpec("fifo", config=SimConfig(max_jobs_per_gpu=2, preemption_overhead=no_overhead),
                   speed_model="time-sliced")
    summary = run_one(jobs, cluster(), spec, tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    # time slicing: A 0-20 alone (0.6), 20-100 both at 1/2 (0.3 + 0.2), then A alone with 40 left
    assert saved["delivered_gpu_utilization"] == pytest.approx((12 + 40 + 24) / 140)
    assert summary["gpu_utilization"] == pytest.approx(1.0)
    plain = run_one([job("A", "net_a", 0, 10, 60)], cluster(), RunSpec("fifo"), tmp_path / "plain")
    assert "delivered_gpu_utilization" not in plain


class _EveryNode(DeliveredUtilisation):
    """The reference: before every change, the level that held since the last one, computed from
    scratch over every GPU of every node (each GPU: the sum of its jobs' utilisation x rate,
    capped at 1), times the time since the last change."""

    def _advance(self, now: float) -> None:
        if self.state is None:
            return
        level = 0.0
        for node, holders in enumerate(self.state.node_holders):
            per_gpu = [0.0] * self.state.node_gpus[node]
            for j, mask in holders.items():
                util = j._measured.gpu_util
                share = (1.0 if util != util else util / 100) * j.speed
                for g in range(len(per_gpu)):
                    if mask >> g & 1:
                        per_gpu[g] += share
            level += sum(min(1.0, x) for x in per_gpu)
        if self.t_last is not None and now > self.t_last:  # the state now is the one since t_last
            self.area += level * (now - self.t_last)
        self.level = level
        if self.t_last is None or now > self.t_last:
            self.t_last = now


@pytest.mark.parametrize(("policy", "seed", "speed"), [
    ("horus", 4, "time-sliced"), ("horus", 7, "time-sliced"), ("fifo", 4, "time-sliced"), ("fifo", 11, "colocation"),
    ("horus", 5, "colocation"), ("fifo", 3, None)])
def test_moving_only_the_gpus_a_change_moved_gives_the_area_of_re_measuring_every_gpu(policy, seed, speed):
    """Sharing, re-rating speed models and jobs spanning nodes: a start or stop re-rates the
    partners of the job, whose other nodes then deliver less or more."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(300):
        t += rng.expovariate(1 / 30.0)
        model = rng.choice(["net_a", "net_b"])
        j = Job(f"j{i}", "v", rng.choice([1, 1, 2, 4, 8, 12]), t, rng.uniform(50, 2000), model_name=model,
                batch_size=32, gpu_util=rng.choice([float("nan"), rng.uniform(10, 100)]), gpu_mem_mib=1000)
        j.pred_gpu_mem_mib = rng.uniform(500, 8000)
        jobs.append(j)
    areas = []
    scope = "gpu" if speed is None else {"time-sliced": TimeSlicedSpeed, "colocation": ColocationSpeed}[speed].scope
    for obs in (DeliveredUtilisation(scope), DeliveredUtilisation("node"), _EveryNode()):
        for j in jobs:
            j.reset()
        model = {"time-sliced": TimeSlicedSpeed(), "colocation": ColocationSpeed(table()), None: None}[speed]
        res = Simulator(cluster(nodes=4, gpus=4), make_policy(policy, share=True),
                        SimConfig(max_jobs_per_gpu=2, preemption_overhead=no_overhead),
                        speed_model=model, observers=(obs,)).run(jobs)
        areas.append((obs.summary(res.metrics)["delivered_gpu_utilization"], obs.area))
    assert areas[0] == pytest.approx(areas[2], rel=1e-12)
    assert areas[1] == pytest.approx(areas[2], rel=1e-12)
    assert 0 < areas[0][0] < 1


def test_an_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="scope must be 'gpu' or 'node'"):
        DeliveredUtilisation("vc")
