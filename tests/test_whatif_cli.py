"""``dlsched whatif LOG``: a recorded log's state at a moment, forward under the recorded policy
and another one; hand-checked with predicted (mean before the cut) and recorded durations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.registry import make_policy
from dlsched.service.whatif_log import state_at

SRC = str(Path(__file__).resolve().parents[1] / "src")
T0 = 1_700_000_000.0


def write_log(path: Path) -> Path:
    """One 8-GPU node, FIFO. x (8 GPUs) runs 0-60; a (8) runs 60-160; b (8) arrives at 70 and runs
    160-210; c (4) at 71 and d (4) at 72 run 210-230 and 210-240."""
    ev = [{"kind": "config", "at": 0.0, "policy": "fifo", "placement": "consolidate", "backfill": False,
           "max_jobs_per_gpu": 1, "default_gpu": "V100"},
          {"kind": "node", "at": 0, "name": "n", "vc": "default", "gpus": 8, "gpu_type": "V100", "cordoned": False}]

    def job(uid, gpus, submit, start, end, first):
        return [(submit, {"kind": "submit", "uid": uid, "pod": f"default/{uid}", "vc": "default", "gpus": gpus,
                          "submit_time": T0 + submit}),
                (start, {"kind": "start", "uid": uid, "node": "n", "gpus": list(range(first, first + gpus))}),
                (start, {"kind": "confirm", "uid": uid}),
                (end, {"kind": "finish", "uid": uid, "why": "pod succeeded"})]
    timed = job("x", 8, 0, 0, 60, 0) + job("a", 8, 60, 60, 160, 0) + job("b", 8, 70, 160, 210, 0) + \
        job("c", 4, 71, 210, 230, 0) + job("d", 4, 72, 210, 240, 4)
    timed.sort(key=lambda p: p[0])
    ev += [{**e, "at": T0 + t} for t, e in timed]
    ev[1]["at"] = T0
    path.write_text("".join(json.dumps(e) + "\n" for e in ev))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlsched.cli.main", "whatif", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "COLUMNS": "200"})


def test_state_at_the_cut(tmp_path):
    m = state_at(write_log(tmp_path / "log.jsonl"), make_policy("fifo"), at=80)
    st = m.state
    assert m.now == T0 + 80 and m.mean_run == 60.0     # only x finished before the cut
    assert [j.job_id for vc in st.vcs for j in vc.running] == ["a"]
    assert sorted(j.job_id for vc in st.vcs for j in vc.queue) == ["b", "c", "d"]
    assert st.jobs["a"].run_since == T0 + 60
    st.check_invariants()


def test_recorded_durations_hand_checked(tmp_path):
    res = run(write_log(tmp_path / "log.jsonl"), "--policy", "qssf", "--at", "80", "--durations", "recorded", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # a ran 20 s of its 100: ends at 160. FIFO: b at 160, c and d at 210 -- the recorded starts.
    # QSSF (GPUs x duration: c 80, d 120, b 400): c and d at 160, c ends 180, d 190, then b.
    rows = {r["job"]: (r["current"] - T0, r["other"] - T0, r["diff_s"]) for r in got["jobs"]}
    assert rows == {"default/b": (160.0, 190.0, 30.0), "default/c": (210.0, 160.0, -50.0),
                    "default/d": (210.0, 160.0, -50.0)}
    s = got["summary"]
    # waits under FIFO: b 90, c 139, d 138; under QSSF: b 120, c 89, d 88
    assert s["mean_wait_current"] == pytest.approx((90 + 139 + 138) / 3)
    assert s["mean_wait_change"] == pytest.approx((30 - 50 - 50) / 3)
    assert (s["median_wait_current"], s["median_wait_other"], s["median_wait_change"]) == (138.0, 89.0, -49.0)
    assert (s["earlier"], s["later"], s["same"]) == (2, 1, 0)
    assert got["at"] == 80.0 and got["durations"] == "recorded"


def test_predicted_durations_and_the_table(tmp_path):
    log = write_log(tmp_path / "log.jsonl")
    res = run(log, "--policy", "qssf", "--at", "80", "--json")
    rows = {r["job"]: (r["current"] - T0, r["other"] - T0) for r in json.loads(res.stdout)["jobs"]}
    # every job 60 s (x's run): a ends at 120; FIFO b 120, c d 180; QSSF c d 120 (240 < 480), b 180
    assert rows == {"default/b": (120.0, 180.0), "default/c": (180.0, 120.0), "default/d": (180.0, 120.0)}
    res = run(log, "--policy", "qssf", "--at", "80")
    assert res.returncode == 0, res.stderr
    assert "what-if at 80 s" in res.stderr and "3 pending, 1 running; fifo (recorded) vs qssf" in res.stderr
    assert "60 s (mean run time before the cut)" in res.stderr
    line = next(x for x in res.stdout.splitlines() if "default/b" in x)
    assert [c.strip() for c in line.split("│")[1:-1]] == ["default/b", "default", "8", "40", "100", "+60"]
    allrow = next(x for x in res.stdout.splitlines() if x.strip("│ ").startswith("all"))
    # waits: FIFO b 50, c 109, d 108 (mean 89); QSSF b 110, c 49, d 48 (mean 69)
    assert [c.strip() for c in allrow.split("│")[1:-1]][:5] == ["all", "3", "89", "69", "-20"]


@pytest.mark.parametrize(("argv", "message"), [
    (("--policy", "nosuch"), "error: --policy nosuch: unknown policy 'nosuch'; choose from fifo, "),
    (("--policy", "qssf", "--param", "bogus=1"), "error: --policy qssf: policy qssf has no parameter 'bogus'"),
    (("--policy", "qssf", "--param", "lam"), "error: --policy qssf: --param 'lam': want KEY=VALUE"),
    (("--policy", "qssf", "--at", "-1"), "error: --at -1: the log spans 0 to 240 s after its first event"),
    (("--policy", "qssf", "--durations", "exact"), "error: durations 'exact': choose from predicted, recorded"),
])
def test_bad_input_is_one_error_line(tmp_path, argv, message):
    res = run(write_log(tmp_path / "log.jsonl"), *argv)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[0].startswith(message), res.stderr


def test_missing_log(tmp_path):
    res = run(tmp_path / "none.jsonl", "--policy", "qssf")
    assert res.returncode == 2 and res.stderr.strip() == f"error: LOG: {tmp_path / 'none.jsonl'} is not a file"
