"""``easy`` and ``conservative``: hand-checked small cases, the reservation record, refusals."""

from __future__ import annotations

import csv
import json

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.decisions import Start
from dlsched.registry import make_policy
from dlsched.runner import RunSpec, run_one
from dlsched.sim import Simulator


def _one_node(gpus: int = 4) -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 1}, gpus)


def _run(jobs: list[Job], policy: str, **options) -> dict[str, float]:
    pol = make_policy(policy, **options)
    Simulator(_one_node(), pol, None).run(jobs)
    return {j.job_id: j.start_time for j in jobs}, pol


def _four(limits: bool = True) -> list[Job]:
    shape = [("j0", 3, 0.0, 10.0), ("j1", 2, 1.0, 10.0), ("j2", 2, 2.0, 10.0), ("j3", 1, 3.0, 20.0)]
    return [Job(i, "v", g, t, d, time_limit_s=d if limits else None) for i, g, t, d in shape]


def test_easy_starts_job_3_ahead_and_conservative_does_not():
    """One node of 4 GPUs; estimates are exact (time limit = duration).

    j0: 3 GPUs, t=0, 10 s -- starts at 0 (4 free), ends at 10.
    j1: 2 GPUs, t=1, 10 s -- 1 free: waits. Both policies reserve t=10 (j0's end frees 3 -> 4 free).
    j2: 2 GPUs, t=2, 10 s -- 1 free: waits. EASY: not the head, no reservation. Conservative: the
        plan has 4 - 2 (j1) = 2 free over [10, 20), so j2 is reserved at 10 too (then 0 free there).
    j3: 1 GPU, t=3, 20 s -- 1 free now, it would run [3, 23).
        EASY: it ends after the shadow time 10, but at 10 it leaves 4 - 1 = 3 >= 2 GPUs for the
        head j1: it starts at 3, ahead of j1 and j2.
        Conservative: [10, 20) has 0 GPUs left after j1 and j2: no start before 20; reserved at 20.
    t=10 (j0 ends): EASY: j1 starts (3 free), 1 left; j2 (2) is the head, shadow = j1's end 20
        (j3 holds 1 until 23: at 20, 1 + 2 = 3 >= 2); starts at 20. Conservative: j1 and j2 start
        (4 free); j3 keeps its reservation and starts at 20, when both end.
    Starts -- EASY: j0 0, j1 10, j2 20, j3 3. Conservative: j0 0, j1 10, j2 10, j3 20.
    """
    easy, pol = _run(_four(), "easy", estimate="limit")
    assert easy == {"j0": 0.0, "j1": 10.0, "j2": 20.0, "j3": 3.0}
    assert pol.summary()["made"] == 2 and pol.summary()["broken"] == 0 and pol.summary()["backfilled_jobs"] == 1
    cons, pol = _run(_four(), "conservative", estimate="limit")
    assert cons == {"j0": 0.0, "j1": 10.0, "j2": 10.0, "j3": 20.0}
    assert pol.summary()["made"] == 3 and pol.summary()["broken"] == 0
    # no backfill: j1 and j2 start together at 10 (4 free), j3 waits behind them until 20
    fifo, _ = _run(_four(), "fifo")
    assert fifo == {"j0": 0.0, "j1": 10.0, "j2": 10.0, "j3": 20.0}


def test_the_truth_oracle_decides_as_exact_limits_do():
    easy, pol = _run(_four(limits=False), "easy", estimate="truth")
    assert pol.oracle and easy == {"j0": 0.0, "j1": 10.0, "j2": 20.0, "j3": 3.0}


def _short_prediction() -> list[Job]:
    jobs = [Job("a", "v", 2, 0.0, 30.0, time_limit_s=40.0), Job("b", "v", 4, 1.0, 10.0, time_limit_s=40.0),
            Job("c", "v", 2, 2.0, 15.0, time_limit_s=40.0), Job("d", "v", 2, 12.0, 5.0, time_limit_s=40.0)]
    for job, pred in zip(jobs, (10.0, 10.0, 15.0, 5.0)):
        job.pred_duration = pred   # what the estimator would have said; a's is 20 s short
    return jobs


