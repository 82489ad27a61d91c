"""Ground truth for co-located jobs: measured pairs, the fitted curve elsewhere, the rule for three
jobs per GPU, rates that move when a co-runner arrives or leaves, and OOM failover with sharing."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import GPU_TYPES, ClusterSpec, GpuType
from dlsched.core.job import Job
from dlsched.models.colocation import ColocationSpeed
from dlsched.models.colocation_table import ColocationTable, JobType, builtin_table
from dlsched.models.failure import OutOfMemory
from dlsched.registry import make_policy, make_speed_model
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead


def small_table() -> ColocationTable:
    """Two measured types on a 'T' GPU: a (util 60) is slowed 1.25x by b, b (util 40) 2x by a;
    a third type c was never measured in a pair."""
    types = [JobType("a", "net_a", 32, {"T": 60.0}, 6000.0), JobType("b", "net_b", 32, {"T": 40.0}, 4000.0),
             JobType("c", "net_c", 32, {"T": 50.0}, 3000.0)]
    return ColocationTable("small", types, {"T": {(0, 1): 1.25, (1, 0): 2.0}})


class FixedCurve:
    """A fallback that answers 1 + 0.01 x (summed utilisation - 50): easy to check by hand."""

    name = "fixed"

    def fit(self, pairs):
        return self

    def slowdown(self, a, others, gpu_type=""):
        return 1.0 + 0.01 * (a.gpu_util + sum(o.gpu_util for o in others) - 50.0)


def job(jid: str, model: str, submit: float, duration: float, util: float, mem: float = 1000.0,
        pred_mem: float | None = None) -> Job:
    j = Job(jid, "v", 1, submit, duration, model_name=model, batch_size=32, gpu_util=util, gpu_mem_mib=mem)
    j.pred_gpu_mem_mib = mem if pred_mem is None else pred_mem
    return j


def one_gpu(name: str = "T", memory_mib: int = 16 * 1024) -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1, gpu_type=GpuType(name, memory_mib))


def config(**kw) -> SimConfig:
    return SimConfig(check_invariants=True, preemption_overhead=no_overhead, **kw)


def times(result) -> dict:
    return {j.job_id: (j.start_time, j.end_time) for j in result.jobs}


def test_rates_change_when_a_co_runner_arrives_and_leaves():
    """A (100 s of work) alone 0-20: 80 left. B (40 s) joins at 20: A runs at 1/1.25 = 0.8,
    B at 1/2 = 0.5, so B ends at 20 + 40/0.5 = 100; A did 80 x 0.8 = 64 meanwhile, 16 left,
    alone again at full speed: it ends at 116."""
    a, b = job("A", "net_a", 0, 100, 60), job("B", "net_b", 20, 40, 40)
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                    speed_model=ColocationSpeed(small_table(), FixedCurve())).run([a, b])
    assert times(res) == {"A": (0, pytest.approx(116)), "B": (20, pytest.approx(100))}
    assert res.extra["speed_model"] == "colocation"
    assert res.extra["max_slowdown"] == pytest.approx(80 / 40)


def test_unmeasured_pairs_use_the_curve_and_three_jobs_add_their_excess_slowdowns():
    model = ColocationSpeed(small_table(), FixedCurve())
    a, b, c = job("A", "net_a", 0, 1, 60), job("B", "net_b", 0, 1, 40), job("C", "net_c", 0, 1, 50)
    stranger = job("X", "unknown_net", 0, 1, 30)
    assert model.pair(a, b, "T") == 1.25 and model.pair(b, a, "T") == 2.0      # measured
    assert model.pair(a, c, "T") == pytest.approx(1 + 0.01 * (110 - 50))      # curve: 1.6
    assert model.pair(stranger, a, "T") == pytest.approx(1 + 0.01 * (90 - 50))  # unknown type: its own util
    # a beside b and c: 1 + 0.25 + 0.6
    assert model.slowdown(a, [b, c], "T") == pytest.approx(1.85)
    no_util = Job("N", "v", 1, 0, 1, model_name="unknown_net", batch_size=32)
    assert model.resolve(no_util, "T")[1].gpu_util == 100.0  # unknown utilisation counts as saturating


def test_a_pair_measured_on_another_gpu_type_beats_the_curve():
    types = small_table().types
    table = ColocationTable("two-gpus", types, {"T": {(0, 1): 1.25, (1, 0): 2.0}, "U": {(0, 2): 1.5, (2, 0): 1.1}},
                            default_gpu="T")
    model = ColocationSpeed(table, FixedCurve())
    a, b, c = job("A", "net_a", 0, 1, 60), job("B", "net_b", 0, 1, 40), job("C", "net_c", 0, 1, 50)
    assert model.pair(a, c, "T") == 1.5 and model.pair(c, a, "T") == 1.1   # only measured on U
    assert model.pair(a, b, "U") == 1.25                                     # only on T (the default)
    assert model.pair(b, c, "U") == pytest.approx(1 + 0.01 * (90 - 50))      # never measured: the curve


def test_three_jobs_on_one_gpu_by_hand():
    """Cap 3, all from t=0: A (net_a, 60 %), B (net_b, 40 %), C (net_c, 50 %), 100 s of work each.
    s(A) = 1 + 0.25 + 0.6 = 1.85, s(B) = 1 + 1.0 + (1 + 0.01 x 40) - 1 = 2.4,
    s(C) = 1 + 0.6 + 0.4 = 2.0 (curve for both). A ends first at 185; then B (1/2, its pair with
    C: 1.4) and C (1.4): B has 100 - 185/2.4 = 22.917 left at rate 1/1.4 -> +32.08; C 7.5 left,
    rate 1/1.4 -> +10.5: C ends at 195.5; B then alone: 22.917 - 10.5/1.4 = 15.417 left -> 210.917."""
    jobs = [job("A", "net_a", 0, 100, 60), job("B", "net_b", 0, 100, 40), job("C", "net_c", 0, 100, 50)]
    res = Simulator(one_gpu(), make_policy("fifo", share=True), config(max_jobs_per_gpu=3),
                    speed_model=ColocationSpeed(small_table(), FixedCurve())).run(jobs)
    t = times(res)
    assert t["A"][1] == pytest.approx(185.0)
    assert t["C"][1] == pytest.approx(195.5)
    assert t["B"][1] == pytest.approx(185 + 10.5 + (100 - 185 / 2.4 - 10.5 / 1.4))


def test_oom_failover_with_sharing_end_to_end():
    """T4 (16 GiB from the data sheet). A: 10,000 MiB. B predicted 4,000 MiB but truly 9,000: it
    joins A at 20 (A at 0.8, B at 0.5), crashes 10 s later and loses its progress; A did
    20 + 8 = 28 by 30 and ends alone at 102. B's request is corrected to 9,000 MiB, it no longer
    fits beside A and runs alone 102-152."""
    t4 = GPU_TYPES["T4"]
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1, gpu_type=t4)
    table = ColocationTable("t4", small_table().types, {"T4": {(0, 1): 1.25, (1, 0): 2.0}})
    a = job("A", "net_a", 0, 100, 60, mem=10_000)
    b = job("B", "net_b", 20, 50, 40, mem=9_000, pred_mem=4_000)
    res = Simulator(cluster, make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                    speed_model=ColocationSpeed(table, FixedCurve()), failure_model=OutOfMemory(delay=10)).run([a, b])
    assert times(res) == {"A": (0, pytest.approx(102)), "B": (20, pytest.approx(152))}
    assert b.failures == 1 and b.pred_gpu_mem_mib == 9_000 and "out of memory" in b.last_failure
    assert res.extra["failures"] == 1 and res.extra["jobs_failed_at_least_once"] == 1


def test_the_default_fallback_is_the_horus_curve_fitted_on_the_table():
    from dlsched.predictors.interference.horus_curve import HorusCurve

    model = ColocationSpeed(small_table())
    assert isinstance(model.fallback, HorusCurve)
    a, c = job("A", "net_a", 0, 1, 60), job("C", "net_c", 0, 1, 50)
    u = 60 + 50
    assert model.pair(a, c, "T") == pytest.approx(max(1.0, float(model.fallback.curve(u, "T")[0])))


def test_builtin_table_ships_and_the_registry_model_uses_measured_pairs():
    table = builtin_table()
    assert len(table.types) == 26 and table.gpu_types == ["K80", "P100", "V100"]
    assert table.gpu_key("A100") == "V100" and table.gpu_key("v100-16gb") == "V100"
    r50, a3c = table.find("resnet50", 32), table.find("a3c_pong", 1)
    measured = table.pair_slowdown(r50, a3c, "V100")
    assert measured is not None and measured > 1
    cluster = one_gpu("V100", 32 * 1024)
    model = make_speed_model("colocation", cluster)
    x = Job("x", "v", 1, 0, 10, model_name="resnet50", batch_size=32, gpu_util=100.0, gpu_mem_mib=7024)
    y = Job("y", "v", 1, 0, 10, model_name="a3c_pong", batch_size=1, gpu_util=51.1, gpu_mem_mib=2057)
    # the registry's model runs the built-in *truth*: this pair does less work than time slicing
    # (1/2.104 + 1/s_a3c < 1), so the truth scales it to exactly time slicing; builtin-raw keeps it
    from dlsched.models.truth import resolve_truth

    capped = resolve_truth("builtin").table.pair_slowdown(r50, a3c, "V100")
    assert model.pair(x, y, "V100") == capped and 1 < capped < measured
    raw = make_speed_model("colocation", cluster, profiles="builtin-raw")
    assert raw.pair(x, y, "V100") == measured
    assert len(table.observations("V100")) == len({tuple(sorted(k)) for k in table.pairs["V100"]})


def test_table_from_the_shared_profile_sets(shared):
    from dlsched.profiles import load_gavel, load_lucid

    table = ColocationTable.from_profile_sets([load_lucid(shared / "profiles"), load_gavel(shared / "profiles")])
    r18 = table.find("resnet18_cifar", 32)
    assert r18 is not None and table.types[r18].gpu_util[""] > 0  # Lucid's utilisation, zoo name
    assert table.pair_slowdown(r18, r18, "v100") is not None    # Gavel's pair on V100
    assert all(s >= 1.0 for t in table.pairs.values() for s in t.values())


def test_a_multi_gpu_job_runs_at_the_pace_of_its_most_slowed_gpu():
    """X holds both GPUs of a node from 0 (100 s of work); B joins one of them at 10 for 40 s of
    work: X runs at 1/1.25 (the shared GPU sets its pace), B at 1/2: B ends at 10 + 80 = 90, X
    did 10 + 64 by then and ends alone at 116."""
    x = Job("X", "v", 2, 0, 100, model_name="net_a", batch_size=32, gpu_util=60.0, gpu_mem_mib=1000)
    x.pred_gpu_mem_mib = 1000
    b = job("B", "net_b", 10, 40, 40)
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=2, gpu_type=GpuType("T", 16 * 1024))
    res = Simulator(cluster, make_policy("fifo", share=True), config(max_jobs_per_gpu=2),
                    speed_model=ColocationSpeed(small_table(), FixedCurve())).run([x, b])
    assert times(res) == {"X": (0, pytest.approx(116)), "B": (10, pytest.approx(90))}
