"""The job split as a memory step: a simulate run's traced peak per job, and every public Job
attribute reading as it did when each one was a slot of its own."""

from __future__ import annotations

import gc
import math
import pickle
import sys
import tracemalloc

import numpy as np
import pytest

from dlsched.core import truth
from dlsched.core.job import NO_PREDICTION, Job, JobSpec, JobState, Measured, OracleAccessError

# Peak bytes traced per job while the built-in workload of 20,000 jobs is generated, simulated
# with FIFO and written (the library path of `dlsched simulate --jobs 20000`). Measured on
# Python 3.11: 772 now; 1,353 before the job split, the streaming writer and the lean loader.
PEAK_BYTES_PER_JOB = 1000

REQUEST = dict(user="alice", name="train_resnet", cpus=12, status="FAILED", model_name="resnet50", batch_size=64,
               onnx_ref="zoo:resnet50", gpu_util=71.5, gpu_mem_mib=9000.0, min_utility=0.25, index=7,
               optimizer="sgd", amp=True, seq_len=512, attention="eager", stack="torch-2.1")


def test_simulate_peak_traced_memory_per_job_is_bounded(tmp_path):
    from dlsched.runner import RunSpec, cluster_for, run_one
    from dlsched.traces import synthetic

    n = 20_000
    was = gc.isenabled()
    gc.disable()  # as the CLI runs it; the collector's timing would only blur the peak
    tracemalloc.start()
    try:
        trace = synthetic.generate(jobs=n, seed=0)
        cluster = cluster_for(trace.jobs, synthetic.default_cluster(trace))
        summary = run_one(trace.jobs, cluster, RunSpec(policy="fifo"), tmp_path / "run")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        if was:
            gc.enable()
    assert summary["jobs"] == n
    assert peak / n < PEAK_BYTES_PER_JOB, f"{peak / n:.0f} bytes per job at the peak"


# Bytes a FIFO simulation of the built-in 20,000 jobs keeps per job once it is over (results
# held, nothing written): the end time, a waiting job's queue delay, the kernel's index by id. Measured
# on Python 3.11: 87 now; 163 before a finished job gave back its two counters (enq_seq, run_seq: an
# int each) and a job that did not wait kept the shared 0.0 delay.
RETAINED_BYTES_PER_JOB = 120


def test_a_finished_run_keeps_little_per_job():
    from dlsched.registry import make_policy
    from dlsched.runner import cluster_for
    from dlsched.sim import Simulator
    from dlsched.traces import synthetic

    n = 20_000
    trace = synthetic.generate(jobs=n, seed=0)
    sim = Simulator(cluster_for(trace.jobs, synthetic.default_cluster(trace)), make_policy("fifo"))
    was = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = sim.run(trace.jobs)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        if was:
            gc.enable()
    jobs = result.jobs
    assert len(jobs) == n and all(j.state is JobState.FINISHED for j in jobs)
    assert all(j.enq_seq == 0 and j.run_seq == 0 for j in jobs)
    idle = [j for j in jobs if j.start_time == j.submit_time]
    assert 0 < len(idle) < n and all(j.queue_delay == 0.0 for j in idle)
    assert len({id(j.queue_delay) for j in idle}) == 1  # one shared 0.0, not one float a job
    assert kept / n < RETAINED_BYTES_PER_JOB, f"{kept / n:.0f} bytes kept per job"


def test_a_job_is_small():
    job = Job("j", "vc", 1, 0.0, 10.0)
    assert len(Job.__slots__) == 28
    assert sys.getsizeof(job) <= 256  # 46 slots and 400 bytes before the split


def test_every_public_attribute_reads_what_the_constructor_got():
    job = Job("j1", "vc2", 4, 12.5, 300.0, **REQUEST)
    for name, value in REQUEST.items():
        if name in ("status", "gpu_util", "gpu_mem_mib"):
            continue  # truth: read below
        got = getattr(job, name)
        assert got == value and type(got) is type(value), name
    assert (job.job_id, job.vc, job.gpus, job.submit_time) == ("j1", "vc2", 4, 12.5)
    assert (truth.duration(job), truth.remaining(job), truth.status(job), truth.gpu_util(job),
            truth.gpu_mem_mib(job)) == (300.0, 300.0, "FAILED", 71.5, 9000.0)
    for name in ("pred_duration", "pred_gpu_util", "pred_gpu_mem_mib", "priority", "prior_gpu_util",
                 "prior_gpu_mem_mib", "observed_mem_mib"):
        assert math.isnan(getattr(job, name)), name
    assert (job.observed_at, job.last_failure, job.state, job.start_time, job.end_time) == (-1.0, "", JobState.CREATED,
                                                                                           -1.0, -1.0)
    assert (job.preemptions, job.failures, job.queue_delay, job.speed, job.placement) == (0, 0, 0.0, 1.0, None)


