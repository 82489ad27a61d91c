"""``dlsched predict``: human and JSON output, predictor use and fallback, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from dlsched.cli import predict_cmd


@pytest.fixture()
def app() -> typer.Typer:
    app = typer.Typer()
    predict_cmd.register(app)
    app.command("noop")(lambda: None)  # keep typer in multi-command mode
    return app


@pytest.fixture()
def mlp(tmp_path: Path) -> Path:
    w = numpy_helper.from_array(np.zeros((32, 8), np.float32), "w")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                          "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    p = tmp_path / "mlp.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return p


def test_json_with_fallback(app: typer.Typer, mlp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predict_cmd, "_load_predictor", lambda: (None, "no trained predictor"))
    res = CliRunner().invoke(app, ["predict", str(mlp), "--batch", "64", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["flops"] == 64 * (2 * 32 * 8 + 8) and out["flops_per_sample"] == 2 * 32 * 8 + 8
    assert out["flops_per_step"] == 3 * out["flops"] and out["params"] == 256 and out["batch"] == 64
    assert out["gpu_util"] is None and out["gpu_mem_mib"]["source"] == "horus_eq2"
    assert out["unknown_ops"] == {} and any("dlsched predictor train" in n for n in out["notes"])


def test_text_with_predictor(app: typer.Typer, mlp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        def predict_util(self, feats: dict, gpu: str) -> tuple[float, float, float]:
            assert feats["batch"] == 16 and gpu == "A100"
            return 42.0, 30.0, 55.0

        def predict_mem_mib(self, feats: dict, gpu: str) -> tuple[float, float, float]:
            return 2100.0, 2000.0, 2300.0

    monkeypatch.setattr(predict_cmd, "_load_predictor", lambda: (Fake(), None))
    res = CliRunner().invoke(app, ["predict", str(mlp), "--batch", "16", "--gpu", "A100"])
    assert res.exit_code == 0, res.output
    assert "42.0 % [30.0 - 55.0] on A100" in res.output
    assert "2,100 MiB [2,000 - 2,300] (predictor)" in res.output


def test_corrupt_model_exits_cleanly(app: typer.Typer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"definitely not onnx")
    res = CliRunner().invoke(app, ["predict", str(bad)])
    assert res.exit_code == 2
    assert "bad.onnx" in res.output and "Traceback" not in res.output
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit)
