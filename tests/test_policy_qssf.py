"""QSSF: reference fidelity with the priority file, value with the online estimator, no leakage."""

from __future__ import annotations

import pandas as pd
import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.metrics.summary import summarize
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator

REF = "traces/philly/reference_run"


@pytest.fixture(scope="module")
def philly(philly_reference, shared):
    from dlsched.predictors.duration.priority import load_priority_file

    trace, vc_nodes = philly_reference
    return trace, vc_nodes, load_priority_file(shared / REF / "input_qssf_priority_Philly_lgb.csv.gz")


@pytest.mark.parametrize("quirks,max_mismatch", [(True, 22), (False, 0)])
def test_qssf_with_reference_priorities_matches_reference(philly, shared, quirks, max_mismatch):
    trace, vc_nodes, priorities = philly
    policy = make_policy("qssf", priorities=priorities, helios_quirks=quirks)
    Simulator(ClusterSpec.from_vc_sizes(vc_nodes), policy, SimConfig(compat="helios")).run(trace.jobs)
    summary = pd.read_csv(shared / REF / "base_vc_config/summary_all.csv").set_index("policy").loc["qssf"]
    jct = sum(j.end_time - j.submit_time for j in trace.jobs) / len(trace.jobs)
    queue = sum(j.queue_delay for j in trace.jobs) / len(trace.jobs)
    assert jct == pytest.approx(summary.avg_jct_s, rel=0.005)
    assert queue == pytest.approx(summary.avg_queue_s, rel=0.005)
    assert sum(j.queue_delay > 0 for j in trace.jobs) == pytest.approx(summary.queued_jobs, rel=0.005)
    ref = pd.read_csv(shared / REF / "base_vc_config/qssf_jobs.csv.gz", dtype={"vc": str}).set_index("jobname")
    starts = ref.start_time.to_dict()
    assert sum(starts[j.job_id] != j.start_time for j in trace.jobs) <= max_mismatch  # same-second ties only


def test_qssf_priority_file_must_cover_every_job():
    jobs = [Job("a", "v", 1, 0, 10), Job("b", "v", 1, 1, 10)]
    policy = make_policy("qssf", priorities={"a": 5.0})
    with pytest.raises(ValueError, match="no entry for 1 of 2 jobs"):
        policy.validate_trace(jobs)  # what the runner asks before a run: the policy keeps no job list
    with pytest.raises(ValueError, match="no entry for job b"):  # and it fails loudly if asked anyway
        Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy).run(jobs)


def test_qssf_orders_by_gpu_time():
    jobs = [Job("run", "v", 8, 0, 100), Job("wide", "v", 8, 1, 10), Job("long", "v", 1, 2, 50)]
    policy = make_policy("qssf", priorities={"run": 1.0, "wide": 10.0, "long": 50.0})
    Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy, SimConfig(check_invariants=True)).run(jobs)
    # GPU time: wide 8 x 10 = 80 > long 1 x 50 = 50, so "long" goes first
    assert {j.job_id: j.start_time for j in jobs} == {"run": 0, "long": 100, "wide": 150}


@pytest.fixture(scope="module")
def congested():
    from dlsched.traces import synthetic

    trace = synthetic.generate(jobs=6000, seed=3)
    return trace, ClusterSpec.from_vc_sizes(synthetic.default_cluster(trace))


def test_online_qssf_beats_fifo_on_a_congested_workload(congested):
    trace, cluster = congested
    out = {}
    for name, opts in (("fifo", {}), ("qssf", {"origin": trace.origin})):
        res = Simulator(cluster, make_policy(name, **opts)).run(trace.jobs)
        out[name] = summarize(trace.jobs, res.metrics)
    assert out["fifo"]["queued_jobs"] > 1000  # the workload really queues
    assert out["qssf"]["avg_jct"] < 0.5 * out["fifo"]["avg_jct"]
    assert out["qssf"]["avg_queue_delay"] < 0.3 * out["fifo"]["avg_queue_delay"]
    assert out["qssf"]["groups"]["short"]["avg_jct"] < out["fifo"]["groups"]["short"]["avg_jct"]


def test_online_qssf_never_uses_the_future(congested):
    """Changing durations of jobs submitted after T must not change any start before T."""
    trace, cluster = congested
    cut = sorted(j.submit_time for j in trace.jobs)[len(trace.jobs) // 2]

    def starts(jobs):
        Simulator(cluster, make_policy("qssf", origin=trace.origin)).run(jobs)
        return {j.job_id: j.start_time for j in jobs if j.start_time < cut}

    base = starts(trace.jobs)
    altered = [Job(j.job_id, j.vc, j.gpus, j.submit_time, true_duration(j) * (7.0 if j.submit_time >= cut else 1.0),
                   user=j.user, name=j.name, cpus=j.cpus) for j in trace.jobs]
    assert starts(altered) == base