@pytest.mark.parametrize("correction, starts, last", [
    # off: at t=12 a has outlived its 10 s and is taken to end now: the head b is reserved at 12 and
    # neither c (12+15) nor d (12+5) may end after it -> nothing backfills; a ends at 30: b runs
    # [30, 40), then c and d start at 40.
    ("off", {"a": 0.0, "b": 30.0, "c": 40.0, "d": 40.0}, 12.0),
    # double: at 12, a's estimate 10 s doubles to 20 s: b's reservation moves from 10 to 20; d
    # (ends 17 <= 20) backfills at 12, c (ends 27) does not; at 17 the reservation is still 20; a
    # ends at 30: b [30, 40), then c at 40.
    ("double", {"a": 0.0, "b": 30.0, "c": 40.0, "d": 12.0}, 20.0),
    # limit: at 12, a's estimate moves to its limit, 40: c (ends 27) backfills at 12 (then no GPU is
    # free for d); at 27 c ends and d (ends 32 <= 40) backfills; at 30 a ends but d holds 2 of the
    # 4 GPUs b needs: b is reserved at d's end, 32, and starts then.
    ("limit", {"a": 0.0, "b": 32.0, "c": 12.0, "d": 27.0}, 32.0),
])
def test_a_short_prediction_is_corrected_and_the_reservation_moves(correction, starts, last):
    """One node of 4 GPUs. a: 2 GPUs, t=0, runs 30 s, predicted 10. b: 4 GPUs, t=1, 10 s. c: 2
    GPUs, t=2, 15 s. d: 2 GPUs, t=12, 5 s (predictions of b, c, d exact; every limit 40 s).
    At t=1 b is the head, reserved at a's predicted end 10; c (ends 17 > 10, and at 10 it would
    leave 2 < 4 GPUs) waits. The cases say what happens at t=12, when d arrives."""
    jobs = _short_prediction()
    got, pol = _run(jobs, "easy", estimate="prediction", correction=correction)
    assert got == starts
    first, latest, made, start = pol.book.records[jobs[1]]
    assert (first, made, start) == (10.0, 1.0, starts["b"])
    assert latest == last
    summary = pol.summary()
    assert summary["broken"] >= 1 and summary["max_delay_broken_s"] == starts["b"] - 10.0
    assert summary["estimates_corrected"] == (0 if correction == "off" else 1)


def test_the_run_directory_has_the_reservations_and_their_counts(tmp_path):
    jobs = _four()
    summary = run_one(jobs, _one_node(), RunSpec(policy="easy", policy_options={"estimate": "limit"}), tmp_path)
    assert summary["reservations"] == {"made": 2, "kept": 2, "broken": 0, "mean_delay_broken_s": 0.0,
                                       "max_delay_broken_s": 0.0, "backfilled_jobs": 1, "estimates_corrected": 0}
    assert json.loads((tmp_path / "summary.json").read_text())["reservations"]["made"] == 2
    rows = list(csv.DictReader((tmp_path / "reservations.csv").open()))
    assert [(r["job_id"], r["first_reserved_start"], r["start_time"], r["kept"]) for r in rows] == [
        ("j1", "10.0", "10.0", "yes"), ("j2", "20.0", "20.0", "yes")]


@pytest.mark.parametrize("order", ["qssf", "fairshare", "las", "sjf"])
def test_any_queue_order_runs_to_the_end(order):
    jobs = [Job(f"j{i}", "v", 1 + i % 4, float(i), 5.0 + 7 * (i % 5), user=f"u{i % 3}", time_limit_s=100.0)
            for i in range(40)]
    for name in ("easy", "conservative"):
        for job in jobs:
            job.reset()
        pol = make_policy(name, order=order, estimate="capped")
        Simulator(_one_node(), pol, None).run(jobs)
        assert all(j.end_time > 0 for j in jobs)
        assert pol.summary()["made"] > 0


