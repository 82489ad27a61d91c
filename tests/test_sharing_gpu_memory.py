"""Per-node GPU memory in every sharing policy and placement (issue 33, point 1), on virtual clusters
whose nodes differ in GPU memory.

The property (hypothesis): with 2 jobs per GPU, after every scheduling pass of every registered
policy under every registered placement (the registry is iterated, so a new entry is covered
without editing this file), the holders' predicted memory on each GPU is at most *that node's*
GPU memory -- a shared GPU, and a free one a job takes alone (unless no GPU of its VC is as large
as its prediction: then it runs alone anywhere, as it always did). A job's true memory is its
prediction, so an oracle reads the same figures.

Policies that by design co-locate without predicting memory are named by their own declaration
(``oom_check = False``: Loadbalance and Mystic, which rely on the OOM failover as their papers do);
the checker is shown to catch them, so it is not a test that cannot fail. Plus a hand-checked
Horus case: a job without a memory prediction stands for the VC's *largest* GPU, not its first
node's, so its failure does not hold back a job that fits a larger GPU beside another job.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_paths import CONFIGS as FAST_PATH_CONFIGS
from test_fast_paths import assert_same

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, VirtualCluster
from dlsched.core.job import Job
from dlsched.registry import PLACERS, POLICIES, make_policy
from dlsched.sched.sharing.load import too_small
from dlsched.sim import SimConfig, SimulationError, Simulator
from dlsched.sim.config import no_overhead

CAP = 2
MEMORIES = (8_192, 20_480, 24_576, 40_960)            # MiB per GPU: nodes of one VC differ
JOB_MEMORY = (1_500.0, 5_862.0, 9_389.0, 16_445.0, 22_000.0, 30_000.0, 50_000.0, math.nan)   # NaN: none


def cluster(nodes: list[tuple[int, int]]) -> ClusterSpec:
    """One VC ``v`` of nodes ``(GPUs, memory per GPU)``, in that order."""
    specs = [NodeSpec(f"n{i}", "v", gpus, GpuType(f"M{mem}", mem)) for i, (gpus, mem) in enumerate(nodes)]
    return ClusterSpec(specs, {"v": VirtualCluster("v", tuple(s.node_id for s in specs))})


def make_job(jid: str, gpus: int, submit: float, duration: float, util: float, mem: float) -> Job:
    job = Job(jid, "v", gpus, submit, duration, gpu_util=util, gpu_mem_mib=mem)
    job.pred_gpu_util, job.pred_gpu_mem_mib, job.pred_duration = util, mem, duration
    return job


def overfilled(state) -> list[str]:
    """GPUs whose holders' predicted memory exceeds their node's GPU memory: shared ones, and a
    job alone on a GPU smaller than its prediction while its VC has nodes large enough for it."""
    out = []
    for node in range(len(state.node_ids)):
        for gpu in range(state.node_gpus[node]):
            holders = state.gpu_holders(node, gpu)
            if not holders or (len(holders) == 1 and not too_small(state.vcs[state.node_vc[node]], holders[0])):
                continue   # alone, and its VC has no (set of) nodes large enough for it: anywhere
            if state.gpu_pred_mem(node, gpu) > state.node_mem[node]:
                out.append(f"{state.node_ids[node]} GPU {gpu} ({state.node_mem[node]:.0f} MiB): "
                           + " + ".join(f"{j.job_id} {j.pred_gpu_mem_mib:.0f}" for j in holders))
    return out


def run_checked(policy_name: str, placement: str | None, nodes: list[tuple[int, int]], jobs: list[Job]) -> list[str]:
    """Simulate; after every pass of the policy, the overfilled GPUs (the first pass that has any
    ends the run). Raises ValueError when the policy refuses the placement or the jobs."""
    policy = make_policy(policy_name, placement, share=True)
    inner = policy.schedule
    found: list[str] = []

    def schedule(view, vc):
        yield from inner(view, vc)   # every decision is carried out before the next is asked for
        bad = overfilled(view.state)
        if bad and not found:
            found.extend(bad)

    policy.schedule = schedule
    config = SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=CAP)
    Simulator(cluster(nodes), policy, config).run(jobs)
    return found


def combos() -> list[tuple[str, str | None]]:
    """Every registered policy with its own placement and with every registered placement."""
    return [(p, placement) for p in POLICIES for placement in (None, *PLACERS)]


def checks_memory(policy_name: str) -> bool:
    return getattr(POLICIES[policy_name], "oom_check", True)


nodes_st = st.lists(st.tuples(st.sampled_from((1, 2, 4)), st.sampled_from(MEMORIES)), min_size=2, max_size=4) \
    .filter(lambda ns: len({m for _, m in ns}) > 1)
jobs_st = st.lists(st.tuples(st.sampled_from((1, 1, 1, 2)), st.integers(0, 40), st.integers(5, 120),
                             st.sampled_from((10.0, 40.0, 90.0)), st.sampled_from(JOB_MEMORY)),
                   min_size=3, max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, raw=jobs_st)
def test_no_registered_policy_or_placement_overfills_a_node_of_less_memory(nodes, raw):
    ran = 0
    problems, refused = [], []
    for policy_name, placement in combos():
        if not checks_memory(policy_name):
            continue
        jobs = [make_job(f"j{i}", *r) for i, r in enumerate(raw)]
        try:
            bad = run_checked(policy_name, placement, nodes, jobs)
        except (ValueError, SimulationError) as exc:
            refused.append(f"{policy_name} + {placement or 'own'}: {exc}")
            continue   # a policy that refuses this placement or these jobs (said so in its error)
        ran += 1
        if bad:
            problems.append(f"{policy_name} + {placement or 'own'}: {bad[0]}")
    assert not problems, problems[:5]
    assert ran >= len(POLICIES), refused[:3]   # most combinations run; a refusal is the exception


def test_the_checker_catches_a_policy_that_pairs_without_a_memory_check():
    """Loadbalance pairs without predicting memory (oom_check = False): 16,445 + 16,445 MiB on a
    20,480 MiB GPU is found, after the pass that made it."""
    assert not checks_memory("loadbalance") and not checks_memory("mystic")
    jobs = [make_job("a", 1, 0, 100, 40.0, 16_445.0), make_job("b", 1, 1, 100, 40.0, 16_445.0)]
    bad = run_checked("loadbalance", None, [(1, 20_480)], jobs)
    assert bad == ["n0 GPU 0 (20480 MiB): a 16445 + b 16445"]
    # the same jobs under a policy that checks: b waits for a
    assert run_checked("coscheml", None, [(1, 20_480)], jobs) == []


def test_every_registered_policy_runs_in_the_property():
    """The property covers the registry: every policy that checks memory runs with at least one
    placement on a mixed-memory VC (a policy refusing every placement would escape it)."""
    nodes = [(2, 40_960), (2, 20_480)]
    raw = [(1, 0, 50, 40.0, 16_445.0), (1, 0, 50, 40.0, 5_862.0), (1, 1, 50, 40.0, 16_445.0),
           (1, 2, 50, 40.0, 16_445.0), (1, 3, 50, 40.0, 5_862.0), (2, 4, 50, 40.0, 9_389.0)]
    covered = set()
    for policy_name, placement in combos():
        if not checks_memory(policy_name) or policy_name in covered:
            continue
        try:
            assert run_checked(policy_name, placement, nodes, [make_job(f"j{i}", *r) for i, r in enumerate(raw)]) == []
        except (ValueError, SimulationError):
            continue
        covered.add(policy_name)
    # easy/conservative refuse a sharing placement (exclusive_only): no GPU of theirs can be overfilled
    assert covered == {p for p in POLICIES if checks_memory(p) and not getattr(POLICIES[p], "exclusive_only", False)}


@pytest.mark.parametrize("policy_name", ["horus", "fifo", "ffd-util", "coscheml"])
def test_a_job_too_large_for_the_first_node_runs_on_the_larger_one_instead_of_crashing(policy_name):
    """A 30,000 MiB job (truly that much) on a VC of a 20,480 MiB node (first) and a free 40,960
    MiB one, with the OOM model: it starts on the 40 GiB GPU at t=0 and never fails. Before, the
    free-GPU shortcuts took the lowest node whatever its memory: it crashed there 11 times, and the
    simulation stopped at the failure limit."""
    from dlsched.registry import make_failure_model

    spec = cluster([(1, 20_480), (1, 40_960)])
    job = make_job("big", 1, 0, 100, 30.0, 30_000.0)
    config = SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=CAP)
    res = Simulator(spec, make_policy(policy_name, share=True), config,
                    failure_model=make_failure_model("oom")).run([job])
    (done,) = res.jobs
    assert (done.start_time, done.end_time, done.failures) == (0, 100, 0)


def test_a_job_larger_than_every_gpu_of_its_vc_still_runs_alone():
    """50,000 MiB on 20 and 40 GiB GPUs: no node is large enough, so none is excluded (it would
    wait forever): it runs alone on the first free GPU, as without the per-node check."""
    jobs = [make_job("huge", 1, 0, 100, 30.0, 50_000.0)]
    policy = make_policy("horus", share=True)
    config = SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=CAP)
    res = Simulator(cluster([(1, 20_480), (1, 40_960)]), policy, config).run(jobs)
    assert [(j.start_time, j.end_time) for j in res.jobs] == [(0, 100)]


def test_horus_counts_an_unpredicted_job_as_the_vcs_largest_gpu():
    """g20 (20,480 MiB, the VC's first node) holds a (10,000), a100 (40,960) holds b (5,000). x has no
    memory prediction (it needs a free GPU) and fails; y (25,000) fits beside b (30,000 <= 40,960).
    Counting x as a whole *first-node* GPU (20,480) made y look dominated by x's failure, and y
    waited until t=100; as the VC's largest GPU (40,960) it is tried and starts at t=2."""
    nodes = [NodeSpec("g20", "v", 1, GpuType("G20", 20_480)), NodeSpec("a100", "v", 1, GpuType("A100", 40_960))]
    spec = ClusterSpec(nodes, {"v": VirtualCluster("v", ("g20", "a100"))})
    jobs = [make_job("a", 1, 0, 100, 30.0, 10_000.0), make_job("b", 1, 0, 100, 30.0, 5_000.0),
            make_job("x", 1, 1, 100, 30.0, math.nan), make_job("y", 1, 2, 100, 30.0, 25_000.0)]
    policy = make_policy("horus", share=True)
    config = SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=CAP)
    res = Simulator(spec, policy, config).run(jobs)
    starts = {j.job_id: j.start_time for j in res.jobs}
    assert starts == {"a": 0, "b": 0, "x": 100, "y": 2}


