"""Per-model utilisation evidence (busy/idle split, rank without one model) and the check of the
host constants against throughputs and kernel traces, on small made-up inputs."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlsched.predictors.resources.gpu_specs import device_constants
from dlsched.predictors.resources.roofline import CONSTANTS, step_seconds, step_times, utilisation
from dlsched.predictors.resources.util_evidence import (
    busy_idle,
    fit_host_on_throughput,
    orion_kernel_stats,
    rho_without,
)

HOST = {"kernel_floor_s": 2e-5, "launch_s": 8e-5, "step_s": 4e-3, "overlap_q": 1.8}


def _theta(gpu: str, host: dict[str, float]) -> np.ndarray:
    return np.log([{**device_constants(gpu), **host}[k] for k in CONSTANTS])


def test_step_seconds_is_the_denominator_of_utilisation() -> None:
    raw = np.array([[40, 3e11, 3.2e11, 1.4e10, 7e6, 0], [14, 3e5, 3.5e5, 1.7e6, 1.6e6, 1]], float)
    th = _theta("V100", HOST)
    t_gpu, t_cpu = step_times(th, raw)
    step = step_seconds(th, raw)
    assert np.all(step >= np.maximum(t_gpu, t_cpu)) and np.all(step <= t_gpu + t_cpu)
    assert utilisation(th, raw) == pytest.approx(100 * t_gpu / step)


def test_busy_idle_split_by_hand() -> None:
    # 50 % busy at 100 samples/s: 5 ms busy and 5 ms idle per sample; 1 GFLOP forward per sample
    # is 3 GFLOP of training work in 5 ms, i.e. 0.6 TFLOP/s while busy
    prof = pd.DataFrame({"model": ["a", "a", "b"], "gpu_util": [50.0, 50.0, 100.0], "speed": [100.0, 100.0, 1000.0]})
    rows = [{"flops_per_sample": 1e9, "n_kernels": 10}] * 2 + [{"flops_per_sample": 1e9, "n_kernels": 20}]
    ev = busy_idle(prof, rows)
    assert ev["a"]["busy_ms_per_sample"] == pytest.approx(5.0)
    assert ev["a"]["idle_ms_per_sample"] == pytest.approx(5.0)
    assert ev["a"]["busy_tflops"] == pytest.approx(0.6)
    assert ev["b"]["idle_ms_per_sample"] == pytest.approx(0.0) and ev["b"]["n_kernels"] == 20
    assert busy_idle(prof.drop(columns="speed"), rows) == {}  # no throughput, no split


def test_rho_without_names_the_model_that_breaks_the_ranking() -> None:
    util = np.array([10, 20, 30, 40, 50, 60, 5.0])
    pred = np.array([10, 20, 30, 40, 50, 60, 99.0])  # the last model is ranked top, measured last
    rho = rho_without(util, pred, ["a", "a", "b", "b", "c", "c", "odd"])
    assert rho["odd"] == pytest.approx(1.0) and rho["none"] < 0.5 and rho["a"] < 0.5


def test_throughput_fit_recovers_launch_and_step_time() -> None:
    """Step times made with known host constants give them back; floor and q stay as given."""
    truth = dict(HOST, launch_s=6e-5, step_s=1.1e-2)
    raw = np.array([[n, f, 1.05 * f, f / 20, p, 0] for n in (5, 70, 350) for f in (1e9, 3e10, 5e11)
                    for p in (4e7, 2e8)], float)
    gpus = np.array(["v100", "p100"] * (len(raw) // 2))
    steps = np.empty(len(raw))
    for g, name in (("v100", "V100"), ("p100", "P100")):
        m = gpus == g
        steps[m] = 1.0 / step_seconds(_theta(name, truth), raw[m])
    iso = pd.DataFrame({"gpu": gpus, "iso_steps_per_s_sim": steps})
    fit = fit_host_on_throughput(iso, raw, HOST)
    c = fit["constants"]
    assert c["launch_s"] == pytest.approx(6e-5, rel=0.02) and c["step_s"] == pytest.approx(1.1e-2, rel=0.02)
    assert c["kernel_floor_s"] == HOST["kernel_floor_s"] and c["overlap_q"] == HOST["overlap_q"]
    assert fit["rms_log_step_error"] < 1e-3 and fit["rows"] == len(raw)


def test_orion_kernel_stats_from_a_small_archive(tmp_path: Path) -> None:
    tar_path = tmp_path / "orion.tar.gz"
    files = {"orion/model_kernels/resnet50_32_fb1": [3000, 3000, 90000, 4000],  # ns
             "orion/model_kernels/resnet50_32_fb0": [7, 7],                   # placeholder: skipped
             "orion/model_kernels/bert_8_fwd": [5000]}                        # inference: skipped
    with tarfile.open(tar_path, "w:gz") as tar:
        for name, durs in files.items():
            body = ("Name,Profile,Memory_footprint,SM_usage,Duration\n"
                    + "".join(f"k,-1,0,1,{d}\n" for d in durs)).encode()
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))

    def resolver(model: str, batch: int, onnx: str) -> dict[str, float]:
        assert model == "resnet50" and batch == 32
        return {"n_kernels": 2.0, "flops_tensor": 1e9, "flops": 1e9, "bytes_accessed": 1e8,
                "param_bytes": 1e8, "amp": 0.0}

    st = orion_kernel_stats(tar_path, resolver)
    assert list(st) == ["resnet50_32_fb1"]
    r = st["resnet50_32_fb1"]
    assert r["kernels"] == 4 and r["gpu_ms"] == pytest.approx(0.1) and r["median_us"] == pytest.approx(3.5)
    assert r["kernels_per_graph_kernel"] == pytest.approx(2.0) and r["default_gpu_ms"] > 0