@pytest.mark.parametrize("options, message", [
    ({"estimate": "guess"}, "--param estimate must be one of limit, prediction, capped, truth"),
    ({"correction": "triple"}, "--param correction must be one of off, double, limit"),
    ({"stop_grace": -1.0}, "--param stop_grace must be a number of seconds >= 0"),
    ({"order": "srtf"}, "--param order='srtf' is not a queue order"),
    ({"order": "easy"}, "is not a queue order"),
    ({"backfill": True}, "leave out --backfill"),
    ({"share": True}, "reservations need exclusive GPUs"),
])
def test_what_cannot_work_is_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_policy("easy", **options)


def _overrunning() -> list[Job]:
    jobs = [Job("a", "v", 2, 0.0, 10.0), Job("b", "v", 4, 1.0, 10.0), Job("c", "v", 2, 2.0, 20.0)]
    for job, pred in zip(jobs, (10.0, 10.0, 5.0)):
        job.pred_duration = pred   # c's prediction is 15 s short
    return jobs


@pytest.mark.parametrize("on_overrun, grace, starts, b_start, c_end, broken", [
    # run: c runs on to 22; b, reserved at 10, starts at 22 (broken by 12).
    ("run", 0.0, {"a": 0.0, "c": 2.0}, 22.0, 22.0, 1),
    # stop: at 10 (a ends; the policy's wake-up) c still runs, b waits and is due: c is stopped
    # (checkpointed, re-queued with 8 s done) and b starts at its reservation, 10 (kept). c
    # restarts when b ends at 20 and redoes the 30 s checkpoint overhead of a 2-GPU job
    # (helios_checkpoint_overhead): 20 + 12 + 30 = 62.
    ("stop", 0.0, {"a": 0.0, "c": 2.0}, 10.0, 62.0, 0),
    # stop with 3 s of grace: c is stopped at 13 with 11 s done, and b starts then (broken by 3);
    # c restarts at b's end, 23: 23 + 9 + 30 = 62.
    ("stop", 3.0, {"a": 0.0, "c": 2.0}, 13.0, 62.0, 1),
])
def test_on_overrun_stop_stops_a_backfilled_job_at_the_reservation_it_delays(on_overrun, grace, starts, b_start,
                                                                            c_end, broken):
    """One node of 4 GPUs, QSSF-style predictions set by hand (correction off). a: 2 GPUs, t=0,
    10 s (predicted 10). b: 4 GPUs, t=1, 10 s: the head, reserved at a's end, 10. c: 2 GPUs, t=2,
    runs 20 s but predicted 5: estimated to end at 7 <= 10, it backfills at 2 (the 2 free GPUs)."""
    jobs = _overrunning()
    got, pol = _run(jobs, "easy", estimate="prediction", on_overrun=on_overrun, stop_grace=grace)
    assert {k: got[k] for k in starts} == starts and got["b"] == b_start
    a, b, c = jobs
    assert c.end_time == c_end and c.preemptions == (0 if on_overrun == "run" else 1)
    summary = pol.summary()
    assert summary["broken"] == broken and summary["backfilled_jobs"] == 1
    assert summary.get("overruns_stopped", 0) == (0 if on_overrun == "run" else 1)
    assert pol.book.records[b][0] == 10.0   # b's first reservation


