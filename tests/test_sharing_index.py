"""The sharing load index (sched/sharing/index.py) changes no decision: Horus rounds, OBP and FIFO
with sharing place exactly as the per-node scan does, on seeded scenes and in a whole run."""

from __future__ import annotations

import random

import pytest

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.kernel.decide import apply as apply_decision
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sched.framework import PlacementPipeline
from dlsched.sched.indexes import make_view


def _scene(policy, seed: int, nodes: int = 16, step: int = 1, pending: int = 200):
    rng = random.Random(seed)
    cluster = ClusterSpec.from_vc_sizes({"all": nodes}, 8, gpu_type("V100"))
    state = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=2)
    i = 0
    for node in range(nodes):
        for g in range(0, 8, step):
            if rng.random() < 0.9:
                j = Job(f"r{i}", "all", 1, 0.0, 3600.0)
                j.pred_gpu_util = rng.choice([rng.uniform(5, 100), float("nan")] if i % 17 else [float("nan")])
                j.pred_gpu_mem_mib = rng.uniform(500, 20000) if i % 13 else float("nan")
                state.submit(j, 0.0)
                state.start(j, ((node, 1 << g),), 0.0)
                i += 1
    for k in range(pending):
        j = Job(f"p{k}", "all", rng.choice([1, 1, 1, 2, 3, 4, 8]), float(k), 3600.0)
        j.pred_gpu_util = rng.uniform(5, 100)
        j.pred_gpu_mem_mib = rng.choice([rng.uniform(500, 16000), float("nan")]) if k % 7 == 0 else rng.uniform(500, 16000)
        state.submit(j, float(k))
    view = make_view(state, policy)
    view.now = float(pending)
    return state, view


def _decisions(name: str, seed: int, use_index: bool, step: int, **options):
    policy = make_policy(name, share=True, **options)
    policy.placer.use_index = use_index
    state, view = _scene(policy, seed, step=step)
    out = []
    for d in policy.schedule(view, state.vcs[0]):
        apply_decision(state, d, view.now)
        out.append((d.job.job_id, getattr(d, "placement", None), getattr(d, "shared", None)))
    state.check_invariants()
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("name,options", [("horus", {"k": 1}), ("horus", {"k": 3, "beta": 7}),
                                          ("obp", {}), ("binpack", {}), ("fifo", {"backfill": True})])
def test_index_gives_the_scan_decisions(seed, step, name, options):
    ref = _decisions(name, seed, False, step, **options)
    assert ref  # the scene leaves room: something starts
    assert _decisions(name, seed, True, step, **options) == ref


def test_index_follows_transitions_and_corrections():
    policy = make_policy("horus", share=True)
    state, view = _scene(policy, 0)
    vc = state.vcs[0]
    idx = view.index("load")
    running = next(iter(vc.running))
    (node, mask), = running.placement
    g = mask.bit_length() - 1
    arr = idx.arrays(vc)
    before = arr.mem[state.node_local[node], g]
    running.pred_gpu_mem_mib = 123.0
    state.predictions_changed(running)  # what kernel.correction.observe announces
    others = sum(o.pred_gpu_mem_mib if o.pred_gpu_mem_mib == o.pred_gpu_mem_mib else state.node_mem[node]
                 for o in state.gpu_holders(node, g) if o is not running)
    assert idx.arrays(vc).mem[state.node_local[node], g] == others + 123.0 != before
    state.finish(running, 10.0)
    row = idx.arrays(vc).mem[state.node_local[node], g]
    assert row == (state.node_mem[node] - state.gpu_free_mem(node, g))
    # the room agrees with the pipeline's per-node room for every node
    job = next(iter(vc.queue))
    _, room, counts = idx.room_counts(vc, job)
    for local, n in enumerate(vc.nodes):
        assert counts[local] == PlacementPipeline.room(view, job, n).bit_count()


def _two_nodes(policy_name: str):
    policy = make_policy(policy_name, share=True)
    cluster = ClusterSpec.from_vc_sizes({"all": 2}, 2, gpu_type("V100"))
    state = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=2)
    for g in range(2):  # node 0: both GPUs hold one small job each
        j = Job(f"r{g}", "all", 1, 0.0, 100.0)
        j.pred_gpu_util, j.pred_gpu_mem_mib = 30.0, 1000.0
        state.submit(j, 0.0)
        state.start(j, ((0, 1 << g),), 0.0)
    view = make_view(state, policy)
    return policy, state, view


def _submit(state, name: str, gpus: int = 1) -> Job:
    j = Job(name, "all", gpus, 1.0, 100.0)
    j.pred_gpu_util, j.pred_gpu_mem_mib = 30.0, 1000.0
    state.submit(j, 1.0)
    return j


@pytest.mark.parametrize("placement", ["consolidate", "best-fit", "first-fit", "spread"])
def test_fifo_sharing_takes_idle_gpus_first(placement):
    policy = make_policy("fifo", placement, share=True)
    cluster = ClusterSpec.from_vc_sizes({"all": 2}, 2, gpu_type("V100"))
    state2 = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=2)
    for g in range(2):
        j = Job(f"r{g}", "all", 1, 0.0, 100.0)
        j.pred_gpu_util, j.pred_gpu_mem_mib = 30.0, 1000.0
        state2.submit(j, 0.0)
        state2.start(j, ((0, 1 << g),), 0.0)
    view = make_view(state2, policy)
    vc = state2.vcs[0]
    a, b, c = _submit(state2, "a"), _submit(state2, "b"), _submit(state2, "c", 2)
    out = []
    for d in policy.schedule(view, vc):
        apply_decision(state2, d, 1.0)
        out.append((d.job, d.placement, d.shared))
    # node 1 is idle: a and b take its GPUs alone (before: both packed beside node 0's jobs);
    # then no idle GPU is left and c (2 GPUs) shares node 0's GPUs
    assert out == [(a, ((1, 0b01),), False), (b, ((1, 0b10),), False), (c, ((0, 0b11),), True)]
    state2.check_invariants()


def test_binpack_still_packs_beside_busy_gpus():
    policy, state, view = _two_nodes("binpack")
    a = _submit(state, "a")
    d = next(policy.schedule(view, state.vcs[0]))
    assert d.job is a and d.placement[0][0] == 0 and d.shared  # the fullest GPU, though node 1 is idle
