"""scripts/measure_gpu_jobs.py end to end on CPU (--dry-run), and the held-out check that scores
committed measurements (dlsched.predictors.resources.measured_eval)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.predictors.resources.measured_eval import measured_check, score_run
from dlsched.predictors.resources.train_memory import TrainingMemoryModel

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "measure_gpu_jobs.py"


def test_dry_run_writes_jobs_pairs_and_the_stack(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path / "m"),
                           "--models", "neumf,lstm_lm", "--pairs", "1"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "m" / "jobs.csv") as fh:
        jobs = list(csv.DictReader(fh))
    assert [(r["label"], r["batch"]) for r in jobs] == [("neumf", "1"), ("neumf", "2"), ("lstm_lm", "1"),
                                                       ("lstm_lm", "2")]
    assert all(r["error"] == "" and float(r["step_s"]) > 0 and r["device"] == "cpu" for r in jobs)
    with open(tmp_path / "m" / "pairs.csv") as fh:
        pairs = list(csv.DictReader(fh))
    assert len(pairs) == 1 and pairs[0]["a"] == "lstm_lm" and pairs[0]["b"] == "neumf"
    assert pairs[0]["error"] == "" and 0 < float(pairs[0]["speed_a"]) < 3
    stack = json.loads((tmp_path / "m" / "stack.json").read_text())
    assert stack["dry_run"] is True and stack["torch"] and stack["jobs"] == 4 and stack["pairs"] == 1
    # a dry run is never scored as a measurement
    assert "dry-run" in score_run(tmp_path / "m", None, None)["skipped"]


def test_cudnn_benchmark_both_measures_every_job_with_autotuning_off_and_on(tmp_path: Path) -> None:
    """Issue 36's open question (is the per-batch memory no graph term explains cuDNN's autotuned
    workspaces?) needs each job with ``cudnn.benchmark`` off and on: a row each, the setting recorded."""
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path / "m"),
                           "--models", "neumf", "--pairs", "0", "--cudnn-benchmark", "both"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "m" / "jobs.csv") as fh:
        jobs = list(csv.DictReader(fh))
    assert [(r["batch"], r["cudnn_benchmark"]) for r in jobs] == [("1", "0"), ("2", "0"), ("1", "1"), ("2", "1")]
    assert all(r["error"] == "" for r in jobs) and "neumf (cudnn.benchmark): 2 batch sizes" in proc.stdout


def test_bad_model_name_is_one_error_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), "--models", "nope"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: --models: unknown nope")


def test_measured_check_scores_committed_runs_and_says_when_there_are_none(tmp_path: Path) -> None:
    from dlsched.predictors.resources.bundle import Predictor

    assert "has not met a GPU yet" in measured_check(base=tmp_path / "none")["missing"]
    run = tmp_path / "h100-test"
    run.mkdir()
    (run / "stack.json").write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.x",
                                                "CUDA_MODULE_LOADING": "LAZY"}))
    (run / "jobs.csv").write_text(
        "label,model,attention,batch,seq,optimizer,amp,device,steps,step_s,max_allocated_mib,max_reserved_mib,"
        "nvml_used_mib,nvml_util_mean,error\n"
        "a,m,sdpa,1,0,adam,0,cuda,8,0.1,100,120,2000,50,\n"
        "a,m,sdpa,2,0,adam,0,cuda,8,0.1,200,220,4000,60,\n"
        "a,m,sdpa,4,0,adam,0,cuda,8,0.1,,,,,OutOfMemoryError: CUDA out of memory\n")
    model = TrainingMemoryModel.from_constants(1000.0, 1.0, 1.0, 1.0, 0.0, band=(0.9, 1.1))
    pred = Predictor(util_model=None, util_features=(), mem_model=model)
    feats = {"param_bytes": 0.0, "saved_bytes": 0.0, "max_tensor_bytes": 0.0, "saved_attn_bytes": 0.0,
             "saved_attn_bytes_amp": 0.0}
    seen = []

    def resolve(model: str, batch: int, seq: int) -> dict:
        seen.append((model, batch, seq))
        return dict(feats, saved_bytes=batch * 1000.0 * 2**20)   # 1,000 MiB a sample
    res = measured_check(pred, resolve, base=tmp_path)["runs"][0]
    # predictions: the run's stack (lazy, on an H100) replaces the intercept: ctx + 1000 b MiB
    from dlsched.predictors.resources.context import stack_context

    ctx = stack_context("lazy", "NVIDIA H100 80GB HBM3").total_mib
    assert seen == [("m", 1, 0), ("m", 2, 0)] and res["rows"] == 2 and res["failed_jobs"] == 1
    errs = [abs(ctx + 1000 - 2000) / 2000, abs(ctx + 2000 - 4000) / 4000]
    assert res["memory"]["mape"] == pytest.approx(100 * sum(errs) / 2)
    assert res["memory"]["under10"] == pytest.approx(100.0) and res["stack"] == "lazy"
