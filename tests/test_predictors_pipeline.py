"""Training pipeline, persistence, calibration, the simulator hook and the CLI - on a small
synthetic profile table with a stand-in feature resolver (no ONNX needed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dlsched.core.job import Job
from dlsched.predictors.ml import metrics
from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.calibration import GpuCalibration
from dlsched.predictors.resources.hook import fill_job_predictions
from dlsched.predictors.resources.persist import PredictorFormatError
from dlsched.predictors.resources.train import ALL_UTIL_FEATURES, train

# 8 toy "architectures": utilisation grows with FLOPs and batch, memory with params and activations.
ARCH = {f"net{i}": (10.0 ** (7 + i / 2), 2e6 * (i + 1), 1e6 * (8 - i)) for i in range(8)}


def fake_resolver(model: str, batch: int, onnx: str = "") -> dict[str, float]:
    flops, params, act = ARCH[model]
    feats = {k: 1.0 for k in ALL_UTIL_FEATURES}
    feats.update(batch=float(batch), flops_per_sample=flops, flops_per_step=3 * flops * batch,
                 params=params, param_bytes=4 * params, activation_bytes=act * batch,
                 activation_bytes_per_sample=act, peak_activation_bytes=act * batch / 2,
                 flops=flops * batch, flops_tensor=0.9 * flops * batch, n_kernels=50.0,
                 bytes_accessed=4 * params + 3 * act * batch)
    return feats


def true_util(model: str, batch: int) -> float:
    return float(min(100.0, 8 * math.log10(ARCH[model][0] * batch) - 50))


def true_mem(model: str, batch: int) -> float:
    _, params, act = ARCH[model]
    return 1500 + 4 * 4 * params / 2**20 + 1.2 * act * batch / 2**20


@pytest.fixture()
def profiles(tmp_path: Path) -> Path:
    rows = ["model,batchsize,amp,gpu_util,gmem"]
    for m in ARCH:
        for b in (16, 32, 64, 128):
            rows.append(f"{m},{b},0,{true_util(m, b):.3f},{true_mem(m, b):.1f}")
    p = tmp_path / "profiles.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_metrics_by_hand() -> None:
    assert metrics.rmsle([9.0], [99.0]) == pytest.approx(math.log(10))
    assert metrics.mape([100, 200], [110, 180]) == pytest.approx(10.0)
    assert metrics.under_share([100, 100, 100, 100], [89, 91, 120, 50]) == 50.0
    assert metrics.spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)
    assert metrics.mae([1, 2], [2, 4]) == 1.5


def test_train_save_load_roundtrip(profiles: Path, tmp_path: Path) -> None:
    out = tmp_path / "pred"
    manifest_path, report = train(profiles, out, "lightgbm", n_estimators=30, resolver=fake_resolver)
    lomo = report["leave_one_model_out"]
    assert lomo["lightgbm"]["rmsle"] < lomo["dummy_mean"]["rmsle"]
    assert set(lomo) == {"dummy_mean", "batch_linear", "linear", "robust_linear", "random_forest", "xgboost",
                         "lightgbm", "roofline", "host_roofline", "datasheet_roofline",
                         "datasheet_apriori"}
    assert lomo["datasheet_roofline"]["rmsle"] == lomo["host_roofline"]["rmsle"]  # the default, scored honestly
    assert set(lomo["lightgbm"]["per_group_rmsle"]) == set(ARCH)
    assert report["random_split"]["linear"]["folds"] == 5
    man = json.loads(manifest_path.read_text())
    assert len(man["training_data"]["sha256"]) == 64 and man["util"]["file"] == "util.lgb.txt"
    assert man["metrics"]["utilization"]["leave_one_model_out"]["rmsle"] == lomo["lightgbm"]["rmsle"]
    a = Predictor(**{k: v for k, v in vars(Predictor.load(out)).items()})
    b = Predictor.load(out / "manifest.json")
    for m in ARCH:
        f = fake_resolver(m, 64)
        assert a.predict_util(f, "A100") == b.predict_util(f, "A100")
        mean, lo, hi = b.predict_mem_mib(f, "A100")
        assert lo <= mean <= hi
        assert mean >= 0.9 * true_mem(m, 64)  # quantile fit leans high


@pytest.mark.parametrize("regressor", ["random_forest", "xgboost", "linear", "roofline"])
def test_each_regressor_roundtrips(profiles: Path, tmp_path: Path, regressor: str) -> None:
    from dlsched.predictors.resources.profiles import load_util_profiles
    from dlsched.predictors.resources.train import feature_rows, fit_predictor

    df = load_util_profiles(profiles)
    pred, _ = fit_predictor(df, feature_rows(df, fake_resolver), regressor, n_estimators=20)
    pred.save(tmp_path / regressor)
    back = Predictor.load(tmp_path / regressor)
    f = fake_resolver("net3", 32)
    assert back.predict_util(f, "x") == pred.predict_util(f, "x")


@pytest.mark.parametrize("name", ["model.pt", "model.pth", "m.pkl", "m.pickle", "m.joblib", "M.PKL"])
def test_refuses_pickle(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    p.write_bytes(b"\x80\x04K\x01.")  # a valid pickle: must not even be opened
    with pytest.raises(PredictorFormatError, match="pickle"):
        Predictor.load(p)


def test_auto_picks_best_lomo(profiles: Path, tmp_path: Path) -> None:
    path, report = train(profiles, tmp_path / "auto", "auto", n_estimators=20, resolver=fake_resolver)
    chosen = json.loads(path.read_text())["util_regressor"]
    lomo = report["leave_one_model_out"]
    assert lomo[chosen]["rmsle"] == min(v["rmsle"] for k, v in lomo.items() if k not in ("dummy_mean", "batch_linear"))


def test_tampered_model_is_refused(profiles: Path, tmp_path: Path) -> None:
    train(profiles, tmp_path / "p", "linear", n_estimators=10, resolver=fake_resolver)
    f = tmp_path / "p" / "util.json"
    f.write_text(f.read_text().replace("coef_", "coef_ "))
    with pytest.raises(PredictorFormatError, match="SHA-256"):
        Predictor.load(tmp_path / "p")


def test_gpu_calibration() -> None:
    pred = np.array([20.0, 40.0, 60.0, 80.0])
    true = np.array([30.0, 55.0, 75.0, 90.0])
    cal = GpuCalibration().fit(np.r_[pred, pred], np.r_[true, pred], np.array(["V100"] * 4 + ["A100"] * 4))
    assert cal.apply(40.0, "A100") == pytest.approx(40.0)
    assert cal.apply(40.0, "unknown-gpu") == 40.0
    assert abs(cal.apply(40.0, "v100") - 55.0) < 3.0  # GPU names are case-insensitive
    assert GpuCalibration.from_json(cal.to_json()).apply(60.0, "V100") == cal.apply(60.0, "V100")


def test_predictor_calibrate_for_new_gpu(profiles: Path, tmp_path: Path) -> None:
    train(profiles, tmp_path / "p", "linear", n_estimators=10, resolver=fake_resolver)
    pred = Predictor.load(tmp_path / "p")
    assert pred.calibration.coef == {}  # no gpu column: nothing to correct
    rows = [fake_resolver(m, 64) for m in ARCH]
    base = np.array([pred.predict_util(r, "H100")[0] for r in rows])
    pred.calibrate(rows, base * 0.6, "H100")  # the new card is less busy
    after = np.array([pred.predict_util(r, "H100")[0] for r in rows])
    np.testing.assert_allclose(after, base * 0.6, rtol=0.1)
    assert pred.predict_util(rows[0], "V100")[0] == base[0]
    pred.save(tmp_path / "q")
    assert Predictor.load(tmp_path / "q").predict_util(rows[0], "h100") == pred.predict_util(rows[0], "H100")


def test_fill_job_predictions(profiles: Path, tmp_path: Path) -> None:
    train(profiles, tmp_path / "p", "linear", n_estimators=10, resolver=fake_resolver)
    pred = Predictor.load(tmp_path / "p")
    calls: list[str] = []

    def resolve(ref: str) -> dict[str, float] | None:
        calls.append(ref)
        return None if ref == "unknown" else fake_resolver(ref, 1)

    jobs = [Job(str(i), "vc", 1, 0.0, 10.0, model_name=m, batch_size=64)
            for i, m in enumerate(["net1", "net5", "net1", "unknown", ""])]
    assert fill_job_predictions(jobs, pred, resolve) == 3
    assert sorted(calls) == ["net1", "net5", "unknown"]  # each reference resolved once
    assert 0 < jobs[0].pred_gpu_util <= 100 and jobs[0].pred_gpu_mem_mib > 1000
    assert jobs[0].pred_gpu_util == jobs[2].pred_gpu_util
    assert math.isnan(jobs[3].pred_gpu_util) and math.isnan(jobs[4].pred_gpu_mem_mib)


def test_default_predictor_contract() -> None:
    from dlsched.predictors.resources.default import load_default

    p = load_default()
    if p is None:
        pytest.skip("no default predictor shipped")
    feats = {"batch": 32, "param_bytes": 4 * 11.7e6, "activation_bytes": 32 * 8e6, "n_kernels": 68,
             "flops": 32 * 1.1e9, "flops_tensor": 32 * 1.08e9, "bytes_accessed": 4.2e8,
             "saved_bytes": 32 * 3e6, "saved_conv_bytes": 32 * 2e6, "max_tensor_bytes": 32 * 4e5}
    mean, lo, hi = p.predict_util(feats, "V100")
    assert 0 <= lo <= mean <= hi <= 100
    mem = p.predict_mem_mib(feats, "V100")
    assert mem[1] <= mem[0] <= mem[2] and 1500 < mem[0] < 3000   # no stack named: the fit stack's context
    # stack unknown: the largest known context (Lucid's 2,050 MiB, above the fit stack's ~1.77 GiB)
    # for the reserve, the band down to today's lazily loading one (~0.55 GiB)
    unknown = p.predict_mem_mib(feats, "V100", stack="unknown")
    lazy = p.predict_mem_mib(feats, "V100", stack="lazy")
    assert unknown[0] > mem[0] and unknown[1] == pytest.approx(lazy[1]) and unknown[1] < mem[0] - 1000
    assert "Lucid" in p.manifest["training_data"]["license"]  # the host constants, cited
    from dlsched.predictors.resources.build_default import shipped_memory_model
    from dlsched.predictors.resources.gpu_specs import datasheet_model

    assert p.util_model.constants() == datasheet_model("V100").constants()  # the shipped file matches the code
    # the shipped memory model matches the constants file it was built from
    assert type(p.mem_model) is type(shipped_memory_model()[0])
    assert p.mem_model.payload() == shipped_memory_model()[0].payload()


def test_cli_errors_are_clean(tmp_path: Path) -> None:
    from dlsched.cli.main import app

    runner = CliRunner()
    bad = tmp_path / "bad.csv"
    bad.write_text("model,batchsize\nresnet,32\n")
    res = runner.invoke(app, ["predictor", "train", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "gpu_util" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["predictor", "train", str(tmp_path / "missing.csv")])
    assert res.exit_code == 2 and "missing.csv" in res.output
    bad.write_text("model,batchsize,gpu_util\nresnet,32,abc\n")
    res = runner.invoke(app, ["predictor", "train", str(bad)])
    assert res.exit_code == 2 and "'gpu_util'" in res.output
