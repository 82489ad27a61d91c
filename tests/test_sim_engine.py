"""The event loop on small hand-checked scenarios."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.core.truth import duration as true_duration
from dlsched.kernel.view import OracleAccessError
from dlsched.metrics.summary import summarize
from dlsched.registry import POLICIES, make_policy
from dlsched.sched.protocols import PolicyBase
from dlsched.sim import SimConfig, SimulationError, Simulator
from dlsched.sim.config import helios_checkpoint_overhead, no_overhead


def run(jobs, policy="fifo", nodes=1, placement="consolidate", **cfg):
    cfg.setdefault("check_invariants", True)
    cfg.setdefault("preemption_overhead", no_overhead)
    options = {"backfill": cfg.pop("backfill")} if "backfill" in cfg else {}
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": nodes}), make_policy(policy, placement, **options),
                    SimConfig(**cfg))
    return sim.run(jobs)


def times(result):
    return {j.job_id: (j.start_time, j.end_time) for j in result.jobs}


def three():
    return [Job("big0", "v", 4, 0, 100), Job("wide", "v", 8, 1, 50), Job("small", "v", 2, 2, 10)]


def test_fifo_blocks_behind_the_head():
    assert times(run(three())) == {"big0": (0, 100), "wide": (100, 150), "small": (150, 160)}


def test_fifo_with_backfill_fills_gaps():
    assert times(run(three(), backfill=True)) == {"big0": (0, 100), "wide": (100, 150), "small": (2, 12)}


def test_sjf_orders_by_true_duration():
    jobs = [Job("a", "v", 8, 0, 10), Job("long", "v", 8, 1, 100), Job("short", "v", 8, 2, 5)]
    assert times(run(jobs, "sjf")) == {"a": (0, 10), "short": (10, 15), "long": (15, 115)}


def test_srtf_preempts_and_pays_overhead():
    jobs = [Job("long", "v", 8, 0, 100), Job("short", "v", 8, 10, 20)]
    res = run(jobs, "srtf")
    assert times(res) == {"long": (0, 120), "short": (10, 30)}
    assert [j.preemptions for j in res.jobs] == [1, 0]
    assert res.jobs[0].queue_delay == 20
    jobs = [Job("long", "v", 8, 0, 100), Job("short", "v", 8, 10, 20)]
    res = run(jobs, "srtf", preemption_overhead=helios_checkpoint_overhead)
    assert times(res)["long"] == (0, 150)  # 90 s left + 30 s checkpoint/restart for 8 GPUs


def test_helios_compat_ends_preemptive_jobs_one_tick_late():
    jobs = [Job("long", "v", 8, 0, 100), Job("short", "v", 8, 10, 20)]
    res = run(jobs, "srtf", compat="helios", preemption_overhead=helios_checkpoint_overhead)
    assert times(res) == {"long": (0, 152), "short": (10, 31)}
    jobs = [Job("a", "v", 8, 0, 10)]
    assert times(run(jobs, "fifo", compat="helios")) == {"a": (0, 10)}  # FIFO keeps exact ends


def test_deterministic_and_rerunnable():
    jobs = [Job(f"j{i}", "v", 1 + i % 8, float(i // 3), float(10 + (i * 37) % 90)) for i in range(200)]
    first = times(run(jobs, "srtf", nodes=3))
    second = times(run(jobs, "srtf", nodes=3))  # same Job objects: reset() clears runtime state
    assert first == second
    assert all(j.state is JobState.FINISHED for j in jobs)


def test_job_that_can_never_fit_is_an_error():
    with pytest.raises(SimulationError, match="needs 16 GPUs but VC 'v' has only 8"):
        run([Job("huge", "v", 16, 0, 1)])


def test_unknown_vc_is_an_error():
    with pytest.raises(SimulationError, match="VC 'nope' is not in the cluster"):
        run([Job("x", "nope", 1, 0, 1)])


def test_non_oracle_policy_cannot_read_true_durations():
    class Peeking(PolicyBase):
        name, placement_name = "peek", "none"

        def new_queue(self):
            from dlsched.kernel.queues import ArrivalQueue
            return ArrivalQueue()

        def schedule(self, view, vc):
            view.duration(vc.queue.head())
            yield from ()

    with pytest.raises(OracleAccessError):
        Simulator(ClusterSpec.from_vc_sizes({"v": 1}), Peeking()).run([Job("a", "v", 1, 0, 5)])


def test_utilization_is_time_weighted():
    res = run([Job("a", "v", 4, 0, 100), Job("b", "v", 8, 100, 100)])
    # 4 of 8 GPUs for 100 s, then 8 of 8 for 100 s
    assert res.metrics.gpu_utilization() == pytest.approx(0.75)
    summary = summarize(res.jobs, res.metrics)
    assert summary["makespan"] == 200 and summary["per_vc"]["v"]["gpu_utilization"] == pytest.approx(0.75)


def test_summary_groups_follow_helios_table4():
    jobs = [Job("s", "v", 1, 0, 60), Job("m", "v", 1, 0, 3600), Job("l", "v", 1, 0, 7 * 3600)]
    summary = summarize(run(jobs).jobs)
    assert {k: v["jobs"] for k, v in summary["groups"].items()} == {"short": 1, "middle": 1, "long": 1}
    assert summary["groups"]["middle"]["avg_jct"] == 3600


def test_speed_model_changes_finish_times():
    class HalfSpeedWhenShared:
        """Jobs on a node with another job run at half speed."""

        scope = "node"

        def rate(self, job, state):
            node = job.placement[0][0]
            return 0.5 if len(state.node_holders[node]) > 1 else 1.0

    jobs = [Job("a", "v", 4, 0, 100), Job("b", "v", 4, 50, 100)]
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 1}), make_policy("fifo"), SimConfig(check_invariants=True),
                    speed_model=HalfSpeedWhenShared())
    res = sim.run(jobs)
    # a: 50 s alone, then 50 s of work at half speed -> ends at 150; b: 50 s work by 150, 50 s alone
    assert times(res) == {"a": (0, 150), "b": (50, 200)}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_finishes_every_job_once(name):
    jobs = [Job(f"j{i}", "v", [1, 2, 4, 8, 12][i % 5], float(i * 7 % 50), float(5 + i % 40),
                user=f"u{i % 3}", name=f"n{i % 4}") for i in range(120)]
    res = run(jobs, name, nodes=2)
    assert all(j.state is JobState.FINISHED and j.end_time >= j.start_time >= j.submit_time for j in res.jobs)
    assert all(j.end_time - j.start_time >= true_duration(j) - 1e-9 for j in res.jobs)
