"""Corrected memory survives a restart (issue 33): what the agents' readings, an OOM failover or
a co-runner's OOM taught the service about a pod's GPU memory, and the peaks its memory
calibration counted, are kept in the store (``memory_corrections``, ``memory_peaks``; SQLite and
PostgreSQL), keyed by pod uid, bounded, and read back when a restarted service (or a new leader)
starts. Before, a restart predicted from scratch and put the pod back where it runs out of memory."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.predictors.resources.stack_calibration import StackCalibration
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.memory_kept import DROPPED
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

# (utilisation %, memory MiB) as the service's predictor gives them for ResNet-50 at 64 and 32
PREDS = {"r64": (95.0, 9_389.0), "r32": (90.3, 5_862.0)}
GPU_MIB = 24_576


def correction(uid: str, mib: float, at: float, why: str = "observe") -> dict:
    return {"pod_uid": uid, "pod": f"default/{uid}", "gpu_mem_mib": mib, "why": why, "at": at}


def peak(uid: str, mib: float, at: float) -> dict:
    return {"pod_uid": uid, "cal_key": "v100|unknown|cnn", "signature": f"r64|b64|{uid}", "raw_mib": 9_389.0,
            "given_mib": 9_389.0, "peak_mib": mib, "at": at}


# -- the store, on SQLite and PostgreSQL -----------------------------------------------------------
def test_the_store_keeps_one_row_per_pod_the_newest_and_a_reopened_store_reads_them(url):
    store = Store(url)
    assert store.keep_memory([correction("a", 9_000.0, 1.0), correction("b", 7_000.0, 2.0)], [peak("a", 9_100.0, 1.0)]) == 0
    assert store.keep_memory([correction("a", 12_000.0, 3.0, "oom")], [peak("a", 12_500.0, 3.0)]) == 0
    store.close()
    corrections, peaks = Store(url).memory_rows()
    assert [(r["pod_uid"], r["gpu_mem_mib"], r["why"], r["at"]) for r in corrections] == [
        ("b", 7_000.0, "observe", 2.0), ("a", 12_000.0, "oom", 3.0)]   # oldest first; a replaced
    assert [(r["pod_uid"], r["peak_mib"], r["cal_key"], r["signature"]) for r in peaks] == [
        ("a", 12_500.0, "v100|unknown|cnn", "r64|b64|a")]


def test_each_table_keeps_its_newest_rows_and_says_how_many_went(url):
    store = Store(url, memory_kept=3)
    assert store.keep_memory([correction(u, 1_000.0 + i, float(i)) for i, u in enumerate("abc")], []) == 0
    assert store.keep_memory([correction("d", 5_000.0, 10.0), correction("e", 5_000.0, 11.0)], []) == 2
    assert store.keep_memory([correction("c", 6_000.0, 12.0)], []) == 0   # a replaced row is no new row
    other = Store(url, memory_kept=3)   # a second replica on the same database counts what is there
    assert other.keep_memory([correction("f", 1.0, 13.0)], [peak(u, 9_000.0, float(i)) for i, u in enumerate("wxyz")]) == 2
    corrections, peaks = store.memory_rows()
    assert [r["pod_uid"] for r in corrections] == ["e", "c", "f"]
    assert [r["pod_uid"] for r in peaks] == ["x", "y", "z"]


def test_a_pod_that_ended_takes_its_correction_along_and_an_oom_keeps_it(url):
    store = Store(url)
    store.keep_memory([correction(u, 9_000.0, 1.0) for u in "abcdef"], [peak("a", 9_000.0, 1.0)])
    store.release("a", "default/a", "finish", 2.0)
    store.release("b", "default/b", "withdraw", 2.0)
    store.release("c", "default/c", "time_limit", 2.0)
    store.release("d", "default/d", "oom", 2.0)      # queued again: its correction is what it needs
    store.release("e", "default/e", "forget", 2.0)   # a failed bind: pending again
    store.release_pods(["f"], "finish", 2.0)
    corrections, peaks = store.memory_rows()
    assert [r["pod_uid"] for r in corrections] == ["d", "e"]
    assert [r["pod_uid"] for r in peaks] == ["a"]   # the calibration's peaks outlive their pods
    store.forget_memory(["d"])
    assert [r["pod_uid"] for r in store.memory_rows()[0]] == ["e"]


# -- the core across a restart ----------------------------------------------------------------------
class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


class Calibrated:
    """The service's predictor's shape: fixed figures, calibrated per cluster (runtime.resource_predictor)."""

    def __init__(self) -> None:
        self.calibration = StackCalibration()

    def __call__(self, job) -> None:
        util, mib = PREDS[job.model_name]
        job.pred_gpu_util = util
        job.pred_gpu_mem_mib = self.calibration.record(job.job_id, mib, "V100", "unknown",
                                                       f"{job.model_name}|b{job.batch_size}", "cnn")


def plain(job) -> None:
    """Fixed figures without a calibration: what a restart restores is then the correction alone."""
    job.pred_gpu_util, job.pred_gpu_mem_mib = PREDS[job.model_name]


def start(store: Store, calibrated: bool = False) -> tuple[SchedulerCore, LiveService, Calibrated]:
    """A service process on ``store`` (a restart is a new one): horus, two jobs per GPU, one GPU."""
    predict = Calibrated() if calibrated else plain
    core = SchedulerCore(make_policy("horus", share=True), store, max_jobs_per_gpu=2,
                         clock=iter(range(1000, 10**6)).__next__, predict=predict)
    live = LiveService(core, None, observe_after=0.0)
    live.start()   # without an API server: reads the store, then serves
    live.bridge = Bridge()
    core.node_seen(NodeFacts("g24", 1, "default", "", False, gpu_mem_mib=GPU_MIB))
    return core, live, predict


def pod(uid: str, model: str, node: str = "") -> PodFacts:
    ann = {"dlsched.io/model": model, **({"dlsched.io/gpus": "0"} if node else {})}
    return PodFacts(uid, "default", uid, 1, node_name=node, phase="Running" if node else "Pending",
                    created=1.0, annotations=ann)


def run(core: SchedulerCore, live: LiveService, uid: str, model: str) -> None:
    core.pod_seen(pod(uid, model))
    passed, _ = core.filter(pod(uid, model), ["g24"])
    assert passed == ["g24"] and live.bind("default", uid, uid, "g24") == ""


def placed(core: SchedulerCore, uid: str, model: str) -> bool:
    core.pod_seen(pod(uid, model))
    return core.filter(pod(uid, model), ["g24"])[0] == ["g24"]


def test_a_corrected_pod_keeps_its_memory_across_a_restart_and_no_pod_is_put_beside_it(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'dlsched.db'}")
    core, live, _ = start(store)
    run(core, live, "a", "r64")   # predicted 9,389 MiB, reads 20,000 after its warm-up
    assert live.observe("g24", [("a", 90.0, 20_000.0)]) == {"node": "g24", "corrected": 1}
    assert core.jobs["a"].pred_gpu_mem_mib == 20_000.0
    assert not placed(core, "b", "r32")   # 20,000 + 5,862 MiB would overfill the 24,576 MiB GPU
    store.close()
    store = Store(f"sqlite:///{tmp_path / 'dlsched.db'}")
    core, live, _ = start(store)   # the restart: the API server shows a bound, b pending
    core.pod_seen(pod("a", "r64", node="g24"))
    job = core.jobs["a"]
    assert job.state.name == "RUNNING"
    assert (job.pred_gpu_mem_mib, job.prior_gpu_mem_mib) == (20_000.0, 9_389.0)   # not predicted from scratch
    assert core.counters["memory corrections restored from the store"] == 1
    assert not placed(core, "b", "r32")   # main: b nominated beside a, 25,862 MiB on 24,576
    assert "b" not in core.slots
    st = core.state
    assert st.gpu_pred_mem(0, 0) == 20_000.0 <= st.node_mem[0]
    core.state.check_invariants()


def test_an_oom_failover_survives_a_restart(tmp_path):
    db = f"sqlite:///{tmp_path / 'dlsched.db'}"
    store = Store(db)
    core, live, _ = start(store)
    run(core, live, "a", "r32")
    run(core, live, "b", "r64")   # 5,862 + 9,389 MiB share the GPU
    # b reads 20,000 MiB: 25,862 on 24,576, the newest holder fails over with its reading
    assert live.observe("g24", [("b", 90.0, 20_000.0)]) == {"node": "g24", "oom": 1}
    assert core.jobs["b"].state.name == "PENDING" and core.jobs["b"].pred_gpu_mem_mib == 20_000.0
    rows = store.memory_rows()[0]
    assert [(r["pod_uid"], r["gpu_mem_mib"], r["why"]) for r in rows] == [("b", 20_000.0, "oom")]
    store.close()
    core, live, _ = start(Store(db))
    core.pod_seen(pod("a", "r32", node="g24"))
    assert not placed(core, "b", "r64")   # main: placed beside a again, the same OOM
    assert core.jobs["b"].pred_gpu_mem_mib == 20_000.0
    assert "b" not in core.slots


def test_the_calibration_survives_a_restart(tmp_path):
    """The calibration learnt from peaks of pods that ended since: a restarted service calibrates
    a new pod as the one that never stopped does, by its fit and by its observed-peak guard."""
    db = f"sqlite:///{tmp_path / 'dlsched.db'}"
    store = Store(db)
    core, live, predict = start(store, calibrated=True)
    for i, mib in enumerate((11_000.0, 11_400.0, 10_800.0)):   # r64 pods peak ~17 % above 9,389 MiB
        uid = f"p{i}"
        run(core, live, uid, "r64")
        live.observe("g24", [(uid, 90.0, mib)])
        core.pod_gone(uid)
    assert store.memory_rows()[0] == []   # the pods ended: no correction left, their peaks stay
    assert len(store.memory_rows()[1]) == 3
    cal = predict.calibration
    fitted = cal.apply(9_389.0, "V100", "unknown", "r64|b32", "cnn")   # another batch: the fit alone
    guarded = cal.apply(9_389.0, "V100", "unknown", "r64|b0", "cnn")   # the same job: its largest peak
    assert 10_500.0 < fitted < guarded == 11_400.0
    store.close()
    core, live, predict = start(Store(db), calibrated=True)
    core.pod_seen(pod("same", "r64"))
    other = pod("other", "r64")
    other.annotations["dlsched.io/batch-size"] = "32"
    core.pod_seen(other)
    assert core.jobs["same"].pred_gpu_mem_mib == guarded                              # main: 9,389
    assert core.jobs["other"].pred_gpu_mem_mib == pytest.approx(fitted, rel=1e-12)    # main: 9,389
    assert predict.calibration.stats()["v100|unknown|cnn"] == pytest.approx(cal.stats()["v100|unknown|cnn"],
                                                                           rel=1e-12, nan_ok=True)


def test_corrections_of_pods_gone_while_the_service_was_down_are_dropped_at_start_up(tmp_path):
    db = f"sqlite:///{tmp_path / 'dlsched.db'}"
    store = Store(db)
    store.keep_memory([correction("gone", 20_000.0, 1.0), correction("here", 15_000.0, 2.0)], [])
    core, _, _ = start(store)
    core.pod_seen(pod("here", "r64", node="g24"))
    assert core.settle_memory() == 1   # what start() does after listing the API server's pods
    assert [r["pod_uid"] for r in store.memory_rows()[0]] == ["here"]
    assert core.jobs["here"].pred_gpu_mem_mib == 15_000.0
    assert core.counters["memory corrections of pods gone while the service was down, dropped"] == 1


def test_rows_past_the_limit_are_counted_by_the_service(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'dlsched.db'}", memory_kept=1)
    core, live, _ = start(store, calibrated=True)
    for uid, mib in (("a", 12_000.0), ("b", 12_100.0)):
        run(core, live, uid, "r32")
        live.observe("g24", [(uid, 50.0, mib)])
    assert core.counters[DROPPED] == 2   # one correction and one peak went
    assert [r["pod_uid"] for r in store.memory_rows()[0]] == ["b"]


def test_an_unchanged_reading_writes_nothing(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'dlsched.db'}")
    core, live, _ = start(store)
    run(core, live, "a", "r64")
    live.observe("g24", [("a", 90.0, 12_000.0)])
    before = store.memory_rows()
    for util in (80.0, 85.0, 95.0):   # utilisation moves every round; memory stays
        live.observe("g24", [("a", util, 12_000.0)])
        assert core.write_memory() == 0
    assert store.memory_rows() == before
