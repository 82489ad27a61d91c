"""The start-time forecast is the simulator's engine run on a twin (dlsched.sim.forecast): the
one event loop of dlsched.sim.engine runs it, the kernel's handlers carry out its stimuli (so a
max-runtime kill happens in a forecast exactly as in a simulation), and its order at ``now`` is
kept: the twin is decided as the state stands before what ends at ``now`` ends."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sched.policies.fifo import FifoPolicy
from dlsched.sim import engine, forecast
from dlsched.sim.engine import Simulator
from dlsched.sim.eta import EtaEstimator


def job(jid: str, submit: float, gpus: int, duration: float, pred: float | None = None,
        limit: float | None = None) -> Job:
    j = Job(jid, "v", gpus, submit, duration, time_limit_s=limit)
    j.pred_duration = duration if pred is None else pred
    return j


def one_gpu_state() -> ClusterState:
    return ClusterState(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), new_queue=make_policy("fifo").new_queue)


def test_the_forecast_runs_the_simulators_one_event_loop(monkeypatch):
    assert forecast.run_events is engine.run_events
    calls = []
    real = engine.run_events

    def spy(kernel, heap, tiebreak, jobs, **kw):
        calls.append((kernel.state, tuple(jobs), kw["drop_past_wakeups"]))
        return real(kernel, heap, tiebreak, jobs, **kw)

    monkeypatch.setattr(forecast, "run_events", spy)
    state = one_gpu_state()
    a = job("a", 0, 1, 999, pred=100)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    for i, t in enumerate((1.0, 2.0)):
        state.submit(job(f"w{i}", t, 1, 999, pred=30), t)
    run = EtaEstimator(make_policy("fifo")).snapshot(state, 10.0)
    assert run.run().by_id() == {"w0": 100.0, "w1": 130.0}
    # one loop, on the twin (not the real state), with no arrivals, dropping past wake-ups
    assert calls == [(run.twin, (), True)] and run.twin is not state
    assert run.kernel.state is run.twin


def test_a_running_twin_is_killed_at_its_limit_counted_over_its_runs():
    # a (predicted 100 s) has a 40 s limit and has run 10 s: the kernel's handler kills its twin
    # at 40; without the limit the forecast would say 100
    state = one_gpu_state()
    a = job("a", 0, 1, 999, pred=100, limit=40.0)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    state.submit(job("w", 1.0, 1, 999, pred=30), 1.0)
    res = EtaEstimator(make_policy("fifo")).estimate(state, 10.0)
    # two ends: the kill at 40 and, at the instant after the last start, w's end at 70
    assert res.by_id() == {"w": 40.0} and res.events == 2


def test_a_waiting_jobs_forecast_end_is_at_its_limit_as_the_simulator_kills_it():
    # b (really and predicted 500 s) may run 60 s: c starts when b is killed, in the simulation
    # and in the forecast taken while both wait
    def jobs() -> list[Job]:
        return [job("a", 0, 1, 100), job("b", 1, 1, 500, limit=60.0), job("c", 2, 1, 10)]

    sim_jobs = jobs()
    result = Simulator(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), make_policy("fifo")).run(sim_jobs)
    starts = {j.job_id: j.start_time for j in sim_jobs}
    assert starts == {"a": 0.0, "b": 100.0, "c": 160.0} and result.extra["time_limit_kills"] == 1

    state = one_gpu_state()
    a, b, c = jobs()
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    state.submit(b, 1.0)
    state.submit(c, 2.0)
    assert EtaEstimator(make_policy("fifo")).estimate(state, 5.0).by_id() == {"b": 100.0, "c": 160.0}


def test_the_twin_is_decided_before_what_ends_at_now():
    # a's prediction (10 s) ran out by now = 20 and overrun = 0: its twin ends at now. The first
    # pass at now sees it still running (the state as it stands), the next one, still at now,
    # after its end
    seen: list[tuple[float, int]] = []

    class Probe(FifoPolicy):
        name = "probe"

        def schedule(self, view, vc):
            seen.append((view.now, len(vc.running)))
            return super().schedule(view, vc)

    state = one_gpu_state()
    a = job("a", 0, 1, 999, pred=10)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    state.submit(job("w", 1.0, 1, 999, pred=5), 1.0)
    res = EtaEstimator(Probe(make_policy("fifo").placer), overrun=0.0).estimate(state, 20.0)
    assert res.by_id() == {"w": 20.0}
    assert seen == [(20.0, 1), (20.0, 0)]


def test_a_wake_up_in_the_past_is_dropped_in_a_forecast_and_an_error_in_a_simulation():
    class Backwards(FifoPolicy):
        """Asks for a pass one second ago, then schedules as FIFO."""
        name = "backwards"

        def schedule(self, view, vc):
            view.wake_at(view.now - 1.0, vc)
            return super().schedule(view, vc)

    policy = Backwards(make_policy("fifo").placer)
    state = one_gpu_state()
    a = job("a", 0, 1, 999, pred=50)
    state.submit(a, 0.0)
    state.start(a, ((0, 1),), 0.0)
    state.submit(job("w", 1.0, 1, 999, pred=5), 1.0)
    assert EtaEstimator(policy).estimate(state, 10.0).by_id() == {"w": 50.0}
    with pytest.raises(engine.SimulationError, match="wake-up in the past"):
        Simulator(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1), policy).run([job("x", 0, 1, 5)])
