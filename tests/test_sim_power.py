"""Energy saving inside the simulation: controllers drive node power through the engine."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.energy.vanilla import VanillaDRSController
from dlsched.registry import make_policy
from dlsched.runner import RunSpec, make_power_manager
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.power import PowerManager


def test_vanilla_powers_idle_nodes_off_and_wakes_them_for_a_job():
    jobs = [Job("a", "v", 8, 0, 50), Job("b", "v", 16, 1000, 100)]
    pm = PowerManager(VanillaDRSController(4, idle_timeout=100, boot_delay=300), vc_reserve=0.25)
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 4}), make_policy("fifo"), SimConfig(check_invariants=True),
                    power_manager=pm)
    res = sim.run(jobs)
    # at the 600 s check three idle nodes go off (one is kept as the VC's reserve); "b" needs two
    # nodes, finds one, wakes one, and starts when it has booted (1000 + 300)
    assert [(j.start_time, j.end_time) for j in jobs] == [(0, 50), (1300, 1400)]
    summary = pm.summary(res.metrics)
    assert summary["wakeups"] == 1 and summary["woken_nodes"] == 1 and summary["jobs_waiting_for_power"] == 1
    # node-seconds off: one node 600..1300, two nodes 600..1400, over 1400 s
    assert summary["avg_powered_off_nodes"] == pytest.approx((700 + 2 * 800) / 1400)


def test_ces_in_simulation_delays_fewer_jobs_than_vanilla():
    from dlsched.traces import synthetic

    trace = synthetic.generate(jobs=3000, seed=5, days=7, load=0.4)
    cluster = ClusterSpec.from_vc_sizes(synthetic.default_cluster(trace))
    Simulator(cluster, make_policy("fifo")).run(trace.jobs)
    base_queue = sum(j.queue_delay for j in trace.jobs) / len(trace.jobs)
    out = {}
    for energy in ("ces", "vanilla"):
        power = make_power_manager(RunSpec(energy=energy, origin=trace.origin), cluster)
        res = Simulator(cluster, make_policy("fifo"), power_manager=power).run(trace.jobs)
        out[energy] = {**power.summary(res.metrics),
                       "queue": sum(j.queue_delay for j in trace.jobs) / len(trace.jobs)}
    # measured: base 197 s; CES 44.0 nodes off, 58 jobs waited, 210 s, 2.9 wake-ups/day;
    # vanilla 79.5 off, 166 waited, 236 s, 10.2 wake-ups/day
    assert out["ces"]["avg_powered_off_nodes"] > 0.4 * len(cluster.nodes)
    assert out["ces"]["jobs_waiting_for_power"] < 0.5 * out["vanilla"]["jobs_waiting_for_power"]
    assert base_queue < out["ces"]["queue"] < out["vanilla"]["queue"]
    assert out["ces"]["daily_wakeups"] < out["vanilla"]["daily_wakeups"]