@pytest.mark.parametrize("mems, expected, small", [((40_960, 20_480), 40_960.0, 0b10),
                                                   ((20_480, 24_576), 24_576.0, 0b01)])
def test_the_vcs_largest_gpu_follows_node_changes(mems, expected, small):
    """``VcState.max_gpu_mem`` / ``min_gpu_mem`` / ``mem_levels``: the GPUs of the VC's present
    nodes, after a node's memory changes in place and after a node leaves; ``too_small`` reads them."""
    from dlsched.kernel.state import ClusterState
    from dlsched.sched.sharing.load import too_small

    state = ClusterState(cluster([(1, m) for m in mems]), max_jobs_per_gpu=CAP)
    vc = state.vcs[0]
    assert vc.max_gpu_mem == expected and vc.min_gpu_mem == float(min(mems))
    assert too_small(vc, make_job("j", 1, 0, 1, 10.0, 22_000.0)) == small   # the node of less than 22,000 MiB
    assert too_small(vc, make_job("n", 1, 0, 1, 10.0, math.nan)) == 0
    assert too_small(vc, make_job("h", 1, 0, 1, 10.0, 99_000.0)) == 0
    state.set_gpu_type(1, GpuType("big", 49_152))
    assert vc.max_gpu_mem == 49_152.0 and state.node_mem[1] == 49_152.0
    assert state.node_specs[1].gpu_type.memory_mib == 49_152
    assert vc.mem_levels == ((float(mems[0]), 0b01, 2, 1), (49_152.0, 0b10, 1, 1))
    assert too_small(vc, make_job("w", 2, 0, 1, 10.0, 30_000.0)) == 0   # two GPUs: no node of 48 GiB has them
    state.remove_node(1)
    assert vc.max_gpu_mem == vc.min_gpu_mem == float(mems[0])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=nodes_st, raw=jobs_st)
def test_the_fast_paths_agree_with_the_general_ones_on_mixed_memory(nodes, raw):
    """Every sharing configuration of tests/test_fast_paths.py, on VCs whose nodes differ in GPU
    memory: the same starts, placements and stops with every shortcut on and off. (Horus's
    free-GPU shortcut assumed that free GPUs all cost the same, true only when they have the same
    memory; and a job too large for every GPU may run where a smaller one may not, so no failed
    fit dominates another there.)"""
    for config in FAST_PATH_CONFIGS:
        if config[2] > 1:
            assert_same([make_job(f"j{i}", *r) for i, r in enumerate(raw)], cluster(nodes), config)
