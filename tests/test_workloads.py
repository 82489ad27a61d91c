"""The GPU-sharing workloads: seeded, the papers' job classes and arrival patterns, profiled truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.models.colocation_table import builtin_table, load_table
from dlsched.workloads import WORKLOADS, attach_predictions, make_workload


def truth(w):
    return [(j.job_id, j.submit_time, true_duration(j), j.model_name, j.batch_size, true_util(j), true_mem(j))
            for j in w.trace.jobs]


@pytest.mark.parametrize("name", [n for n in WORKLOADS if n != "philly-profiled"])
def test_seeded_and_profiled(name):
    a, b, c = make_workload(name, seed=3), make_workload(name, seed=3), make_workload(name, seed=4)
    assert truth(a) == truth(b) and truth(a) != truth(c)
    table = builtin_table()
    cap = a.cluster().nodes[0].gpu_type.memory_mib
    for job in a.trace.jobs:
        i = table.find(job.model_name, job.batch_size)
        assert i is not None and job.name == table.types[i].type_id
        assert true_util(job) == table.util(i, a.gpu) and true_mem(job) == table.types[i].gpu_mem_mib <= cap
        assert job.gpus == 1 and job.vc == "default"


def test_horus_classes_and_mixes():
    w = make_workload("horus-wlarge", seed=0)
    assert (w.gpu, w.vc_nodes, w.gpus_per_node, len(w.trace)) == ("RTX2080", {"default": 3}, 4, 100)
    shares = {}
    for name in ("horus-wlarge", "horus-wsmall"):
        jobs = [j for s in range(6) for j in make_workload(name, seed=s).trace.jobs]
        d = np.array([true_duration(j) for j in jobs])
        u = np.array([true_util(j) for j in jobs])
        assert d.min() >= 180 and d.max() <= 7200  # 3 min to 2 h
        shares[name] = ((d > 800).mean(), (u >= 60).mean())
    assert shares["horus-wlarge"][0] == pytest.approx(0.5, abs=0.06)
    assert shares["horus-wlarge"][1] == pytest.approx(0.6, abs=0.06)
    assert shares["horus-wsmall"][0] == pytest.approx(0.4, abs=0.06)
    assert shares["horus-wsmall"][1] == pytest.approx(0.4, abs=0.06)
    gaps = np.diff([j.submit_time for j in w.trace.jobs])
    assert w.trace.jobs[0].submit_time == 0 and gaps.min() >= 0 and 40 < gaps.mean() < 80


@pytest.mark.parametrize("interval", [15, 30, 60])
def test_coscheml_launch_sequence(interval):
    w = make_workload(f"coscheml-{interval}", seed=1)
    jobs = w.trace.jobs
    assert (w.gpu, w.vc_nodes, w.gpus_per_node, len(jobs)) == ("TitanXp", {"default": 3}, 1, 24)
    assert [j.submit_time for j in jobs] == [n * interval for n in range(24)]
    apps: dict[str, list[float]] = {}
    for j in jobs:
        apps.setdefault(j.name, []).append(true_duration(j))
    assert len(apps) == 12 and all(len(d) == 2 and d[0] == d[1] and 60 <= d[0] <= 600 for d in apps.values())
    assert len({j.model_name for j in jobs}) >= 7  # distinct architectures first


def test_philly_profiled_keeps_the_real_arrivals(shared, philly_reference):
    trace, vc_nodes = philly_reference
    w = make_workload("philly-profiled", seed=0, shared=shared, jobs=2000)
    assert w.vc_nodes == vc_nodes and w.gpus_per_node == 8 and len(w.trace) == 2000
    for src, job in zip(trace.jobs[:2000], w.trace.jobs):
        assert (job.job_id, job.vc, job.gpus, job.submit_time, true_duration(job)) == \
            (src.job_id, src.vc, src.gpus, src.submit_time, src._duration)
        assert job.model_name and not math.isnan(true_util(job)) and not math.isnan(true_mem(job))
    assert len(make_workload("philly-profiled", seed=0, shared=shared).trace) == 68_503


def test_philly_without_the_shared_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="philly-profiled needs the shared Philly reference window"):
        make_workload("philly-profiled", shared=tmp_path)


def test_noisy_prior_where_no_predictor_resolves():
    jobs = [Job(f"j{k}", "v", 1, 0, 10, model_name="no_such_model", batch_size=8, gpu_util=50.0,
                gpu_mem_mib=4000.0) for k in range(200)]
    counts = attach_predictions(jobs, "V100", seed=5, noise=0.25)
    assert counts == {"predictor": 0, "noisy_prior": 200}
    ratio = np.log([j.pred_gpu_mem_mib / 4000.0 for j in jobs])
    assert abs(ratio.mean()) < 0.06 and 0.2 < ratio.std() < 0.3
    assert all(0 < j.pred_gpu_util <= 100 for j in jobs)


def test_unknown_profiles_source_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not a profiles folder"):
        load_table(tmp_path / "nothing")
    with pytest.raises(ValueError, match="unknown workload"):
        make_workload("horus-huge")


def test_cli_trace_generate_workload(tmp_path):
    from dlsched.traces.api import load_trace

    runner = CliRunner()
    out = tmp_path / "c.csv"
    res = runner.invoke(app, ["trace", "generate", str(out), "--workload", "coscheml-30", "--seed", "2"])
    assert res.exit_code == 0, res.output
    assert "--nodes 3 --gpus-per-node 1 --gpu TitanXp" in res.output
    back = load_trace(out)
    assert len(back) == 24 and all(true_util(j) > 0 and j.model_name for j in back.jobs)
    bad = runner.invoke(app, ["trace", "generate", str(out), "--workload", "horus-huge"])
    assert bad.exit_code == 2 and bad.output.strip().startswith("error: unknown workload 'horus-huge'")
    bad = runner.invoke(app, ["trace", "generate", str(out), "--workload", "horus-wsmall", "--profiles", "/nope"])
    assert bad.exit_code == 2 and "error: --profiles: unknown truth '/nope'" in bad.output


def test_cli_simulate_a_workload_with_sharing_truth(tmp_path):
    import json

    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["simulate", "--workload", "coscheml-15", "--seed", "1", "--max-jobs-per-gpu", "2",
                              "--predict-resources", "--speed-model", "colocation", "--failure-model", "oom",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 24 and summary["speed_model"] == "colocation"
    assert 0 < summary["delivered_gpu_utilization"] <= summary["gpu_utilization"]
    assert "predicted GPU utilisation and memory for 24 of 24 jobs" in res.output
    both = runner.invoke(app, ["simulate", "--workload", "coscheml-15", "--trace", "x.csv", "--out", str(out)])
    assert both.exit_code == 2 and "error: give --trace or --workload, not both" in both.output
