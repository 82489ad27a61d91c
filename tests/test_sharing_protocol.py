"""The sharing experiments' protocol and the papers' policies as written (issue 23): paired gains
with a 95 % CI and wins, PAB's profiling wait, the oracle that may decline a pair, any registered
policy on the command line, the per-job rate history, the pair check."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.experiments.protocol import paired_gain
from dlsched.experiments.sharing.run import PolicyRun, run
from dlsched.experiments.sharing.tables import parse_policies
from dlsched.models.truth import resolve_truth
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead

runner = CliRunner()


def test_paired_gain_by_hand():
    """Gains 0.10 and 0.25: mean 0.175, sd 0.1061, t(0.975, 1) = 12.706 -> half width 0.953."""
    g = paired_gain([100.0, 200.0], [90.0, 150.0])
    assert g.mean == pytest.approx(0.175) and g.wins == 2 and g.seeds == 2
    assert g.high - g.mean == pytest.approx(12.7062 * 0.106066 / 2 ** 0.5, rel=1e-4)
    assert not g.excludes_zero
    assert paired_gain([100.0] * 3, [90.0, 91.0, 89.0]).excludes_zero
    with pytest.raises(ValueError):
        paired_gain([1.0], [])


def _pool(n_gpus: int, gpu: str = "V100") -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=n_gpus, gpu_type=gpu_type(gpu))


def test_pab_profiles_each_placed_job_before_the_next():
    """Three jobs at t=0 on four idle GPUs: PAB watches each new job for t_wait = 60 s before it
    places the next (the paper's n x T_wait): starts at 0, 60, 120; without the wait all at 0."""
    def starts(**options) -> list[float]:
        jobs = [Job(f"j{k}", "v", 1, 0, 1000) for k in range(3)]
        for j in jobs:
            j.pred_gpu_mem_mib = 1000
        Simulator(_pool(4), make_policy("pab", share=True, **options),
                  SimConfig(preemption_overhead=no_overhead, max_jobs_per_gpu=2)).run(jobs)
        return [j.start_time for j in jobs]

    assert starts() == [0, 60, 120]
    assert starts(t_wait=0) == [0, 0, 0]
    assert starts(t_wait=30) == [0, 30, 60]


def _recommendation_pair(min_combined: float) -> tuple[Job, Job]:
    """Two Recommendation bs512 jobs on one V100: the built-in truth caps that pair at time
    slicing (2x each, combined 1.0)."""
    truth = resolve_truth("builtin")
    t = truth.table
    i = next(k for k, jt in enumerate(t.types) if jt.type_id == "recommendation_vae-bs512")
    jt = t.types[i]
    jobs = [Job(f"r{k}", "v", 1, k, 600, model_name=jt.model, batch_size=jt.batch_size,
                gpu_util=t.util(i, "V100"), gpu_mem_mib=jt.gpu_mem_mib) for k in range(2)]
    for j in jobs:
        j.pred_gpu_util, j.pred_gpu_mem_mib = true_util(j), true_mem(j)
    Simulator(_pool(1), make_policy("oracle-pairing", share=True, min_combined=min_combined),
              SimConfig(preemption_overhead=no_overhead, max_jobs_per_gpu=2),
              speed_model=truth.speed_model()).run(jobs)
    return jobs[0], jobs[1]


def test_the_oracle_declines_a_pair_no_better_than_time_slicing():
    a, b = _recommendation_pair(1.25)
    assert (a.start_time, a.end_time, b.start_time, b.end_time) == (0, 600, 600, 1200)  # waits: declined
    a, b = _recommendation_pair(0.0)  # always pairing: b joins at 1, both at half speed
    assert b.start_time == 1 and b.end_time == pytest.approx(1 + 2 * 599 + 1, abs=1)


def test_parse_policies_and_bad_names():
    specs = parse_policies("horus,horus-f:k=5:beta=10,random-pairing:seed=x")
    assert [(s.label, s.policy, s.options) for s in specs] == [
        ("horus", "horus", ()), ("horus-f:k=5:beta=10", "horus-f", (("k", 5), ("beta", 10))),
        ("random-pairing:seed=x", "random-pairing", (("seed", "x"),))]
    with pytest.raises(ValueError, match="unknown policy 'nosuch'"):
        parse_policies("horus,nosuch")
    with pytest.raises(ValueError, match="not key=value"):
        parse_policies("horus:k")


def test_history_records_rates_and_co_runners():
    rows: list = []
    run("horus-wsmall", PolicyRun("OBP", "obp", 2), 0, history=rows)
    by_job: dict[str, list] = {}
    for r in rows:
        by_job.setdefault(r[2], []).append(r)
    assert len(by_job) == 100
    for job_rows in by_job.values():
        assert job_rows[0][6] == "start" and job_rows[-1][6] == "finish" and job_rows[-1][4] == 0.0
        times = [r[3] for r in job_rows]
        assert times == sorted(times)
    shared = [r for r in rows if r[5]]
    assert shared and all(r[4] < 1.0 or r[4] == 1.0 for r in shared)
    assert any(r[4] < 1.0 for r in shared)  # someone was slowed by a co-runner


def test_compare_cli_runs_registered_policies_and_writes_the_history(tmp_path):
    hist = tmp_path / "h.csv"
    res = runner.invoke(app, ["experiment", "compare", "--workload", "coscheml-60", "--policies",
                              "loadbalance,oracle-pairing:min_combined=0", "--seeds", "2", "--history", str(hist),
                              "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout[res.stdout.index("{"):])
    assert [r["policy"] for r in data["rows"]] == ["no sharing (FIFO)", "loadbalance", "oracle-pairing:min_combined=0"]
    assert data["rows"][0]["gain"] is None and data["rows"][1]["wins"] in (0.0, 1.0, 2.0)
    with hist.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} == {r["policy"] for r in data["rows"]}


@pytest.mark.parametrize("args, message", [
    (["experiment", "compare", "--policies", "nosuch"], "--policies: unknown policy 'nosuch'"),
    (["experiment", "horus-table6", "--profiles", "nope"], "unknown truth 'nope'"),
    (["reproduce", "coscheml", "--profiles", "nope"], "--profiles nope: unknown truth 'nope'"),
    (["interference", "pair-check", "--gpu", "H100"], "--gpu 'H100'"),
])
def test_bad_options_give_one_error_line(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], res.output


def test_pair_check_reports_the_pairs_below_time_slicing():
    res = runner.invoke(app, ["interference", "pair-check", "--json", "--limit", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["truth"] == "builtin-raw" and data["per_gpu"]["V100"]["below_time_slicing"] == 72
    assert data["per_gpu"]["V100"]["median_combined"] == pytest.approx(1.37, abs=0.01)
    assert data["worst"][0]["combined"] == pytest.approx(0.347, abs=0.001)
    capped = json.loads(runner.invoke(app, ["interference", "pair-check", "--json", "--profiles", "builtin"]).stdout)
    assert capped["capped_by_this_truth"] == 199 and all(
        g["below_time_slicing"] == 0 for g in capped["per_gpu"].values())


def test_gavel_v100_recommendation_evidence(shared):
    from dlsched.profiles.gavel_evidence import isolated_rows

    rows = {(r["gpu"], r["consolidated"]): r for r in isolated_rows(directory=shared / "profiles")
            if "512)" in r["job_type"]}
    v100 = rows[("v100", True)]
    # below K80 and P100 in the simulation file, equal to the unconsolidated row, ~11x below physical
    assert v100["sim_steps_per_s"] < rows[("k80", True)]["sim_steps_per_s"] < rows[("p100", True)]["sim_steps_per_s"]
    assert v100["sim_steps_per_s"] == rows[("v100", False)]["sim_steps_per_s"]
    assert v100["phys_steps_per_s"] / v100["sim_steps_per_s"] > 10


def test_horus_f_k_changes_decisions_on_the_table7_trace(shared, monkeypatch):
    """On the first 600 Philly jobs pooled on 8 nodes (queues long enough that a pass runs out of
    room), Horus-f's k = 3 starts jobs differently from Horus's k = 1; on 300 jobs every pass
    places every pending job, so the order k sets never matters (docs/sharing-policies.md)."""
    from dlsched.experiments.sharing.tables import horus_table7

    monkeypatch.setenv("DLSCHED_SHARED", str(shared))
    rows = {r["policy"]: r for r in horus_table7([0], jobs=600, nodes=8, ks=(5,))["rows"]}
    assert rows["Horus"]["seeds_same_decisions_as_horus"] == 1
    assert rows["Horus-f"]["seeds_same_decisions_as_horus"] == 0 and rows["Horus k=5"]["seeds_same_decisions_as_horus"] == 0
    assert rows["Horus-f"]["avg_wait_s"] != rows["Horus"]["avg_wait_s"]


def test_policy_options_go_through_the_policys_parameters():
    """`--policies` options that are parameters of the policy are typed, checked and mapped as in
    any run (random pairing's `pairing_seed` reaches its `seed`); a fitted model passes as given."""
    from dlsched.experiments.sharing.run import PolicyRun, constructor_keywords

    assert constructor_keywords(PolicyRun("h", "horus", 2, (("k", 1), ("beta", 5)))) == \
        {"k": 1, "beta": 5, "rounds": None}
    assert constructor_keywords(PolicyRun("r", "random-pairing", 2, (("pairing_seed", 3), ("window", 8)))) == \
        {"window": 8, "seed": 3}
    model = object()
    assert constructor_keywords(PolicyRun("c", "coscheml", 2, (("model", model), ("profiles", "builtin")))) == \
        {"window": 64, "model": model, "profiles": "builtin"}
