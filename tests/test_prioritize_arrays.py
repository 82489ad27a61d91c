"""Prioritize read through arrays (a score per node id, the offered names' ids kept with the name
list) gives what the dict path gave: the nominated node 10, every other node the placement's
score mapped to 1..9, 0 where the pod cannot go. And the placement's score pieces
(``PlacementPipeline.score_parts``: free-count buckets, the vector stage) score every node as
scoring it on its own would, for every registered placer, exclusive and shared."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.registry import PLACERS, make_policy
from dlsched.service.answers import priority
from dlsched.service.core import MAX_SCORE, SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")

MODELS = {"small": (30.0, 3000.0), "mid": (55.0, 9000.0), "big": (85.0, 20000.0)}


class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def build(placement: str, cap: int, nodes: list[NodeFacts]):
    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = MODELS.get(job.model_name, MODELS["mid"])

    policy = "horus" if placement == "horus-cost" else "fifo"
    core = SchedulerCore(make_policy(policy, placement, share=cap > 1), Store("sqlite://"),
                         max_jobs_per_gpu=cap, clock=iter(range(1000, 10**6)).__next__, predict=predict)
    for node in nodes:
        core.node_seen(node)
    return core, LiveService(core, Bridge())


def node_by_node(pipeline, view, vc, job) -> dict[int, float]:
    """The definition the shortcuts must keep: every candidate node scored on its own."""
    share = pipeline.share and view.max_jobs_per_gpu > 1
    from dlsched.sched.framework import too_small

    cand = pipeline._candidates(view, vc, job, share, too_small(vc, job) if view.max_jobs_per_gpu > 1 else 0)
    wsum = sum(w for _, w in pipeline.scorers)
    out = {}
    for local, node in enumerate(vc.nodes):
        if cand >> local & 1 and not any(f.filter(view, vc, job, node) for f in pipeline.filters):
            out[node] = sum(w * s.score(view, vc, job, node) for s, w in pipeline.scorers) / wsum
    return out


@st.composite
def scenes(draw):
    n = draw(st.integers(1, 9))
    nodes = [NodeFacts(f"n{i}", draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from(["default", "default", "other"])),
                       "", False, gpu_mem_mib=draw(st.sampled_from([0, 16384, 24576, 40960])))
             for i in range(n)]
    pods = draw(st.lists(st.tuples(st.integers(1, 8), st.sampled_from(sorted(MODELS))), min_size=1, max_size=12))
    offered = draw(st.permutations([node.name for node in nodes] + ["ghost"]))
    return nodes, pods, offered


@settings(max_examples=15, deadline=None)
@pytest.mark.parametrize("cap", [1, 2])
@pytest.mark.parametrize("placement", sorted(PLACERS))
@given(scene=scenes())
def test_array_priorities_equal_the_dict_path_and_node_by_node_scores(placement, cap, scene):
    nodes, pods, offered = scene
    core, service = build(placement, cap, nodes)
    ad = core.adapter
    pipeline = ad.policy.placer
    for i, (gpus, model) in enumerate(pods):
        p = PodFacts(f"p{i}", "default", f"p{i}", gpus, created=float(i), annotations={"dlsched.io/model": model})
        passed, _ = core.filter(p, offered)
        got = core.priorities(p, offered).tolist()
        job = ad.book.jobs.get(p.uid)
        if job is None or job.state.name == "RUNNING":
            assert got == [0] * len(offered)
        else:
            nominated = job.placement[0][0] if job.state.name == "ASSUMED" else None
            # the dict path, as prioritize answered before the arrays
            named = core.policy_scores(job)
            if nominated is not None:
                named[ad.state.node_ids[nominated]] = MAX_SCORE
            assert got == [named.get(name, 0) for name in offered]
            # the definition: each node scored on its own
            ad.view.now = ad.now()
            want = node_by_node(pipeline, ad.view, job.vc_state, job)
            assert pipeline.scores(ad.view, job.vc_state, job) == pytest.approx(want, rel=0, abs=1e-12)
            ids = [ad.state.node_index.get(name) for name in offered]
            assert got == [MAX_SCORE if nid is not None and nid == nominated else
                           priority(want[nid]) if nid in want else 0 for nid in ids]
        assert got[offered.index("ghost")] == 0
        if passed and i % 3 != 2:   # some pods bind, others stay nominated or waiting
            assert service.bind("default", p.name, p.uid, passed[0]) == ""


def test_the_offered_ids_follow_a_node_that_joins_after_the_list_was_seen():
    """The ids kept with a name list are looked up again when the state's nodes change: a node
    the list named before it joined scores once it has."""
    core, _ = build("consolidate", 1, [NodeFacts("a", 8, "default", "", False)])
    p = PodFacts("p", "default", "p", 2, created=0.0)
    names = ["a", "b"]
    core.filter(p, names)
    before = core.priorities(p, list(names)).tolist()
    core.node_seen(NodeFacts("b", 8, "default", "", False))
    after = core.priorities(p, list(names)).tolist()
    assert before[1] == 0
    assert after[0] == MAX_SCORE and 1 <= after[1] <= 9


def test_two_cores_with_the_same_names_in_another_order_keep_their_own_ids():
    """The ids kept with a name list belong to one state: a second core (same node count, the
    names joined in another order) must not read the first one's."""
    names = ["a", "b"]
    first, _ = build("best-fit", 1, [NodeFacts("a", 8, "default", "", False), NodeFacts("b", 4, "default", "", False)])
    second, _ = build("best-fit", 1, [NodeFacts("b", 4, "default", "", False), NodeFacts("a", 8, "default", "", False)])
    p = PodFacts("p", "default", "p", 1, created=0.0)
    for core in (first, second):
        core.filter(p, names)
        got = core.priorities(p, names).tolist()
        node = core.adapter.state.node_ids[core.adapter.book.jobs["p"].placement[0][0]]
        assert got[names.index(node)] == MAX_SCORE and node == "b"   # best fit: the 4-GPU node
        assert 1 <= got[names.index("a")] <= 9