def test_on_overrun_stop_leaves_a_job_that_ends_in_time_or_does_not_delay_the_head():
    """c2 is predicted 5 s and runs 5 s (ends at 7, before the reservation): never stopped. And a
    job that overruns while the head can start anyway (a 1-GPU job beside a 2-GPU head on 4 GPUs:
    at 10 a ends, 3 are free) is not stopped: it delays nothing."""
    jobs = _overrunning()
    jobs[2] = Job("c2", "v", 2, 2.0, 5.0)
    jobs[2].pred_duration = 5.0
    _, pol = _run(jobs, "easy", estimate="prediction", on_overrun="stop")
    assert "overruns_stopped" not in pol.summary() and jobs[2].preemptions == 0
    jobs = [Job("a", "v", 3, 0.0, 10.0), Job("b", "v", 2, 1.0, 10.0), Job("c", "v", 1, 2.0, 30.0)]
    for job, pred in zip(jobs, (10.0, 10.0, 5.0)):
        job.pred_duration = pred
    got, pol = _run(jobs, "easy", estimate="prediction", on_overrun="stop")
    # c ends (est.) at 7 <= 10: let in by its end; at 10 a ends, 3 free >= 2: b starts anyway
    assert got == {"a": 0.0, "b": 10.0, "c": 2.0} and jobs[2].preemptions == 0


@pytest.mark.parametrize("placement", ["consolidate", "first-fit"])   # the per-node plan, the plan in counts
@pytest.mark.parametrize("on_overrun, grace, b_start, c_end, broken", [
    # the same hand-checked times as EASY's above: here too b is the only reservation c runs ahead of
    ("run", 0.0, 22.0, 22.0, 1),
    ("stop", 0.0, 10.0, 62.0, 0),
    # grace 3: at 10 the plan takes c to end now (correction off), so b, not placeable, is reserved
    # now (10); the stop is re-armed at 13, when c is stopped and b starts (broken by 3)
    ("stop", 3.0, 13.0, 62.0, 1),
])
def test_conservative_on_overrun_stop_stops_a_backfilled_job_at_the_reservation_it_delays(
        placement, on_overrun, grace, b_start, c_end, broken):
    jobs = _overrunning()
    pol = make_policy("conservative", estimate="prediction", on_overrun=on_overrun, stop_grace=grace,
                      placement=placement)
    Simulator(_one_node(), pol, None).run(jobs)
    a, b, c = jobs
    assert (a.start_time, c.start_time, b.start_time) == (0.0, 2.0, b_start)
    assert c.end_time == c_end and c.preemptions == (0 if on_overrun == "run" else 1)
    summary = pol.summary()
    assert summary["backfilled_jobs"] == 1 and summary.get("overruns_stopped", 0) == (on_overrun == "stop")
    assert summary["broken"] == broken and pol.book.records[b][0] == 10.0


@pytest.mark.parametrize("placement", ["consolidate", "first-fit"])
def test_conservative_on_overrun_stop_leaves_a_job_that_delays_no_reservation(placement):
    """Two nodes of 4 GPUs. a: 4 GPUs, t=0, 10 s, on one node; d: 2 GPUs, t=0.5, 100 s, on the
    other. b: 4 GPUs, t=1: reserved at 10 (a's end). c: 2 GPUs, t=2, runs 20 s, predicted 5: it
    backfills beside d at 2 and overruns to 22. Per node (consolidate) b's reservation is on a's
    node, not c's: c is never armed. Counted (first-fit) c is armed for b, but at 10 b can start
    anyway (a's node is free): not stopped either. b starts at 10, c ends at 22."""
    jobs = [Job("a", "v", 4, 0.0, 10.0), Job("d", "v", 2, 0.5, 100.0), Job("b", "v", 4, 1.0, 10.0),
            Job("c", "v", 2, 2.0, 20.0)]
    for job, pred in zip(jobs, (10.0, 100.0, 10.0, 5.0)):
        job.pred_duration = pred
    pol = make_policy("conservative", estimate="prediction", on_overrun="stop", placement=placement)
    Simulator(ClusterSpec.from_vc_sizes({"v": 2}, 4), pol, None).run(jobs)
    a, d, b, c = jobs
    assert (a.start_time, d.start_time, b.start_time, c.start_time) == (0.0, 0.5, 10.0, 2.0)
    assert c.end_time == 22.0 and c.preemptions == 0 and "overruns_stopped" not in pol.summary()


