"""DRB mapping, the Eq. 2-5 utility, the placement plug-ins on the kernel and the effect figures."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.decisions import Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.registry import make_placer
from dlsched.sched.indexes import attach_plugins
from dlsched.topology.drb import drb_map
from dlsched.topology.effects import bits, footprint, interference_factor, placement_factor, spread_penalty
from dlsched.topology.graph import machine_graph
from dlsched.topology.jobgraph import JobProfile, batch_class, comm_graph
from dlsched.topology.profile import CoRunner, job_profile
from dlsched.topology.utility import best_pair_sum, utility

MINSKY = machine_graph("minsky")
DGX1 = machine_graph("dgx1")


def job(jid: str, gpus: int, batch: int = 1, model: str = "alexnet", min_u: float = 0.5) -> JobProfile:
    return JobProfile(jid, model, batch, gpus, 60.0, min_u)


def running(p: JobProfile, placement, graphs) -> CoRunner:
    return CoRunner(p.job_id, p, placement, footprint(placement, graphs))


class Cluster:
    """A kernel state of identical nodes of one preset, with jobs started by hand."""

    def __init__(self, nodes: int, preset: str) -> None:
        gpus = 4 if preset == "minsky" else 8
        self.state = ClusterState(ClusterSpec.from_vc_sizes({"v": nodes}, gpus, topology=preset),
                                  new_queue=ArrivalQueue)
        self.view = SchedulingView(self.state, oracle=False)
        self.vc = self.state.vcs[0]
        self.jobs: dict[str, Job] = {}
        self.attached: list[object] = []   # placers attached to this state (as a driver does, once)

    def attach(self, placer):
        if not any(p is placer for p in self.attached):
            attach_plugins(self.state, placer)
            self.attached.append(placer)
        return placer

    def run(self, jid: str, placement, gpus: int | None = None, batch: int = 1, model: str = "alexnet") -> Job:
        j = Job(jid, "v", gpus or sum(m.bit_count() for _, m in placement), 0.0, 100.0, model_name=model,
                batch_size=batch)
        self.state.submit(j, self.view.now)
        self.state.start(j, tuple(placement), self.view.now)
        self.jobs[jid] = j
        return j

    def finish(self, jid: str) -> None:
        self.state.finish(self.jobs.pop(jid), self.view.now)

    def place(self, placer, jid: str, gpus: int, batch: int = 1, model: str = "alexnet", min_u: float = float("nan")):
        self.view.now += 1.0   # a new pass: nothing remembered from an earlier one
        return self.attach(placer).place(self.view, self.vc, Job(jid, "v", gpus, 0.0, 10.0, model_name=model,
                                                     batch_size=batch, min_utility=min_u))


def test_comm_graph_is_all_to_all_with_batch_weight():
    g = comm_graph(job("a", 4, batch=1))
    assert len(g.edges) == 6 and {w for *_, w in g.edges} == {4}
    assert {w for *_, w in comm_graph(job("b", 3, batch=128)).edges} == {1}
    assert [batch_class(b) for b in (1, 2, 4, 8, 16, 32, 64)] == [0, 0, 1, 1, 2, 2, 3]


def test_two_gpu_job_on_minsky_gets_an_nvlink_pair():
    mask = drb_map(job("a", 2), 0, MINSKY, 0b1111)
    assert bits(mask) == [0, 1]
    # with GPU0 busy the only NVLink pair left is 2-3
    assert bits(drb_map(job("a", 2), 0, MINSKY, 0b1110)) == [2, 3]


@pytest.mark.parametrize("free", [0xFF, 0xFE, 0xF7 & 0xFF])
def test_four_gpu_job_on_dgx1_lands_in_one_cube_face(free):
    mask = drb_map(job("a", 4), 0, DGX1, free)
    assert set(bits(mask)) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert mask & ~free == 0


def test_best_pair_sums():
    assert best_pair_sum(MINSKY, 2) == 1 and best_pair_sum(MINSKY, 4) == 2 + 4 * 42
    assert best_pair_sum(DGX1, 4) == 6


def test_utility_hand_computed_split_pair():
    # tiny AlexNet, 2 GPUs across the Minsky sockets, machine otherwise idle:
    # C = t_best / t = 1/42, I = 1, F = 1 socket needed / 2 spanned
    parts = utility(job("a", 2), ((0, 0b0101),), [MINSKY], [])
    assert parts.comm == pytest.approx(1 / 42)
    assert parts.interference == 1.0 and parts.fragmentation == 0.5
    assert parts.utility == pytest.approx((1 / 42 + 1 + 0.5) / 3)


def test_utility_hand_computed_interference():
    x = running(job("x", 2), ((0, 0b0011),), [DGX1])
    # the new tiny 2-GPU job on the same socket: both slowed by 30 % (Fig. 6) -> I = 1/1.3
    parts = utility(job("y", 2), ((0, 0b1100),), [DGX1], [x])
    assert parts.interference == pytest.approx(1 / 1.3)
    assert parts.utility == pytest.approx((1 + 1 / 1.3 + 1) / 3)
    # two single-GPU jobs on one socket: 5 % each (assumption documented in effects)
    x = running(job("x", 1), ((0, 0b0010),), [MINSKY])
    parts = utility(job("y", 1), ((0, 0b0001),), [MINSKY], [x])
    assert parts.interference == pytest.approx(1 / 1.05)


def test_profile_of_a_kernel_job():
    p = job_profile(Job("a", "v", 2, 0.0, 1.0, model_name="ResNet50"))
    assert (p.model, p.batch_size, p.min_utility) == ("googlenet", 32, 0.5)  # unprofiled model, no batch
    p = job_profile(Job("b", "v", 1, 0.0, 1.0, model_name="alexnet", batch_size=4))
    assert (p.model, p.batch_size, p.min_utility) == ("alexnet", 4, 0.3)     # Table 1 default, 1 GPU
    assert job_profile(Job("c", "v", 2, 0.0, 1.0, min_utility=0.7)).min_utility == 0.7
    assert not job_profile(Job("d", "v", 16, 0.0, 1.0), node_gpus=8).single_node


def _minsky_with_two_singles() -> Cluster:
    """Table 1 at the 70th second: Job 2 on GPU1, Job 1 (GoogLeNet) on GPU2 of one Minsky."""
    c = Cluster(1, "minsky")
    c.run("job2", ((0, 0b0010),))
    c.run("job1", ((0, 0b0100),), batch=4, model="googlenet")
    return c


def test_topo_aware_p_postpones_a_cross_socket_pair():
    c = _minsky_with_two_singles()
    fit = c.place(make_placer("topo-aware-p"), "job3", 2, batch=4)
    assert fit.status is Status.POSTPONE and fit.score < 0.5 and "below the job's minimum" in fit.reason
    fit = c.place(make_placer("topo-aware"), "job3", 2, batch=4)
    assert fit.fits and bits(fit.placement[0][1]) == [0, 3]
    # once a socket frees up, TOPO-AWARE-P places the job on the NVLink pair
    c.finish("job2")
    fit = c.place(make_placer("topo-aware-p"), "job3", 2, batch=4)
    assert fit.fits and bits(fit.placement[0][1]) == [0, 1] and fit.score == pytest.approx(1.0)


def test_the_pipeline_stages_give_the_same_answer():
    """score + gpus + permit (the plug-in combined with others) agree with fast_place."""
    from dlsched.sched.framework import PlacementPipeline
    from dlsched.sched.placers.topo_aware import TopoAwarePostponing

    c = _minsky_with_two_singles()
    staged = PlacementPipeline([(TopoAwarePostponing(), 1.0)], filters=[_NoFilter()])
    assert staged.place is not staged.scorers[0][0].fast_place
    fit = c.place(staged, "job3", 2, batch=4)
    assert fit.status is Status.POSTPONE
    c.finish("job2")
    fit = c.place(staged, "job3", 2, batch=4)
    assert fit.fits and bits(fit.placement[0][1]) == [0, 1]


class _NoFilter:
    name = "none"

    def filter(self, view, vc, job, node):
        return None


def test_topo_aware_avoids_interference_and_prefers_fuller_machines():
    c = Cluster(2, "minsky")
    c.run("a", ((0, 0b0001),))
    fit = c.place(make_placer("topo-aware"), "b", 1)
    assert fit.placement == ((0, 0b0100),)   # same machine (fuller), other socket (no interference)


def test_baselines():
    c = Cluster(2, "minsky")
    c.run("a", ((1, 0b0001),))
    assert c.place(make_placer("first-fit-node"), "b", 2).placement == ((0, 0b0011),)
    # BF: fullest machine, then fullest socket first -- which splits the pair across sockets
    assert c.place(make_placer("socket-best-fit"), "b", 2).placement == ((1, 0b0110),)
    assert c.place(make_placer("socket-best-fit"), "c", 1).placement == ((1, 0b0010),)   # fullest socket
    assert c.place(make_placer("topo-aware"), "d", 4).placement == ((0, 0b1111),)


def test_baselines_wait_rather_than_split_a_job_that_fits_one_node():
    c = Cluster(2, "minsky")
    c.run("a", ((0, 0b0111),))
    c.run("b", ((1, 0b0111),))
    for name in ("first-fit-node", "socket-best-fit", "topo-aware"):
        assert c.place(make_placer(name), "x", 2).status is Status.UNSCHEDULABLE, name
    assert c.place(make_placer("first-fit"), "x", 2).fits   # plain first fit splits it


def test_multi_node_fallback():
    c = Cluster(2, "minsky")
    fit = c.place(make_placer("topo-aware"), "big", 6, batch=64)
    assert fit.fits and sum(mask.bit_count() for _, mask in fit.placement) == 6
    assert [n for n, _ in fit.placement] == [0, 1]
    fit = c.place(make_placer("socket-best-fit"), "big", 6, batch=64)
    assert fit.fits and sum(mask.bit_count() for _, mask in fit.placement) == 6


def test_pass_skips_a_type_that_failed():
    """Alg. 1: within one pass a postponed job type is not tried (nor postponed) again."""
    c = _minsky_with_two_singles()
    placer = c.attach(make_placer("topo-aware-p"))
    c.view.now = 70.0
    first = placer.place(c.view, c.vc, Job("j3", "v", 2, 0.0, 1.0, model_name="alexnet", batch_size=4))
    again = placer.place(c.view, c.vc, Job("j4", "v", 2, 0.0, 1.0, model_name="alexnet", batch_size=4))
    assert first.status is Status.POSTPONE and again.status is Status.UNSCHEDULABLE
    c.view.now = 71.0   # a new pass tries again
    assert placer.place(c.view, c.vc, Job("j5", "v", 2, 0.0, 1.0, model_name="alexnet", batch_size=4)
                        ).status is Status.POSTPONE


def test_effect_figures():
    assert spread_penalty("alexnet", 2) == pytest.approx(1.30)
    assert spread_penalty("alexnet", 1, nvlink=False) == pytest.approx(1.24)
    assert spread_penalty("alexnet", 4) == pytest.approx(1.25)
    assert spread_penalty("alexnet", 16) == spread_penalty("alexnet", 128) == 1.0
    assert spread_penalty("googlenet", 1) < 1.1
    p = job("a", 2, batch=2)
    assert placement_factor(p, ((0, 0b0011),), [MINSKY]) == 1.0
    assert placement_factor(p, ((0, 0b0101),), [MINSKY]) == pytest.approx(1.30)
    tiny, big = job("t", 2, 1), job("b", 2, 128)
    assert interference_factor(tiny, [tiny]) == pytest.approx(1.30)
    assert interference_factor(tiny, [big]) == pytest.approx(1.24)
    assert interference_factor(big, [tiny]) < 1.01
    assert interference_factor(tiny, [tiny] * 5) == pytest.approx(1.60)   # capped
