"""Memory calibration from observed peaks per (GPU type, stack), the observed-peak guard, the
stack contexts, and the service wiring (annotations, /metrics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlsched.predictors.resources.context import (
    CUDA_CONTEXT_MIB,
    context_range,
    gpu_generation,
    stack_context,
    workspace_mib,
)
from dlsched.predictors.resources.stack_calibration import StackCalibration, cluster_key, job_signature
from dlsched.predictors.resources.train_memory import TrainingMemoryModel

OFFSET = 1.2 * 1024   # a synthetic stack that holds 1.2 GiB more than the model's context
N_JOBS = 3            # observed jobs after which the error is below 10 %


def _jobs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    raw = rng.uniform(2000, 12000, n)                         # the model's predictions (MiB)
    return raw, (raw + OFFSET) * rng.lognormal(0.0, 0.03, n)  # what the cluster measures


def test_synthetic_stack_offset_learnt_after_three_jobs() -> None:
    raw, seen = _jobs(40)
    cal = StackCalibration()
    for i, (r, y) in enumerate(zip(raw, seen)):
        cal.record(f"j{i}", r, "A100-40GB", "cu121-lazy")
        assert cal.observe(f"j{i}", y)
    fit = cal.fits[cluster_key("A100-40GB", "cu121-lazy")]
    before = np.abs(raw - seen) / seen
    after = np.asarray(fit.err_after)                         # each job scored before it was learnt
    assert before.mean() > 0.10                               # the offset alone is > 10 % error
    assert after[N_JOBS:].mean() < 0.10 and after[N_JOBS:].max() < 0.15
    st = cal.stats()[cluster_key("A100-40GB", "cu121-lazy")]
    assert st["jobs"] == 40 and st["mape_before"] > 10.0 and st["mape_after"] < 5.0
    assert st["intercept_mib"] == pytest.approx(OFFSET, rel=0.35) and st["factor"] == pytest.approx(1.0, abs=0.1)
    # at most 5 % of the observed jobs more than 10 % above their calibrated prediction
    assert np.mean(seen > 1.1 * (fit.a + fit.k * raw)) <= 0.05
    # other clusters are untouched
    assert cal.apply(5000.0, "V100", "cu121-lazy") == 5000.0


def test_guard_never_predicts_below_an_observed_peak_of_the_same_job() -> None:
    cal = StackCalibration()
    sig = job_signature("gpt2_large", 8, 512, "adamw", False, "fused")
    cal.record("a", 20000.0, "A100", "s", sig)
    cal.observe("a", 31000.0)                    # a job far above its prediction
    for i in range(10):                          # many jobs that pull the calibration down
        cal.record(f"b{i}", 10000.0 + 100 * i, "A100", "s")
        cal.observe(f"b{i}", 8000.0 + 80 * i)
    assert cal.apply(20000.0, "A100", "s") < 31000.0
    assert cal.apply(20000.0, "A100", "s", sig) == 31000.0
    assert cal.record("c", 20000.0, "A100", "s", sig) == 31000.0
    assert not cal.observe("never-recorded", 1000.0) and not cal.observe("c", math.nan)


def test_offline_log_fit_and_repeated_readings() -> None:
    raw, seen = _jobs(12, seed=3)
    cal = StackCalibration()
    st = cal.fit_offline(raw, seen, "H100", "")
    assert st["jobs"] == 12 and st["mape_after"] < st["mape_before"]
    assert list(cal.to_json()) == ["h100|unknown"]
    cal.record("x", 5000.0, "T4", "s")
    cal.observe("x", 5500.0)
    cal.observe("x", 5400.0)                     # a lower later reading changes nothing
    cal.observe("x", 6000.0)                     # a higher one replaces the job's row
    assert cal.fits["t4|s"].seen == [6000.0] and len(cal.fits["t4|s"].err_after) == 1


def test_stack_contexts_from_documented_parts() -> None:
    assert CUDA_CONTEXT_MIB["lazy"] == pytest.approx(287_047_680 / 2**20)
    assert gpu_generation("H100-80GB") == "hopper" and gpu_generation("A100-40GB") == "ampere-large"
    assert gpu_generation("V100") == "other"
    assert workspace_mib("H100") == pytest.approx(32 + 32) and workspace_mib("V100") == pytest.approx(8.125 + 1)
    assert workspace_mib("A100") == pytest.approx(8.125 + 4)
    eager, lazy = stack_context("eager", "A100"), stack_context("lazy", "A100")
    assert eager.total_mib == pytest.approx(1237.0)        # GPUMemNet's measured floor on its A100
    assert lazy.total_mib < 0.5 * eager.total_mib and lazy.parts()["source"]
    fit = stack_context("gpumemnet-a100", "A100", 1800.0)
    assert fit.total_mib == pytest.approx(1800.0) and fit.libraries_mib > eager.libraries_mib
    # Lucid's cluster: its smallest measured jobs (2,050 MiB) are its context, the largest known
    lucid = stack_context("lucid", "A100")
    assert lucid.total_mib == pytest.approx(2050.0) and lucid.libraries_mib > 0 and "Lucid" in lucid.source
    assert context_range("A100", 1800.0) == (pytest.approx(lazy.total_mib), pytest.approx(2050.0))
    assert context_range("A100", 2500.0) == (pytest.approx(lazy.total_mib), pytest.approx(2500.0))
    # an unknown stack reserves the largest known context (issue 36), whichever stack that is
    assert stack_context("unknown", "A100", 1800.0).total_mib == pytest.approx(2050.0)
    assert stack_context("unknown", "A100", 2500.0).total_mib == pytest.approx(2500.0)
    with pytest.raises(ValueError, match="unknown stack"):
        stack_context("tf-1.15", "A100")


def test_predictor_uses_the_stack_and_widens_the_band_when_unknown(tmp_path) -> None:
    from dlsched.predictors.resources.bundle import Predictor
    from dlsched.predictors.resources.train_memory import JobMeta

    model = TrainingMemoryModel.from_constants(1800.0, 1.0, 1.0, 1.0, 0.0, band=(0.9, 1.1))
    model.stack_ = "gpumemnet-a100"
    pred = Predictor(util_model=None, util_features=(), mem_model=model)
    f = {"param_bytes": 100 * 2**20, "saved_bytes": 1000 * 2**20, "max_tensor_bytes": 0.0,
         "saved_attn_bytes": 0.0, "saved_attn_bytes_amp": 0.0}
    meta = JobMeta("sgd")
    own = pred.predict_mem_mib(f, "A100", meta, stack="gpumemnet-a100")
    assert own[0] == pytest.approx(1800 + 200 + 1000)
    lazy = pred.predict_mem_mib(f, "A100", meta, stack="lazy")
    assert lazy[0] == pytest.approx(stack_context("lazy", "A100").total_mib + 1200)
    unknown = pred.predict_mem_mib(f, "A100", meta, stack="unknown")
    # unknown reserves the largest known context: Lucid's 2,050 MiB (above this fit's 1,800)
    assert unknown[0] == pytest.approx(2050 + 1200)
    assert pred.predict_mem_mib(f, "A100", meta)[0] == pytest.approx(own[0])   # no stack: the fit's own
    # lo: 0.9 x lazy would cut into the exact terms; the physical floor (smallest context + state +
    # saved activations) holds it up, and with every factor at 1 that is the lazy prediction itself
    assert unknown[2] == pytest.approx(1.1 * unknown[0]) and unknown[1] == pytest.approx(lazy[0])
    pred.mem_affine[cluster_key("A100", "lazy")] = (500.0, 1.0)
    pred.save(tmp_path / "p")
    back = Predictor.load(tmp_path / "p")
    assert back.predict_mem_mib(f, "A100", meta, stack="lazy")[0] == pytest.approx(lazy[0] + 500)
    assert back.mem_model.stack_ == "gpumemnet-a100"


def test_service_reads_attention_and_stack_annotations_and_exposes_calibration() -> None:
    pytest.importorskip("prometheus_client")
    from dlsched.predictors.resources.stack_calibration import memory_calibration_gauge
    from dlsched.service.pods import training_annotations

    meta, bad = training_annotations({"dlsched.io/attention": "Memory-Efficient", "dlsched.io/stack": "cu121"})
    assert meta == {"attention": "memory_efficient", "stack": "cu121"} and bad == []
    meta, bad = training_annotations({"dlsched.io/attention": "flash9"})
    assert meta["attention"] == "" and bad == ["dlsched.io/attention='flash9'"]
    cal = StackCalibration()
    cal.record("p", 4000.0, "A100", "cu121")
    cal.observe("p", 5000.0)
    samples = {(s.labels["cluster"], s.labels["stage"]): s.value for s in memory_calibration_gauge(cal).samples}
    assert samples[("a100|cu121", "before")] == pytest.approx(20.0)
    assert samples[("a100|cu121", "after")] == pytest.approx(20.0)   # the first job met no calibration yet
    assert samples[("a100|cu121", "jobs")] == 1


def test_live_core_feeds_observed_peaks_to_the_calibration() -> None:
    """A pod with dlsched.io/model, /attention and /stack annotations: the job carries the
    attention and stack, its memory prediction is recorded, and the agent's peak reaches the
    calibration through SchedulerCore.observe (the second pod of the stack gets a shifted one)."""
    pytest.importorskip("sqlalchemy")
    from dlsched.predictors.resources.hook import fill_job_predictions
    from dlsched.registry import make_policy
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts, PodFacts
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    seen_meta = []

    class Fixed:
        def predict_util(self, feats, gpu):
            return 50.0, 40.0, 60.0

        def predict_mem_mib(self, feats, gpu):
            return 4000.0, 3600.0, 4400.0

    cal = StackCalibration()

    def predict(job):
        seen_meta.append((job.attention, job.stack))
        fill_job_predictions([job], Fixed(), lambda ref: {"param_bytes": 1.0}, gpu="A100", calibration=cal)
    predict.calibration = cal

    class Bridge:
        def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
            return ""

    clock = iter(range(1000, 10**6)).__next__
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock, predict=predict)
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    service = LiveService(core, Bridge())
    ann = {"dlsched.io/model": "resnet50", "dlsched.io/batch-size": "64", "dlsched.io/attention": "eager",
           "dlsched.io/stack": "cu121"}
    p1 = PodFacts("u1", "default", "u1", 1, created=0.0, annotations=ann)
    passed, _ = core.filter(p1, ["n1"])
    assert passed == ["n1"] and service.bind("default", "u1", "u1", "n1") == ""
    assert seen_meta == [("eager", "cu121")] and core.jobs["u1"].pred_gpu_mem_mib == 4000.0
    assert core.observe("u1", 55.0, 5200.0, warmup=0.0) == "corrected"
    st = cal.stats()["a100|cu121|other"]   # per gpu|stack|family, as `predictor calibrate` keys it
    assert st["jobs"] == 1 and st["mape_before"] == pytest.approx(100 * 1200 / 5200)
    p2 = PodFacts("u2", "default", "u2", 1, created=1.0, annotations=dict(ann, **{"dlsched.io/batch-size": "32"}))
    core.filter(p2, ["n1"])
    assert core.jobs["u2"].pred_gpu_mem_mib > 5000.0   # the stack's offset, learnt from u1


def test_live_calibration_keeps_families_apart() -> None:
    """Issue 36 point 6: live peaks of CNNs running 60 % above their predictions correct later
    CNNs, not a transformer (whose family has no observation yet), as offline calibration does."""
    from dlsched.core.job import Job
    from dlsched.predictors.resources.hook import fill_job_predictions

    class Fixed:
        def predict_util(self, feats, gpu):
            return 50.0, 40.0, 60.0

        def predict_mem_mib(self, feats, gpu, **kw):
            return 4000.0, 3600.0, 4400.0

    graphs = {"cnn": {"param_bytes": 1.0, "n_conv_layers": 20.0},
              "bert": {"param_bytes": 1.0, "attn_layers": 12.0}}
    cal = StackCalibration()
    for i in range(6):
        job = Job(f"c{i}", "vc", 1, 0.0, 1.0, model_name="cnn", batch_size=16 + i, stack="cu121")
        fill_job_predictions([job], Fixed(), graphs.get, gpu="A100", calibration=cal)
        assert cal.observe(job.job_id, 6400.0)
    cnn = Job("c9", "vc", 1, 0.0, 1.0, model_name="cnn", batch_size=64, stack="cu121")
    bert = Job("t", "vc", 1, 0.0, 1.0, model_name="bert", batch_size=64, stack="cu121")
    fill_job_predictions([cnn, bert], Fixed(), graphs.get, gpu="A100", calibration=cal)
    assert set(cal.stats()) == {"a100|cu121|cnn"}
    assert cnn.pred_gpu_mem_mib >= 6400.0 and bert.pred_gpu_mem_mib == 4000.0


def test_calibrate_cli_keys_by_stack_and_rejects_bad_attention(tmp_path) -> None:
    import onnx
    from test_graph_saved import mlp
    from typer.testing import CliRunner

    from dlsched.cli.main import app
    from dlsched.predictors.resources.bundle import Predictor

    model = TrainingMemoryModel.from_constants(1000.0, 1.0, 1.0, 1.0, 0.0)
    Predictor(util_model=None, util_features=(), mem_model=model).save(tmp_path / "p")
    onnx.save(mlp(), tmp_path / "mlp.onnx")
    obs = tmp_path / "obs.csv"
    lines = ["model,onnx,batchsize,mem_mib,gpu,stack,attention"]
    lines += [f",{tmp_path / 'mlp.onnx'},{b},{2500 + b},A100,cu121,fused" for b in (8, 16, 32, 64, 128, 256)]
    lines += [f",{tmp_path / 'mlp.onnx'},{b},{1200 + b},A100,cu118-eager," for b in (8, 16)]
    obs.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["predictor", "calibrate", str(obs), "--predictor", str(tmp_path / "p"),
                                   "--out", str(tmp_path / "cal")])
    assert res.exit_code == 0, res.output
    assert ("a100 / stack cu121 / other: 6 observed jobs" in res.output
            and "a100 / stack cu118-eager / other: 2 observed" in res.output)
    cal = Predictor.load(tmp_path / "cal")
    assert set(cal.mem_affine) == {"a100|cu121|other", "a100|cu118-eager|other"}   # the MLP: family "other"
    # the cu121 jobs sit ~1,300 MiB above the cu118 ones: each key learnt its own correction, so
    # the same job is predicted that much higher on cu121 (the intercepts alone differ with the slopes)
    from dlsched.predictors.resources.graph_source import analysis_for_ref

    feats = {**analysis_for_ref(str(tmp_path / "mlp.onnx")).features(16), "batch": 16.0}
    on = {s: cal.predict_mem_mib(feats, "A100", stack=s)[0] for s in ("cu121", "cu118-eager")}
    assert on["cu121"] > on["cu118-eager"] + 500
    obs.write_text(f"model,onnx,batchsize,mem_mib,attention\n,{tmp_path / 'mlp.onnx'},8,100,flash9\n")
    res = CliRunner().invoke(app, ["predictor", "calibrate", str(obs), "--out", str(tmp_path / "c2")])
    assert res.exit_code == 2 and "obs.csv:2:5: column 'attention' has 'flash9'" in res.output