def test_limit_estimates_need_a_limit_on_every_job():
    pol = make_policy("conservative", estimate="limit")
    with pytest.raises(ValueError, match=r"1 of 4 have none \(e.g. \['j2'\]\).*--time-limits"):
        jobs = _four()
        jobs[2].time_limit_s = None
        pol.validate_trace(jobs)


def _cli(*argv) -> tuple[int, str]:
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize("extra, message", [
    (["--param", "on_overrun=maybe"], "error: --param on_overrun must be run or stop"),
    (["--max-jobs-per-gpu", "2"], "error: easy: reservations need exclusive GPUs"),
    (["--backfill"], "error: easy backfills by its reservations: leave out --backfill"),
    (["--param", "estimate=limit"], "error: easy: --param estimate=limit needs a time limit on every job; 50 of 50"),
    (["--cluster", "docs/examples/queues.toml"], "error: --policy easy holds reservations on its VC's own GPUs"),
])
def test_the_command_line_refuses_in_one_error_line(tmp_path, extra, message):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    extra = [str(root / e) if e.startswith("docs/") else e for e in extra]
    code, out = _cli("simulate", "--jobs", "50", "--policy", "easy", *extra, "--out", tmp_path / "r")
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and errors[0].startswith(message), out


def test_the_command_line_runs_with_drawn_limits(tmp_path):
    code, out = _cli("simulate", "--jobs", "300", "--policy", "conservative", "--time-limits",
                     "overestimate=1:3,round=600", "--param", "estimate=limit", "--out", tmp_path / "r")
    assert code == 0, out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["policy"] == "conservative" and summary["jobs"] == 300
    assert summary["reservations"]["made"] == len(list(csv.DictReader((tmp_path / "r" / "reservations.csv").open())))


@pytest.mark.parametrize("name", ["easy", "conservative"])
def test_gangs_run_with_reservations(name):
    """Jobs of 2-GPU pods on two nodes of 4 GPUs: each pod lands on one node, every job ends."""
    jobs = [Job(f"g{i}", "v", (2, 4, 6, 2)[i % 4], float(i), 10.0 + 3 * i, gpus_per_pod=2, time_limit_s=100.0)
            for i in range(12)]
    pol = make_policy(name, estimate="limit")
    shares: list[list[int]] = []
    passes = pol.schedule

    def recorded(view, vc):   # each start's GPUs per node, as the policy decided it
        for decision in passes(view, vc):
            if isinstance(decision, Start):
                shares.append([mask.bit_count() for _, mask in decision.placement])
            yield decision

    pol.schedule = recorded
    Simulator(ClusterSpec.from_vc_sizes({"v": 2}, 4), pol, None).run(jobs)
    assert all(j.end_time > 0 for j in jobs) and len(shares) == len(jobs)
    assert all(n % 2 == 0 for per_node in shares for n in per_node)


def _fragmented() -> list[Job]:
    shape = [("p", 1, 0.0, 10.0), ("q", 1, 0.0, 50.0), ("r", 1, 0.0, 10.0), ("s", 1, 0.0, 50.0),
             ("d", 2, 1.0, 5.0), ("e", 1, 2.0, 30.0)]
    return [Job(i, "v", g, t, d, time_limit_s=d) for i, g, t, d in shape]


