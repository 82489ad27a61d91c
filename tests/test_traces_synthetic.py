"""The built-in synthetic workload: calibrated statistics, determinism, learnable repetition."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import status as true_status
from dlsched.traces.stats import trace_stats
from dlsched.traces.synthetic import DEFAULT_CLUSTER, default_cluster, generate, offered_load


@pytest.fixture(scope="module")
def trace():
    return generate(jobs=20_000, seed=0)


@pytest.fixture(scope="module")
def stats(trace):
    return trace_stats(trace, DEFAULT_CLUSTER)


def test_helios_calibration(stats):
    assert stats["gpus"]["single_gpu_share"] > 0.5                   # Fig. 6a
    assert 150 <= stats["duration"]["percentiles"]["p50"] <= 260     # median 206 s
    assert 0.65 <= stats["duration"]["under_1000s"] <= 0.85          # ~3/4 under 1000 s
    assert stats["gpus"]["ge8_share"] < 0.12 and stats["gpus"]["ge8_gpu_time_share"] > 0.4  # Fig. 6
    assert stats["gpus"]["max"] >= 64
    assert {int(g) for g in stats["gpus"]["mix"]} <= {1, 2, 4, 8, 16, 32, 64, 128}
    rates = {k: v["share"] for k, v in stats["status"].items()}
    assert rates["COMPLETED"] == pytest.approx(0.624, abs=0.03)
    assert rates["CANCELLED"] == pytest.approx(0.221, abs=0.03)
    assert rates["FAILED"] == pytest.approx(0.155, abs=0.03)
    assert stats["duration"]["max"] <= 50 * 86400


def test_daily_and_weekly_pattern(stats):
    hours = np.array(stats["arrivals"]["per_hour"])
    assert hours[14:18].mean() > 3 * hours[4:8].mean()               # afternoon peak, night trough
    week = stats["arrivals"]["per_weekday"]
    days_seen = stats["span_days"]
    if days_seen >= 7:
        assert min(week[5:]) < max(week[:5])


def test_offered_load_and_default_cluster(trace, stats):
    assert stats["offered_load"] == pytest.approx(0.8, abs=0.02)
    assert offered_load(trace, DEFAULT_CLUSTER) == pytest.approx(0.8, abs=0.02)
    assert default_cluster(trace) == DEFAULT_CLUSTER
    capacity = {vc: n * 8 for vc, n in DEFAULT_CLUSTER.items()}
    assert all(j.gpus <= capacity[j.vc] for j in trace.jobs)
    custom = generate(jobs=2000, seed=3, vcs={"a": 4, "b": 2})
    sized = default_cluster(custom)
    assert set(sized) <= {"a", "b"} and all(n >= 1 for n in sized.values())


def test_deterministic_per_seed():
    a, b, c = generate(jobs=3000, seed=7), generate(jobs=3000, seed=7), generate(jobs=3000, seed=8)
    def facts(t):
        return [(j.job_id, j.user, j.name, j.vc, j.gpus, j.submit_time, true_duration(j), true_status(j),
                            j.model_name, j.batch_size) for j in t.jobs]
    assert facts(a) == facts(b)
    assert facts(a) != facts(c)
    assert a.jobs[0].job_id == "syn0000000" and a.jobs[0].submit_time <= a.jobs[-1].submit_time


def test_names_repeat_and_history_predicts_duration(trace):
    """Resubmitted names have similar durations: a per-(user, name) history beats a global median."""
    history: dict[tuple[str, str], list[float]] = defaultdict(list)
    err_hist, err_global = [], []
    global_median = np.log(np.median([true_duration(j) for j in trace.jobs]))
    for job in trace.jobs:
        past = history[(job.user, job.name)]
        if past:
            err_hist.append(abs(np.mean(past) - np.log(true_duration(job))))
            err_global.append(abs(global_median - np.log(true_duration(job))))
        past.append(np.log(true_duration(job)))
    assert len(history) < len(trace) / 5
    assert len(err_hist) > 0.7 * len(trace)
    assert np.median(err_hist) < 0.6 * np.median(err_global)


def test_model_fields_and_users(trace):
    assert all(j.model_name and j.batch_size in (16, 32, 64, 128, 256) for j in trace.jobs[:100])
    assert all(j.cpus >= 2 * j.gpus for j in trace.jobs[:100])
    plain = generate(jobs=100, seed=0, model_fields=False)
    assert all(j.model_name == "" for j in plain.jobs)
    users = trace_stats(trace)["users"]
    assert 0.35 <= users["top5pct_gpu_time_share"] <= 0.8           # Fig. 8a: 45-60 %
