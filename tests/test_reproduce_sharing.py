"""`dlsched reproduce` for the GPU-sharing results: Horus Tables 6-7, Co-scheML Figs. 7-9, the
oracle comparison and the interference models, run small (one seed, a short Philly slice)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.reproduce.interference import Interference
from dlsched.reproduce.registry import REPRODUCTIONS
from dlsched.reproduce.render import run_reproduction
from dlsched.reproduce.sharing import ColocationOracle, CoScheML, HorusTable6, HorusTable7

runner = CliRunner()
SHARING = ("horus-table6", "horus-table7", "coscheml", "colocation-oracle", "interference")


def test_sharing_results_are_registered_with_their_commands_and_data():
    for name in SHARING:
        assert name in REPRODUCTIONS
    assert REPRODUCTIONS["horus-table6"].command.startswith("dlsched experiment horus-table6")
    assert REPRODUCTIONS["interference"].command.startswith("dlsched interference evaluate")
    assert REPRODUCTIONS["horus-table6"].needs == () and REPRODUCTIONS["coscheml"].needs == ()
    assert "traces/philly/philly_vc_config.csv" in REPRODUCTIONS["horus-table7"].needs
    assert "profiles/lucid/colocate_info.csv" in REPRODUCTIONS["interference"].needs
    res = runner.invoke(app, ["reproduce", "--list", "--json"])
    names = [r["name"] for r in json.loads(res.output)]
    first = names.index(SHARING[0])   # listed together, in their order (other results may follow)
    assert names[first:first + len(SHARING)] == list(SHARING)


def test_horus_table6_beside_the_paper(tmp_path):
    result = run_reproduction(HorusTable6(seeds=1, truth="builtin-raw"), tmp_path)  # one table: no Lucid beside
    # the makespan table, then every pair of policies per workload (one seed: not extended, all tied)
    assert len(result.tables) == 3 and "truth builtin-raw" in result.tables[0].title
    for t, wl in zip(result.tables[1:], ("W-Large", "W-Small")):
        assert t.title.startswith(f"truth builtin-raw, {wl}: every pair of policies") and "1 seeds" in t.title
        assert [r[:2] for r in t.rows] == [["PAB", "OBP"], ["PAB", "Horus"], ["OBP", "Horus"]]
        assert {r[6] for r in t.rows} == {"tied"}
    rows = {(r[0], r[1]): r[2:] for r in result.tables[0].rows}
    assert len(rows) == 8
    # makespan, std, paper, paper std, gain, CI, wins, paper gain, JCT, busy, delivered, paper util, OOM,
    # OOM called off, re-queued
    assert rows[("W-Large", "FIFO")][2:8] == [306.9, 1.15, None, None, None, None]
    assert rows[("W-Large", "Horus")][2:4] == [212.8, 5.04] and rows[("W-Large", "Horus")][7] == 30.7
    assert rows[("W-Small", "OBP")][7] == 15.7 and rows[("W-Small", "PAB")][7] == 6.3
    assert rows[("W-Large", "Horus")][11] == 69.6 and rows[("W-Large", "OBP")][11] is None
    for (wl, policy), r in rows.items():
        assert r[1] == 0.0  # one seed: no spread
        if policy != "FIFO":  # our gain is our makespan against our FIFO's; one seed: no CI
            fifo = rows[(wl, "FIFO")][0]
            assert r[4] == pytest.approx(100 * (fifo - r[0]) / fifo, abs=0.1) and r[5] is None
            assert r[6] == (1 if r[0] < fifo else 0)
        assert 0 < r[10] <= r[9] <= 100  # delivered utilisation <= busy-GPU share
    assert rows[("W-Large", "FIFO")][0] == 233.1  # seed 0: FIFO never shares, so no truth changes it
    assert rows[("W-Large", "PAB")][-1] > 0 and rows[("W-Large", "FIFO")][-1] == 0  # PAB re-queues, FIFO never
    assert any(r[12] > 0 for r in rows.values()) and rows[("W-Large", "FIFO")][12] == 0  # OOM with real predictions
    assert any(n.startswith("computed in") and "FIFO alone" in n for n in result.notes)


def test_horus_table6_shows_the_lucid_truth_beside_the_builtin_one(shared, tmp_path):
    result = run_reproduction(HorusTable6(seeds=1), shared)
    lucid_title = "truth lucid (measured time-sliced pairs and memory)"
    assert [t.title.split(":")[0] for t in result.tables] == [
        "truth builtin", lucid_title, "truth builtin, W-Large", "truth builtin, W-Small", "truth lucid, W-Large",
        "truth lucid, W-Small"]
    lucid = {(r[0], r[1]): r[2:] for r in result.tables[1].rows}
    assert lucid[("W-Large", "FIFO")][0] == 233.1 and lucid[("W-Large", "Horus")][0] < 233.1


def test_coscheml_and_oracle(tmp_path):
    cs = run_reproduction(CoScheML(seeds=1), tmp_path)
    rows = {r[0]: r[1:] for r in cs.tables[0].rows}
    assert list(rows) == ["no sharing (FIFO)", "Co-scheML", "Binpack", "Loadbalance", "Mystic"]
    papers = ["Co-scheML", "Binpack", "Loadbalance", "Mystic"]
    assert [rows[p][1] for p in papers] == [844, 1089, 943, 968]           # paper JCT (s)
    assert [rows[p][3] for p in papers] == [1705, 2156, 2027, 2032]        # paper makespan (s)
    assert rows["Co-scheML"][11] == 78 and rows["Binpack"][11] is None     # paper utilisation (%)
    assert rows["no sharing (FIFO)"][7] == 1.0 and rows["no sharing (FIFO)"][4] is None  # speed 1, no gain
    assert all(r[0] > 0 and r[2] >= r[0] and 0 < r[7] <= 1.0 for r in rows.values())
    main_title = "30 s arrivals, 1 seeds, truth builtin; makespan gains vs no sharing paired per seed"
    assert [t.title.split(":")[0] for t in cs.tables] == [main_title, "makespan gain"]
    assert len(cs.tables[1].rows) == 6 and cs.tables[1].columns[6] == "verdict"

    oracle = run_reproduction(ColocationOracle(seeds=1), tmp_path)
    rows = {r[0]: r[1:] for r in oracle.tables[0].rows}
    # makespan real, gain, CI, wins, share, makespan perfect, gain, CI, wins, share, OOM real, OOM perfect
    assert rows["no sharing (FIFO)"][:5] == [2243, None, None, None, 0] and rows["oracle"][4] == 100
    assert rows["oracle"][0] == 1472 and rows["oracle"][1] == 34.4  # (2243 - 1472) / 2243
    assert rows["oracle"][0] <= min(r[0] for r in rows.values())    # best on seed 0 (not on every seed: docs)
    assert rows["oracle"][10:] == [0.0, 0.0]                         # it never runs out of memory
    horus = rows["Horus"]
    assert horus[4] == round(100 * (2243 - horus[0]) / (2243 - 1472))


def test_horus_table7_on_a_philly_slice(shared, tmp_path):
    result = run_reproduction(HorusTable7(seeds=1, jobs=300, nodes=8), shared)
    assert [t.title.split(":")[0] for t in result.tables] == [
        "real predictions", "perfect predictions", "real predictions, waiting-time reduction",
        "perfect predictions, waiting-time reduction"]
    assert len(result.tables[2].rows) == 10  # every pair of the five rows beside FIFO
    real = {r[0]: r[1:] for r in result.tables[0].rows}
    perfect = {r[0]: r[1:] for r in result.tables[1].rows}
    assert list(real) == ["FIFO", "OBP", "Horus", "Horus-f", "Horus k=4", "Horus k=5"]
    assert [real[p][7] for p in ("OBP", "Horus", "Horus-f")] == [25.4, 66.4, 68.3]  # paper reductions (%)
    assert real["FIFO"][6] == 466.2 and real["FIFO"][3] is None
    assert real["FIFO"][0] > real["Horus"][0] and real["Horus"][3] > 0
    assert sum(real[p][10] for p in real) > 0 and all(perfect[p][10] == 0 for p in perfect)  # OOM only when wrong
    assert result.notes[0].startswith("paper on k:")


def test_horus_table7_needs_the_philly_window(tmp_path):
    res = runner.invoke(app, ["reproduce", "horus-table7", "--shared", str(tmp_path)])
    assert res.exit_code == 2 and res.output.strip().count("\n") == 0
    assert "error: reproduce horus-table7 needs" in res.output and "input_cluster_log" in res.output


def test_interference_beside_the_quoted_mape(shared):
    result = run_reproduction(Interference(dataset="lucid"), shared)
    assert [t.title.split(":")[0] for t in result.tables] == ["lucid-lomo"]
    rows = {r[0]: r[1:] for r in result.tables[0].rows}
    assert rows["horus-curve"][1] == 8.1 and rows["pair-forest"][1] == 8.4 and rows["constant-1"][1] is None
    # ours beats the quoted MAPE; a learned model's partner-choice regret is below "no slowdown"'s
    assert rows["horus-curve"][0] < 8.1 and rows["pair-forest"][0] < 8.4
    assert rows["horus-curve"][6] < rows["constant-1"][6] and rows["pair-forest"][6] < rows["constant-1"][6]
    assert rows["constant-1"][0] == 9.5
