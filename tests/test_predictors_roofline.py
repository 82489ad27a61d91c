"""The roofline utilisation model: graph inputs (kernels, traffic), the physics of the formula,
its fit, safe persistence, and its leave-one-model-out skill on the real Lucid profiles."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dlsched.predictors.resources.roofline import (
    CONSTANTS,
    ROOFLINE_FEATURES,
    RooflineRegressor,
    step_times,
    utilisation,
)

V100 = {"flops_per_s": 11e12, "amp_tensor_speedup": 3.0, "bytes_per_s": 630e9, "amp_traffic_factor": 0.5,
        "kernel_floor_s": 5e-6, "launch_s": 20e-6, "step_s": 5e-3, "overlap_q": 4.0}


def _row(n_kernels: float, flops: float, nbytes: float, pbytes: float = 1e6, amp: int = 0,
         tensor_share: float = 0.95) -> list[float]:
    return [n_kernels, tensor_share * flops, flops, nbytes, pbytes, amp]


def _log(rows: list[list[float]]) -> np.ndarray:
    return np.log1p(np.asarray(rows, float))


def test_step_times_by_hand() -> None:
    theta = np.log([V100[k] for k in CONSTANTS])
    raw = np.asarray([_row(10, 1e9, 1e8, pbytes=4e6, tensor_share=1.0)])
    t_gpu, t_cpu = step_times(theta, raw)
    kernels = 10 * 5e-6 + 1e9 / 11e12 + 1e8 / 630e9
    assert t_gpu[0] == pytest.approx(3 * kernels + 12 * 4e6 / 630e9)
    assert t_cpu[0] == pytest.approx(3 * 10 * 20e-6 + 5e-3)
    # the soft maximum: util = t_gpu / (t_gpu^q + t_cpu^q)^(1/q)
    expect = 100 * t_gpu[0] / (t_gpu[0] ** 4 + t_cpu[0] ** 4) ** 0.25
    assert utilisation(theta, raw)[0] == pytest.approx(expect)


def test_physics_regimes() -> None:
    model = RooflineRegressor.from_constants(**V100)
    tiny = _row(10, 1e4, 1e5, pbytes=0)  # a small MLP: waits for the host
    huge = _row(200, 5e12, 5e10)         # a big CNN step: GPU-bound
    util = np.expm1(model.predict(_log([tiny, huge])))
    assert util[0] < 15 and util[1] > 99
    # launch-bound limit: kernels of t_floor issued every c_launch, plus the per-step host time
    assert util[0] == pytest.approx(100 * 3 * 10 * 5e-6 / (3 * 10 * 20e-6 + 5e-3), rel=0.02)
    # more work per kernel (a larger batch) raises utilisation; mixed precision lowers it
    mid = [_row(100, f, f / 20) for f in (1e10, 4e10, 1.6e11)]
    u = np.expm1(model.predict(_log(mid)))
    assert np.all(np.diff(u) > 0)
    u_amp = np.expm1(model.predict(_log([_row(100, 4e10, 2e9, amp=1)])))[0]
    assert u_amp < u[1]


def test_fit_recovers_constants_from_its_own_predictions() -> None:
    truth = RooflineRegressor.from_constants(**V100)
    rng = np.random.default_rng(0)
    rows = [_row(n, f, f / r, amp=int(a)) for n, f, r, a in
            zip(rng.integers(5, 400, 60), 10 ** rng.uniform(5, 12.5, 60), 10 ** rng.uniform(0.5, 2, 60),
                rng.integers(0, 2, 60))]
    X = _log(rows)
    y = truth.predict(X)
    fitted = RooflineRegressor().fit(X, y)
    np.testing.assert_allclose(np.expm1(fitted.predict(X)), np.expm1(y), atol=0.5)  # utilisation points
    c = fitted.constants()
    assert set(c) == set(CONSTANTS)
    assert 0.5 < c["launch_s"] / c["kernel_floor_s"] / 4.0 < 2.0  # the ratio that sets small-model util


def test_conformance_and_safe_roundtrip() -> None:
    X = _log([_row(n, 10.0 ** e, 10.0 ** (e - 1.3), amp=n % 2) for n, e in zip(range(5, 305, 20), np.linspace(5, 12, 15))])
    y = np.log1p(np.linspace(8, 99, 15))
    est = RooflineRegressor()
    assert set(est.get_params()) == {"f_scale", "seed", "fixed"}
    with pytest.raises(RuntimeError):
        est.predict(X)
    assert est.fit(X, y) is est and est.get_params() == {"f_scale": 0.15, "seed": 0, "fixed": None}
    pred = est.predict(X)
    np.testing.assert_array_equal(RooflineRegressor().fit(X, y).predict(X), pred)
    back = RooflineRegressor.restore(est.get_params(), est.payload())
    np.testing.assert_array_equal(back.predict(X), pred)
    with pytest.raises(ValueError, match="6 columns"):
        est.predict(X[:, :4])
    with pytest.raises(ValueError, match="unknown roofline constant"):
        RooflineRegressor.from_constants(peak=1.0)
    with pytest.raises(ValueError, match="constants"):
        RooflineRegressor.restore(est.get_params(), '{"theta_": [1, 2]}')


def test_graph_roofline_features_on_hand_built_graph() -> None:
    """A Conv followed by a Reshape (a view: no kernel, no traffic) and a Relu."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from dlsched.graph import analyze

    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["r"]),
         helper.make_node("Relu", ["r"], ["y"])],
        "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, shape])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert isinstance(model, onnx.ModelProto)
    f = analyze(model).features(5)
    x_bytes, w_bytes, out_bytes = 5 * 3 * 64 * 4, 4 * 27 * 4, 5 * 4 * 64 * 4
    assert f["n_kernels"] == 2
    assert f["bytes_accessed"] == pytest.approx((x_bytes + w_bytes + out_bytes) + 2 * out_bytes)
    assert f["flops_tensor"] == f["flops_conv"] and f["flops"] == f["flops_conv"] + 5 * 4 * 64
    # a fixed-batch export (batch 2) is scaled to batch 5, but its weights are read once per step
    g.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8]))
    fixed = analyze(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert fixed.mode == "scaled"
    assert fixed.features(5)["bytes_accessed"] == pytest.approx(f["bytes_accessed"])


@pytest.mark.slow
def test_lucid_leave_one_model_out_roofline(shared: Path) -> None:
    """The roofline model beats every other regressor on unseen architectures; PointNet (data-
    loader bound) stays unpredictable from its graph and alone puts the fold mean above 0.15."""
    pytest.importorskip("onnx")
    from dlsched.predictors.resources.profiles import load_util_profiles
    from dlsched.predictors.resources.train import feature_rows, util_report

    df = load_util_profiles(shared / "profiles/lucid/single_data.csv")
    rep = util_report(df, feature_rows(df), n_estimators=40)
    lomo = rep["leave_one_model_out"]
    roof = lomo["roofline"]
    others = [v["rmsle"] for k, v in lomo.items() if "roofline" not in k and k != "datasheet_apriori"]
    assert roof["rmsle"] < min(others) - 0.03 and lomo["host_roofline"]["rmsle"] < min(others) - 0.03
    assert roof["rmsle"] < 0.36 and roof["mae"] < 14.0
    groups = roof["per_group_rmsle"]
    rest = [v for k, v in groups.items() if k != "PointNet"]
    assert np.mean(rest) < 0.19 and groups["PointNet"] > 2.0
    assert groups["PointNet"] / len(groups) > 0.15  # the target is out of reach with PointNet in
    assert groups["BERT"] < 0.05 and groups["ResNet18"] < 0.15  # GPU-bound and mixed regimes
    c = rep["roofline_constants"]
    assert 5e12 < c["flops_per_s"] < 1e14 and 1e-6 < c["kernel_floor_s"] < c["launch_s"]
    assert not math.isnan(c["overlap_q"])
    # the shipped default: data-sheet device + host fitted; scored with the held-out model
    # left out of the host fit it meets RMSLE <= 0.45 (the a-priori host guess did not)
    from dlsched.predictors.resources.gpu_specs import HOST_CONSTANTS

    default, apriori = lomo["datasheet_roofline"], lomo["datasheet_apriori"]
    assert default["rmsle"] < 0.36 and apriori["rmsle"] > 0.6
    assert default["per_group_rmsle"]["PointNet"] > 2.0
    for k, v in HOST_CONSTANTS.items():  # the shipped figures are this fit, rounded
        assert rep["host_constants"][k] == pytest.approx(v, rel=0.03), k
    # why the ranking fails: PointNet alone. Without its rows the default ranks the rest; its GPU
    # does the graph's work at a plausible rate but sits idle ~7 ms per sample (host side)
    rho = rep["rho_without"]
    assert rho["none"] < 0.55 and rho["PointNet"] > 0.9
    assert all(v < 0.55 for k, v in rho.items() if k not in ("none", "PointNet"))
    ev = rep["per_model_evidence"]
    # (8 TFLOP/s with the classification graph Lucid trains, 1.46 GFLOP per sample)
    assert 5 < ev["PointNet"]["busy_tflops"] < 15 and ev["PointNet"]["idle_ms_per_sample"] > 5
    supervised = [v["idle_ms_per_sample"] for k, v in ev.items() if k not in ("PointNet", "PPO", "TD3")]
    assert max(supervised) < 1.0


@pytest.mark.slow
def test_host_constants_beside_permissive_data(shared: Path) -> None:
    """Gavel's throughputs (MIT) put the host time per launch near the shipped figure; Orion's
    traces (MIT) count ~5-6 kernels per graph kernel and ~3 us for the shortest kernels."""
    pytest.importorskip("onnx")
    from dlsched.predictors.resources.features import vectorize
    from dlsched.predictors.resources.gpu_specs import HOST_CONSTANTS
    from dlsched.predictors.resources.profiles import load_util_profiles
    from dlsched.predictors.resources.roofline import ROOFLINE_FEATURES
    from dlsched.predictors.resources.train import feature_rows
    from dlsched.predictors.resources.util_evidence import host_crosscheck

    df = load_util_profiles(shared / "profiles/lucid/single_data.csv")
    folds, labels = df["model"].factorize()
    hc = host_crosscheck(shared, vectorize(feature_rows(df), ROOFLINE_FEATURES), df["gpu_util"].to_numpy(float),
                         folds, list(labels))
    g = hc["gavel"]
    assert g["rows"] == 40 and "A3C" in g["excluded"]
    assert 0.5 * HOST_CONSTANTS["launch_s"] < g["constants"]["launch_s"] < 1.5 * HOST_CONSTANTS["launch_s"]
    assert g["lucid_score"]["rmsle"] < 0.46  # at the default's 0.45 target with Gavel's launch/step (0.450)
    # throughputs alone do not pin floor and q: fitted from them (or the floor from Orion) the
    # default misses the 0.45 target on Lucid
    assert hc["gavel_all_four"]["constants"]["overlap_q"] < 1.5 and hc["gavel_all_four"]["lucid_score"]["rmsle"] > 0.45
    assert hc["gavel_orion_floor"]["lucid_score"]["rmsle"] > 0.45
    r50 = hc["orion"]["resnet50_32_fb1"]
    assert 5 < r50["kernels_per_graph_kernel"] < 6.5 and r50["p10_us"] < 4
    assert 0.7 < r50["default_gpu_ms"] / r50["gpu_ms"] < 2.0


def test_fixed_constants_stay_and_the_rest_are_fitted() -> None:
    """``fixed`` holds device constants at their data-sheet values and fits only the host side:
    data made with other host constants give those host constants back."""
    host = {"kernel_floor_s": 2e-5, "launch_s": 8e-5, "step_s": 4e-3, "overlap_q": 1.8}
    device = {k: V100[k] for k in ("flops_per_s", "amp_tensor_speedup", "bytes_per_s", "amp_traffic_factor")}
    truth = RooflineRegressor.from_constants(**device, **host)
    rows = [_row(n, f, f / 15, pbytes=p, amp=a) for n in (10, 60, 300) for f in (1e7, 3e10, 1e12)
            for p, a in ((1e6, 0), (1e8, 1))]
    X = _log(rows)
    fit = RooflineRegressor(fixed=device).fit(X, truth.predict(X))
    c = fit.constants()
    for k, v in device.items():
        assert c[k] == pytest.approx(v, rel=1e-12)
    for k, v in host.items():
        assert c[k] == pytest.approx(v, rel=0.05), k
    assert fit.get_params()["fixed"] == device
    with pytest.raises(ValueError, match="unknown roofline constant"):
        RooflineRegressor(fixed={"warp_speed": 1.0}).fit(X, truth.predict(X))


def test_gpu_specs_names_and_constants() -> None:
    from dlsched.predictors.resources import gpu_specs

    assert gpu_specs.canonical("Tesla V100-SXM2-32GB") == "V100"
    assert gpu_specs.canonical("a100-40gb") == "A100" and gpu_specs.canonical("GeForce RTX 3090") == "RTX3090"
    assert gpu_specs.canonical("K80") is None
    c = gpu_specs.datasheet_constants("v100")
    assert c["flops_per_s"] == pytest.approx(0.7 * 15.7e12) and c["bytes_per_s"] == pytest.approx(0.7 * 900e9)
    assert set(c) == set(CONSTANTS)
    assert {k: c[k] for k in gpu_specs.HOST_CONSTANTS} == gpu_specs.HOST_CONSTANTS
    assert gpu_specs.datasheet_constants("v100", gpu_specs.APRIORI_HOST_CONSTANTS)["launch_s"] == 20e-6
    with pytest.raises(KeyError, match="known: P100"):
        gpu_specs.datasheet_constants("K80")


def test_default_predictor_is_a_datasheet_roofline(tmp_path: Path) -> None:
    """The shipped default fits no data; a faster GPU lowers the predicted utilisation of a
    mid-sized model, an unknown GPU falls back to V100, and the choice survives save/load."""
    from dlsched.predictors.resources.bundle import Predictor
    from dlsched.predictors.resources.default import load_default

    pred = load_default()
    assert pred is not None and pred.per_gpu == "datasheet"
    assert pred.manifest["kind"] == "datasheet-roofline" and pred.manifest["training_data"]["files"] == []
    assert "Lucid" in pred.manifest["attribution"]  # the four fitted host constants are cited
    feats = dict(zip(ROOFLINE_FEATURES, _row(150, 2e10, 2e9, pbytes=1e7)))
    t4, v100, a100 = (pred.predict_util(feats, g)[0] for g in ("T4", "V100", "A100"))
    assert t4 > v100 > a100
    assert pred.predict_util(feats, "no-such-gpu") == pred.predict_util(feats, "V100")
    mean, lo, hi = pred.predict_util(feats, "V100")
    assert lo == pytest.approx(np.expm1(np.log1p(mean) - 0.7)) and hi == pytest.approx(min(100.0, hi))
    back = Predictor.load(pred.save(tmp_path / "copy"))
    assert back.per_gpu == "datasheet" and back.predict_util(feats, "A100") == pred.predict_util(feats, "A100")


def test_calibration_of_the_default_uses_the_gpus_own_data_sheet() -> None:
    """Calibrating the data-sheet default for A100 corrects the A100 roofline, not the V100 one."""
    from dlsched.predictors.resources.default import load_default

    pred = load_default()
    rows = [dict(zip(ROOFLINE_FEATURES, _row(n, f, f / 20, pbytes=1e7))) for n, f in
            [(60, 5e9), (120, 2e10), (200, 8e10), (80, 1e9), (300, 3e11)]]
    raw = np.array([pred.predict_util(r, "A100")[0] for r in rows])
    copy = type(pred)(pred.util_model, pred.util_features, pred.mem_model, per_gpu=pred.per_gpu)
    copy.calibrate(rows, raw * 0.8, "A100")
    got = np.array([copy.predict_util(r, "A100")[0] for r in rows])
    np.testing.assert_allclose(got, raw * 0.8, rtol=0.08)
    assert copy.predict_util(rows[0], "V100")[0] == pred.predict_util(rows[0], "V100")[0]  # other GPUs untouched


def test_unknown_gpu_is_explained_not_hidden(tmp_path: Path) -> None:
    """`dlsched predict --gpu K80` still answers (V100 figures) but says so in its notes."""
    import json

    from typer.testing import CliRunner

    from dlsched.cli.main import app
    from dlsched.predictors.resources.default import load_default

    pred = load_default()
    assert pred.gpu_note("A100") is None
    assert "no data sheet for GPU 'K80'" in pred.gpu_note("K80")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.zeros((8, 16), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    res = CliRunner().invoke(app, ["predict", str(path), "--batch", "4", "--gpu", "K80", "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["gpu_util"]["mean"] > 0 and any("K80" in n for n in body["notes"])