def test_conservative_plans_per_node_so_a_fragmented_start_is_not_promised():
    """Two nodes of 2 GPUs, consolidate (best fit, lowest index on ties); estimates exact.

    t=0: p (1 GPU, 10 s) -> node 0; q (1, 50 s) -> node 0 (the tightest); r (1, 10 s) -> node 1;
    s (1, 50 s) -> node 1. At 10 p and r end: one free GPU on each node; at 50 q and s end.
    t=1: d (2 GPUs, 5 s). A plan in GPU counts has 2 free at 10 and promises d 10 -- but no node
        has 2 GPUs then, so at 10 d could not start and its reservation would break (first
        promised 10, started 50: 40 s late). Per node: node 0 and node 1 have 2 free from 50 only:
        d is reserved at 50 (node 0, lowest index).
    t=2: e (1 GPU, 30 s): per node, node 0 has 1 free over [10, 50) and e's [10, 40) ends before
        d's 50: reserved at 10 (node 0, the tightest, lowest index).
    t=10: e starts on node 0 (ends 40); d waits. t=50: q and s end, d starts on node 0.
    Starts: p q r s 0, e 10, d 50; both reservations kept.
    """
    from dlsched.sched.nodeplan import NodePlan
    from dlsched.sched.profile import FreeProfile

    counted = FreeProfile(1.0, 0, [(10.0, 1), (10.0, 1), (50.0, 1), (50.0, 1)])
    assert counted.earliest(2, 5.0, 1.0) == 10.0   # the GPU-count plan's promise, unplaceable at 10
    per_node = NodePlan(1.0, [0, 1], [0, 0], {0: [(10.0, 1), (50.0, 1)], 1: [(10.0, 1), (50.0, 1)]}, 2, 2)
    assert per_node.earliest(2, 5.0, 1.0) == (50.0, [(0, 2)])
    jobs = _fragmented()
    pol = make_policy("conservative", estimate="limit")
    nodes: dict[str, list[int]] = {}
    passes = pol.schedule

    def recorded(view, vc):   # each start's nodes, as the policy decided them
        for decision in passes(view, vc):
            if isinstance(decision, Start):
                nodes[decision.job.job_id] = [node for node, _ in decision.placement]
            yield decision

    pol.schedule = recorded
    Simulator(ClusterSpec.from_vc_sizes({"v": 2}, 2), pol, None).run(jobs)
    assert {j.job_id: j.start_time for j in jobs} == {"p": 0.0, "q": 0.0, "r": 0.0, "s": 0.0, "d": 50.0, "e": 10.0}
    assert nodes == {"p": [0], "q": [0], "r": [1], "s": [1], "e": [0], "d": [0]}
    first = {j.job_id: r[0] for j, r in pol.book.records.items()}
    assert first == {"d": 50.0, "e": 10.0}
    assert pol.summary()["broken"] == 0 and pol.summary()["backfilled_jobs"] == 1


def test_a_gang_larger_than_a_node_is_reserved_on_whole_nodes():
    """Three nodes of 4 GPUs. A job of 6 GPUs needs one whole free node plus 2 GPUs on another.
    Node 0 is free from 10, node 1 has 2 free from 5 (4 from 30), node 2 is free from 20: at 10
    node 0 is whole and node 1 has 2 -> 10, on node 0 (whole) and node 1 (the rest, most free)."""
    from dlsched.sched.nodeplan import NodePlan

    plan = NodePlan(0.0, [0, 1, 2], [0, 0, 0], {0: [(10.0, 4)], 1: [(5.0, 2), (30.0, 2)], 2: [(20.0, 4)]}, 4, 4)
    assert plan.earliest(6, 15.0, 0.0) == (10.0, [(0, 4), (1, 2)])
    # a run of 25 s: node 1's 2 GPUs stay free ([5, inf)), node 0 too -> still 10
    assert plan.earliest(6, 25.0, 0.0) == (10.0, [(0, 4), (1, 2)])
    plan.take(10.0, 15.0, [(0, 4), (1, 2)])
    # the next 8-GPU job (two whole nodes): node 0 free again from 25, node 2 from 20 -> 25
    assert plan.earliest(8, 5.0, 0.0) == (25.0, [(0, 4), (2, 4)])