def test_defaults_and_writes_read_back():
    job = Job("j", "vc", 1, 0.0, 10.0)
    assert (job.cpus, job.model_name, job.batch_size, job.onnx_ref, job.optimizer, job.amp, job.seq_len,
            job.attention, job.stack, job.user, job.name, job.index) == (0, "", 0, "", "", False, 0, "", "", "", "", -1)
    assert math.isnan(job.min_utility) and math.isnan(truth.gpu_util(job)) and truth.status(job) == ""
    writes = dict(vc="all", cpus=3, model_name="bert", batch_size=8, onnx_ref="x.onnx", min_utility=0.5,
                  optimizer="adam", amp=True, seq_len=128, attention="fused", stack="s", pred_gpu_util=40.0,
                  pred_gpu_mem_mib=1234.0, prior_gpu_util=1.0, prior_gpu_mem_mib=2.0, observed_at=5.0,
                  last_failure="oom", observed_mem_mib=777.0, pred_duration=9.0, priority=3.0)
    for name, value in writes.items():
        setattr(job, name, value)
    for name, value in writes.items():
        assert getattr(job, name) == value, name
    truth.set_measured(job, gpu_mem_mib=4321.0, status="DONE")
    truth.set_measured(job, gpu_util=56.0)
    assert (truth.gpu_util(job), truth.gpu_mem_mib(job), truth.status(job)) == (56.0, 4321.0, "DONE")


def test_shared_records_are_never_changed_in_place():
    a, b = (Job(f"j{i}", "vc", 1, 0.0, 10.0, model_name="resnet50", batch_size=32, status="COMPLETED")
            for i in range(2))
    assert a._spec is b._spec and a._measured is b._measured  # equal requests cost one record
    a.batch_size = 64
    a.pred_gpu_mem_mib = 5000.0
    assert (a.batch_size, b.batch_size) == (64, 32)
    assert math.isnan(b.pred_gpu_mem_mib) and b._predicted is NO_PREDICTION
    c = Job("j2", "vc", 1, 0.0, 10.0, model_name="resnet50", batch_size=32, status="COMPLETED")
    c.batch_size = 64
    assert c._spec is a._spec  # the same change to the same record: one record again
    d = Job("j3", "vc", 1, 0.0, 10.0, batch_size=1)
    e = Job("j4", "vc", 1, 0.0, 10.0, batch_size=1.0)
    assert type(d.batch_size) is int and type(e.batch_size) is float  # 1 == 1.0, yet not one record


def test_reset_restores_priors_and_clears_the_failure():
    job = Job("j", "vc", 1, 0.0, 10.0)
    job.pred_gpu_util, job.pred_gpu_mem_mib = 30.0, 3000.0
    job.prior_gpu_util, job.prior_gpu_mem_mib, job.observed_at = 30.0, 3000.0, 50.0
    job.pred_gpu_util, job.pred_gpu_mem_mib = 80.0, 9000.0  # the observation replaced them
    job.last_failure, job.observed_mem_mib = "oom", 9500.0
    job.reset()
    assert (job.pred_gpu_util, job.pred_gpu_mem_mib, job.observed_at, job.last_failure) == (30.0, 3000.0, -1.0, "")
    assert math.isnan(job.prior_gpu_util) and math.isnan(job.observed_mem_mib)
    kept = Job("k", "vc", 1, 0.0, 10.0)
    kept.pred_gpu_util, kept.last_failure = 20.0, "node lost"
    kept.reset()  # no observation: predictions stay, the failure goes
    assert (kept.pred_gpu_util, kept.last_failure) == (20.0, "")


def test_truth_stays_hidden_and_pickles():
    job = Job("j", "vc", 1, 0.0, 10.0, gpu_mem_mib=100.0, model_name="m")
    for name in ("duration", "remaining", "gpu_util", "gpu_mem_mib", "status"):
        with pytest.raises(OracleAccessError):
            getattr(job, name)
    assert job.model_name == "m" and truth.gpu_mem_mib(job) == 100.0
    back = pickle.loads(pickle.dumps(job))
    assert (back.model_name, truth.gpu_mem_mib(back), back.vc, truth.duration(back)) == ("m", 100.0, "vc", 10.0)
    # no __getattr__ on Job: it would turn off CPython's specialised slot reads for every attribute
    assert "__getattr__" not in vars(Job)


def test_loaded_jobs_share_records_and_read_their_columns(tmp_path):
    from dlsched.traces.api import load_trace

    path = tmp_path / "t.csv"
    rows = ["job_id,vc,gpus,submit_time,duration,cpus,model_name,batch_size,status,gpu_util"]
    for i in range(300):
        rows.append(f"j{i},vc{i % 2},1,{i},{60 + i % 7},{4 + 4 * (i % 3)},{'resnet50' if i % 5 else 'bert'},"
                    f"{32 if i % 2 else 64},{'COMPLETED' if i % 4 else 'FAILED'},{'' if i % 6 == 0 else 50 + i % 3}")
    path.write_text("\n".join(rows) + "\n")
    jobs = load_trace(path, "dlsched").jobs
    for i, job in enumerate(jobs):
        assert job.vc == f"vc{i % 2}" and job.cpus == 4 + 4 * (i % 3) and type(job.cpus) is int
        assert job.model_name == ("resnet50" if i % 5 else "bert") and job.batch_size == (32 if i % 2 else 64)
        assert truth.status(job) == ("COMPLETED" if i % 4 else "FAILED") and truth.duration(job) == 60 + i % 7
        assert math.isnan(truth.gpu_util(job)) if i % 6 == 0 else truth.gpu_util(job) == 50 + i % 3
    assert len({id(j._spec) for j in jobs}) == len({(j.vc, j.cpus, j.model_name, j.batch_size) for j in jobs}) == 12
    assert len({id(j._duration) for j in jobs}) == 7  # equal run times: one float
    assert isinstance(jobs[0]._spec, JobSpec) and isinstance(jobs[0]._measured, Measured)
    assert np.array_equal([j.index for j in jobs], np.arange(300))
