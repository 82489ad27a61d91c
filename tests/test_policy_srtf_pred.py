"""srtf-pred: SRTF on predicted remaining time (non-oracle), its attained service, and its live path."""

from __future__ import annotations

import json

import pytest

from dlsched.core.job import Job, JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stimuli import BindSucceeded, Evict, JobEvicted, JobSubmitted, PassRequested, Timer
from dlsched.registry import make_policy
from dlsched.sched.policies.srtf_pred import attained
from tests.support.preemption import preemption_cluster, preemption_jobs


def test_attained_service_sums_every_stint_from_kernel_bookkeeping():
    job = Job("j", "v", 1, 10.0, 1000.0)
    assert attained(job, 50.0) == 0.0                      # never started
    job.state, job.queue_delay, job.start_time = JobState.RUNNING, 20.0, 30.0   # waited 10-30
    assert attained(job, 130.0) == 100.0                   # running since 30
    job.state, job.wait_since = JobState.PENDING, 130.0    # preempted at 130
    assert attained(job, 500.0) == 100.0                   # waiting: no more service
    job.state, job.queue_delay = JobState.RUNNING, 20.0 + 70.0  # restarted at 200
    assert attained(job, 250.0) == 150.0


def test_it_is_not_an_oracle_and_needs_predictions_with_source_job():
    policy = make_policy("srtf-pred", source="job")
    assert policy.oracle is False and policy.preemptive is True and policy.job_finished is None
    with pytest.raises(ValueError, match=r"needs every job's pred_duration; 1 of 1 jobs have none \(e.g. \['x'\]\)"):
        policy.validate_trace([Job("x", "v", 1, 0.0, 10.0)])
    with pytest.raises(ValueError, match="source must be one of estimator, job, got 'oracle'"):
        make_policy("srtf-pred", source="oracle")


def test_the_live_service_check_refuses_it_only_for_preempting():
    from dlsched.service.core import SchedulerCore

    try:  # refused today for its evictions (the adapter branch lets it in), never as an oracle
        SchedulerCore.check_policy(make_policy("srtf-pred", source="job"))
    except ValueError as exc:
        assert "preempts running jobs" in str(exc)
    with pytest.raises(ValueError, match="is an oracle"):
        SchedulerCore.check_policy(make_policy("srtf"))


def test_live_the_scenario_evicts_once_with_why_and_for_whom():
    """The done-when job list through the kernel's live entry point: an eviction is a request."""
    long, short, medium = preemption_jobs()
    policy = make_policy("srtf-pred", source="job", min_run_s=600.0)
    state = ClusterState(preemption_cluster(), new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=True)
    kernel.handle(JobSubmitted(long), 0.0)
    [bind] = kernel.handle(PassRequested(), 0.0)
    kernel.handle(BindSucceeded(long), 0.0)
    kernel.handle(JobSubmitted(short), 300.0)
    # long has run 300 s < 600: protected, and the policy asks for a pass when that ends
    assert kernel.handle(PassRequested(), 300.0) == [Timer(600.0, ("vc", 0))]
    kernel.handle(JobSubmitted(medium), 1000.0)
    [evict] = kernel.handle(PassRequested(), 1000.0)
    assert type(evict) is Evict and evict.job is long
    assert evict.reason == "srtf-pred: 11000 s remaining ranks outside VC v's 4 GPUs; for job short"
    assert kernel.handle(PassRequested(), 1005.0) == []    # still checkpointing: not asked twice
    kernel.handle(JobEvicted(long), 1010.0)
    [bind] = kernel.handle(PassRequested(), 1010.0)
    assert bind.job is short and policy.guard.summary() == {
        "evictions": 1, "evictions_refused_min_run": 1, "evictions_refused_cap": 0}


def test_simulate_cli_runs_it_with_the_estimator(tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    res = CliRunner().invoke(app, ["simulate", "--policy", "srtf-pred", "--jobs", "400", "--param", "min_run_s=600",
                                   "--out", str(tmp_path / "r"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout[res.stdout.index("{"):res.stdout.rindex("}") + 1])
    assert summary["policy"] == "srtf-pred" and summary["jobs"] == 400
    assert summary["evictions"] == summary["preemptions"]
    assert {"evictions_refused_min_run", "evictions_refused_cap"} <= summary.keys()
    bad = CliRunner().invoke(app, ["simulate", "--policy", "srtf-pred", "--jobs", "50", "--param", "min_run_s=-5",
                                   "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "error:" in bad.output and "min_run_s" in bad.output
    assert "Traceback" not in bad.output
