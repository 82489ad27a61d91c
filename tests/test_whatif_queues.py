"""What-if on quotas (dlsched.sim.whatif with other queues): hand-checked per job and per queue,
in the library, through ``dlsched whatif LOG --queues FILE`` on the shipped example log and through
``POST /api/v1/whatif`` on the live state; bad input named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.quotas import QueueSpec, QuotaManager
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sim.eta import EtaEstimator
from dlsched.sim.whatif import what_if

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
EXAMPLE_LOG = ROOT / "docs" / "examples" / "whatif-events.jsonl"
EXAMPLE_QUEUES = ROOT / "docs" / "examples" / "whatif-queues.toml"
T0 = 1_700_000_000.0

# A may borrow 8 GPUs; B and C lend without a limit and borrow nothing
BORROW = (QueueSpec("A", borrow_limit=8), QueueSpec("B", borrow_limit=0), QueueSpec("C", borrow_limit=0))


def job(jid: str, vc: str, gpus: int, pred: float) -> Job:
    j = Job(jid, vc, gpus, 0.0, 999.0)
    j.pred_duration = pred
    return j


def three_vcs(queues=None) -> ClusterState:
    """One 8-GPU node per VC, FIFO, at 10 s: a1 (8 GPUs, predicted 100 s) runs on A since 0 and a2
    (4 GPUs, 30 s) waits behind it; b1 (8 GPUs, 20 s) runs on B, c1 (8 GPUs, 50 s) on C. With
    ``queues`` the state runs a queue manager (as the simulator installs one)."""
    policy = make_policy("fifo", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), new_queue=policy.new_queue)
    if queues is not None:
        QuotaManager(queues, state)
    state.begin(0.0)
    for j, node in ((job("a1", "A", 8, 100.0), 0), (job("b1", "B", 8, 20.0), 1), (job("c1", "C", 8, 50.0), 2)):
        state.submit(j, 0.0)
        state.start(j, ((node, 0xFF),), 0.0)
    state.submit(job("a2", "A", 4, 30.0), 0.0)
    return state


def rows(w):
    return {j.job_id: (j.current, j.other, j.diff) for j in w.jobs}


def test_enabling_borrowing_makes_the_waiting_job_start_earlier():
    policy = make_policy("fifo", "consolidate")
    state = three_vcs()   # fixed VCs: a2 waits for a1's node (100)
    w = what_if(EtaEstimator(policy), None, state, 10.0, BORROW)
    # with borrowing a2 takes 4 of B's GPUs when b1 ends at 20 (B is idle and lends; C is full
    # until 50): 80 s earlier
    assert rows(w) == {"a2": (100.0, 20.0, -80.0)}
    assert (w.current_policy, w.other_policy) == ("fifo", "fifo")
    assert w.other_queues == "A borrow 8 lend -; B borrow 0 lend -; C borrow 0 lend -"
    q = w.by_queue()["A"]
    assert (q["mean_wait_current"], q["mean_wait_other"], q["mean_wait_change"]) == (100.0, 20.0, -80.0)
    assert (q["earlier"], q["later"], q["same"]) == (1, 0, 0)
    assert w.as_dict()["other_queues"] == w.other_queues
    # the real state is untouched: nothing borrowed, a2 still waits
    assert not state.hosts and state.n_pending == 1
    state.check_invariants()


def test_a_lend_limit_of_zero_makes_it_later():
    policy = make_policy("fifo", "consolidate")
    state = three_vcs(BORROW)   # the state runs borrowing queues: a2 borrows B at 20
    no_lend_b = (QueueSpec("A", borrow_limit=8), QueueSpec("B", borrow_limit=0, lend_limit=0),
                 QueueSpec("C", borrow_limit=0))
    w = what_if(EtaEstimator(policy), None, state, 10.0, no_lend_b)
    # B lends nothing: a2 borrows C when c1 ends at 50: 30 s later
    assert rows(w) == {"a2": (20.0, 50.0, 30.0)}
    assert w.other_queues == "A borrow 8 lend -; B borrow 0 lend 0; C borrow 0 lend -"
    # fixed VCs (no queues at all): a1's end, 80 s later
    fixed = what_if(EtaEstimator(policy), None, state, 10.0, ())
    assert rows(fixed) == {"a2": (20.0, 100.0, 80.0)} and fixed.other_queues == "fixed VCs (no queue borrows)"
    s = fixed.summary()
    assert (s["earlier"], s["later"], s["mean_wait_change"]) == (0, 1, 80.0)


def test_policy_and_queues_together():
    # QSSF orders a2 by GPUs x predicted duration: one waiting job, so only the queues move it
    policy = make_policy("fifo", "consolidate")
    w = what_if(EtaEstimator(policy), make_policy("qssf", "consolidate"), three_vcs(), 10.0, BORROW)
    assert rows(w) == {"a2": (100.0, 20.0, -80.0)} and w.other_policy == "qssf"


def test_queues_that_do_not_fit_the_state_are_refused():
    policy = make_policy("fifo", "consolidate")
    with pytest.raises(ValueError, match="queue\\(s\\) Z name no VC of the cluster"):
        what_if(EtaEstimator(policy), None, three_vcs(), 10.0, (QueueSpec("Z", borrow_limit=8), *BORROW))


# -- the CLI on the shipped example log ---------------------------------------------------------

def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlsched.cli.main", "whatif", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "COLUMNS": "200"})


def write_example_log(path: Path) -> Path:
    """The shipped ``docs/examples/whatif-events.jsonl``: the live service (in process, on a
    controlled clock, FIFO) with VC ``research`` (node r1) and VC ``prod`` (node p1), 8 GPUs each.
    train-1 (research, 8 GPUs) runs 0-60; serve-1 (prod, 4 GPUs) runs 1-20; train-2 (research, 4
    GPUs) arrives at 5 and waits for r1: it starts at 60 and ends at 90. Regenerate with
    ``PYTHONPATH=src:tests python -c "import test_whatif_queues as t; t.write_example_log(t.EXAMPLE_LOG)"``."""
    pytest.importorskip("sqlalchemy")
    from support.live_app import FakeBridge

    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts, PodFacts
    from dlsched.service.record import Recorder
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    path.unlink(missing_ok=True)   # the recorder appends
    now = [T0]
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), clock=lambda: now[0],
                         recorder=Recorder(path))
    service = LiveService(core, FakeBridge())
    core.node_seen(NodeFacts("r1", 8, "research", "", False))
    core.node_seen(NodeFacts("p1", 8, "prod", "", False))
    script = [(0, "add", "train-1", "research", 8), (1, "add", "serve-1", "prod", 4),
              (5, "add", "train-2", "research", 4), (20, "end", "serve-1", "", 0), (60, "end", "train-1", "", 0),
              (90, "end", "train-2", "", 0)]
    for t, what, uid, vc, gpus in script:
        now[0] = T0 + t
        if what == "add":
            core.pod_seen(PodFacts(uid, "default", uid, gpus, created=T0 + t, labels={"dlsched.io/vc": vc}))
        else:
            core.pod_gone(uid)
        core.run_pass()
        for job_uid, j in list(core.jobs.items()):
            if j.state.name == "ASSUMED":
                node = core.state.node_ids[j.placement[0][0]]
                assert service.bind("default", job_uid, job_uid, node) == ""
    core.recorder.close()
    return path


def test_the_shipped_example_log_is_what_the_live_service_records(tmp_path):
    made = write_example_log(tmp_path / "events.jsonl")
    assert made.read_text() == EXAMPLE_LOG.read_text()


def test_cli_queues_hand_checked_on_the_example():
    res = cli(EXAMPLE_LOG, "--queues", EXAMPLE_QUEUES, "--at", "10", "--durations", "recorded", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # at 10 train-1 has 50 s left on r1 and serve-1 holds 4 of p1's GPUs: 4 are idle. Under the
    # example's queues research borrows them at once (prod has nothing waiting, and both limits
    # allow 4): train-2 starts at 10 instead of 60 (train-1's end), 50 s earlier
    assert [(r["job"], r["vc"], r["current"] - T0, r["other"] - T0, r["diff_s"]) for r in got["jobs"]] == \
        [("default/train-2", "research", 60.0, 10.0, -50.0)]
    assert got["current_policy"] == got["other_policy"] == "fifo"
    assert got["other_queues"] == "research borrow 8 lend 4; prod borrow 4 lend 4"
    q = got["queues"]["research"]
    assert (q["mean_wait_current"], q["mean_wait_other"], q["mean_wait_change"]) == (55.0, 5.0, -50.0)
    res = cli(EXAMPLE_LOG, "--queues", EXAMPLE_QUEUES, "--at", "10", "--durations", "recorded")
    assert res.returncode == 0, res.stderr
    assert "fifo (recorded) vs fifo with queues research borrow 8 lend 4" in res.stderr
    line = next(x for x in res.stdout.splitlines() if "default/train-2" in x)
    assert [c.strip() for c in line.split("│")[1:-1]] == ["default/train-2", "research", "4", "50", "0", "-50"]


@pytest.mark.parametrize(("text", "message"), [
    ('[[queues]]\nname = "research"\nborrow_limit = -1\n',
     "error: --queues {f}, line 3: queues[1].borrow_limit = -1: want a whole number >= 0"),
    ('[[queues]]\nname = "nosuch"\nborrow_limit = 8\n[[queues]]\nname = "prod"\n',
     "error: --queues {f}: queue(s) nosuch name no VC of the cluster and are no queue's parent"),
    ("", "error: --queues {f}: no [[queues]] tables"),
    ("[groups]\n", "error: --queues {f}: unknown top-level key(s) groups: only [[queues]] tables belong here"),
])
def test_cli_bad_queues_is_one_error_line(tmp_path, text, message):
    f = tmp_path / "q.toml"
    f.write_text(text)
    res = cli(EXAMPLE_LOG, "--queues", f, "--at", "10")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith(message.format(f=f)), res.stderr


def test_cli_needs_something_to_change():
    res = cli(EXAMPLE_LOG, "--at", "10")
    assert res.returncode == 2 and res.stderr.strip() == \
        "error: give --policy NAME, --queues FILE.toml or both: what should the other run change?"
    res = cli(EXAMPLE_LOG, "--queues", "/nonexistent.toml")
    assert res.returncode == 2 and res.stderr.strip() == "error: --queues: /nonexistent.toml is not a file"
    res = cli(EXAMPLE_LOG, "--queues", EXAMPLE_QUEUES, "--param", "x=1")
    assert res.returncode == 2 and res.stderr.strip() == "error: --param and --placement go with --policy NAME"


# -- live: POST /api/v1/whatif ---------------------------------------------------------------------

def test_live_whatif_on_quotas():
    """The example's moment on the live service: the body's queues replace the running ones (fixed
    VCs) in the other run; bad bodies and queues that name no live VC are a 400 naming them."""
    pytest.importorskip("fastapi")
    pytest.importorskip("sqlalchemy")
    import urllib.error
    import urllib.request

    from support.live_app import FakeBridge, LiveApp

    from dlsched.cli.policy_factory import build_policy
    from dlsched.service.app import build_app
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts, PodFacts
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    now = [T0]
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), clock=lambda: now[0])
    core.node_seen(NodeFacts("r1", 8, "research", "", False))
    core.node_seen(NodeFacts("p1", 8, "prod", "", False))
    service = LiveService(core, FakeBridge(), token="tok")
    service.policy_factory = lambda name, params, place: build_policy(name, params, place)
    for t, uid, vc, gpus in ((0, "train-1", "research", 8), (1, "serve-1", "prod", 4), (5, "train-2", "research", 4)):
        now[0] = T0 + t
        core.pod_seen(PodFacts(uid, "default", uid, gpus, created=T0 + t, labels={"dlsched.io/vc": vc}))
        core.run_pass()
        for job_uid, j in list(core.jobs.items()):
            if j.state.name == "ASSUMED":
                assert service.bind("default", job_uid, job_uid, core.state.node_ids[j.placement[0][0]]) == ""
    for uid, pred in (("train-1", 60.0), ("serve-1", 19.0), ("train-2", 30.0)):
        core.jobs[uid].pred_duration = pred
    now[0] = T0 + 10
    body = EXAMPLE_QUEUES.read_bytes()

    def post(app, query: str, data: bytes, token: str | None = "tok"):
        req = urllib.request.Request(f"{app.url}/api/v1/whatif{query}", data=data, method="POST",
                                     headers={"Content-Type": "text/plain",
                                              **({"Authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    with LiveApp(build_app(service)) as app:
        with pytest.raises(urllib.error.HTTPError) as err:
            post(app, "", body, token=None)
        assert err.value.code == 403
        got = post(app, "", body)
        assert (got["current_policy"], got["other_policy"]) == ("fifo", "fifo")
        assert got["other_queues"] == "research borrow 8 lend 4; prod borrow 4 lend 4"
        assert [(r["job"], r["current"] - T0, r["other"] - T0, r["diff_s"]) for r in got["jobs"]] == \
            [("default/train-2", 60.0, 10.0, -50.0)]
        assert got["queues"]["research"]["mean_wait_change"] == -50.0
        got = post(app, "?policy=qssf", body)   # with another policy as well
        assert got["other_policy"] == "qssf" and got["jobs"][0]["diff_s"] == -50.0
        got = post(app, "", b"")                # an empty body: fixed VCs, as running
        assert got["other_queues"] == "fixed VCs (no queue borrows)" and got["jobs"][0]["diff_s"] == 0.0
        for query, data, needle in (
                ("", b'[[queues]]\nname = "research"\nlend_limit = "x"\n',
                 "body, line 3: queues[1].lend_limit = 'x'"),
                ("", b'[[queues]]\nname = "gpu-farm"\nborrow_limit = 8\n[[queues]]\nname = "prod"\n',
                 "queues: queue(s) gpu-farm name no VC of the cluster"),
                ("", b"\xff\xfe", "body: not UTF-8 text"),
                ("?placement=best-fit", body, "placement= and param= go with policy=NAME"),
                ("?policy=nosuch", body, "policy=nosuch: ")):
            with pytest.raises(urllib.error.HTTPError) as err:
                post(app, query, data)
            assert err.value.code == 400, (query, data)
            detail = json.loads(err.value.read())["detail"]
            assert detail.startswith(needle) if needle.startswith(("body", "queues", "placement", "policy")) \
                else needle in detail, detail
    assert core.state.n_pending == 1 and not core.state.hosts
    core.state.check_invariants()
