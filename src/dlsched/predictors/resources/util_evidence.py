"""Per-model evidence for the utilisation predictor, and a check of its host constants against
permissively licensed measurements.

Why: issue 11 asks why the default ranks some jobs wrongly (PointNet) and whether the four host
constants it ships, fitted on Lucid (non-commercial), can come from documented or permissive data.
The answers are figures, so they are computed here and reported by ``dlsched predictor evaluate
--json`` (``utilization.per_model_evidence``, ``utilization.rho_without``,
``utilization.host_crosscheck``); docs/predictors.md quotes them.

* **Busy / idle split** (:func:`busy_idle`). With nvidia-smi utilisation ``u`` and throughput ``v``
  (samples/s) of a profile row, the GPU is busy ``u / v`` seconds per sample and idle
  ``(1 - u) / v``. Three times the graph's forward FLOPs per sample over the busy time is the FLOP
  rate the GPU reached while busy. When that rate is plausible, the graph accounts for the GPU
  side and the idle time is host work (input pipeline, environment, Python) that no graph shows.
* **Rank without one model** (:func:`rho_without`): pooled Spearman of out-of-fold predictions with
  one model's rows dropped, which shows which model breaks the ranking.
* **Host constants from permissive data** (:func:`host_crosscheck`): ``launch_s`` and ``step_s``
  refitted on Gavel's isolated throughputs (MIT; steps/s on V100 and P100, through
  :func:`~dlsched.predictors.resources.roofline.step_seconds`), with the kernel floor and the
  overlap exponent held at the shipped values, because a throughput cannot separate them (only
  tables of nvidia-smi utilisation can, and the two we have are Lucid, non-commercial, and
  GPUMemNet, unlicensed). Orion's per-kernel traces (MIT, V100) give the measured kernel count
  per training step and the duration of the shortest kernels beside the fitted ``kernel_floor_s``.
"""

from __future__ import annotations

import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsched.predictors.ml import metrics
from dlsched.predictors.resources.graph_source import FeatureError, Resolver, graph_features
from dlsched.predictors.resources.roofline import CONSTANTS, LOWER, ROOFLINE_FEATURES, UPPER, step_seconds

#: Gavel job types left out of the throughput fit, and why (reasons from Gavel's side, not Lucid's)
GAVEL_EXCLUDED = {
    "A3C": "its step includes Atari environment rollouts on the host (7 steps/s on V100); the graph is one forward pass",
    "Recommendation": "Gavel's two files disagree 10x on V100 (23.3 vs 253.6 steps/s at batch 512) "
                      "and the simulation file has V100 slower than P100",
}
#: Gavel GPU keys with data-sheet figures in gpu_specs (K80 has none)
GAVEL_GPUS = {"v100": "V100", "p100": "P100"}
#: Orion training traces (fwd + bwd, real data) -> (zoo graph to compare kernel counts with, whether
#: that graph has the same input size, so that its predicted GPU time per step is comparable too;
#: the zoo's MobileNetV2 is the CIFAR variant, the same layers on 32x32 images)
ORION_ZOO = {"resnet50_32_fb1": ("resnet50", True), "mobilenetv2_32_fb1": ("mobilenet_v2_cifar", False)}


def busy_idle(profiles: pd.DataFrame, rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per model (medians over its rows): measured utilisation and throughput, GPU-busy and idle
    milliseconds per sample, graph GFLOPs per sample (forward), the TFLOP/s reached while busy
    (``3 * F / busy``) and the graph's kernel count. Needs a ``speed`` column (samples/s)."""
    if "speed" not in profiles.columns:
        return {}
    speed = profiles["speed"].to_numpy(float)
    util = profiles["gpu_util"].to_numpy(float) / 100.0
    flops = np.array([float(r.get("flops_per_sample", np.nan)) for r in rows])
    kernels = np.array([float(r.get("n_kernels", np.nan)) for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = util / speed
        df = pd.DataFrame({"model": profiles["model"].to_numpy(), "util": 100 * util, "speed": speed,
                           "busy_ms_per_sample": 1e3 * busy, "idle_ms_per_sample": 1e3 * (1 - util) / speed,
                           "gflop_per_sample": flops / 1e9, "busy_tflops": 3 * flops / busy / 1e12,
                           "n_kernels": kernels})
    med = df[np.isfinite(df["speed"]) & (df["speed"] > 0)].groupby("model", sort=False).median()
    return {str(m): {k: float(v) for k, v in r.items()} for m, r in med.iterrows()}


def rho_without(util: np.ndarray, pred: np.ndarray, models: Sequence[str]) -> dict[str, float]:
    """Pooled Spearman of ``pred`` against ``util`` with each model's rows left out in turn
    (``"none"``: all rows)."""
    models = np.asarray(models)
    out = {"none": metrics.spearman(util, pred)}
    for m in dict.fromkeys(models.tolist()):
        keep = models != m
        out[str(m)] = metrics.spearman(util[keep], pred[keep])
    return out


def gavel_rows(iso_csv: Path, resolver: Resolver = graph_features) -> tuple[pd.DataFrame, np.ndarray]:
    """Gavel's single-GPU isolated throughputs on GPUs with data-sheet figures, without
    :data:`GAVEL_EXCLUDED`, and the roofline features of each row's graph."""
    iso = pd.read_csv(iso_csv)
    iso = iso[(iso["scale_factor"] == 1) & (iso["consolidated"] == 1) & iso["gpu"].isin(list(GAVEL_GPUS))
              & ~iso["model"].isin(list(GAVEL_EXCLUDED))].drop_duplicates(["gpu", "job_type"])
    iso = iso.reset_index(drop=True)
    feats = []
    for r in iso.itertuples(index=False):
        batch = int(r.batch_size) if np.isfinite(r.batch_size) else 1  # CycleGAN trains at batch 1
        f = resolver(str(r.model), batch, "")
        feats.append([float(f.get(k, 0.0)) for k in ROOFLINE_FEATURES])
    return iso, np.asarray(feats, float)


def fit_host_on_throughput(iso: pd.DataFrame, raw: np.ndarray, host: Mapping[str, float],
                           free: Sequence[str] = ("launch_s", "step_s"),
                           column: str = "iso_steps_per_s_sim") -> dict[str, Any]:
    """Fit the ``free`` host constants to measured steps/s (log step time, soft-L1 as the
    utilisation fit), device constants from each row's GPU data sheet, the other host
    constants held at ``host``."""
    from scipy.optimize import least_squares

    from dlsched.predictors.resources.gpu_specs import device_constants

    gpus = iso["gpu"].map(GAVEL_GPUS).to_numpy()
    target = -np.log(iso[column].to_numpy(float))
    idx = [CONSTANTS.index(k) for k in free]
    thetas = {g: np.log([{**device_constants(g), **host}[k] for k in CONSTANTS]) for g in set(gpus)}

    def residuals(t: np.ndarray) -> np.ndarray:
        out = np.empty(len(target))
        for g, th in thetas.items():
            th = th.copy()
            th[idx] = t
            m = gpus == g
            out[m] = np.log(step_seconds(th, raw[m])) - target[m]
        return out

    x0 = np.log([float(host[k]) for k in free])
    res = least_squares(residuals, x0, bounds=(np.log(LOWER)[idx], np.log(UPPER)[idx]), loss="soft_l1",
                        f_scale=0.15)
    r = residuals(res.x)
    return {"constants": {**{k: float(host[k]) for k in host}, **dict(zip(free, np.exp(res.x).tolist()))},
            "fitted": list(free), "rows": len(target), "rms_log_step_error": float(np.sqrt(np.mean(r**2)))}


def orion_kernel_stats(tar_path: Path, resolver: Resolver = graph_features) -> dict[str, dict[str, float]]:
    """Kernels per training step, GPU time per step and short-kernel durations from Orion's
    ``*_fb1`` traces (training, real data); for :data:`ORION_ZOO` models also the measured
    kernels per graph kernel (the roofline counts ``3 * n_kernels`` per step)."""
    out: dict[str, dict[str, float]] = {}
    with tarfile.open(tar_path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            name = Path(member.name).name
            if "model_kernels" not in member.name or not name.endswith("_fb1") or not member.isfile():
                continue
            fh = tar.extractfile(member)
            if fh is None:
                continue
            dur = pd.read_csv(fh)["Duration"].to_numpy(float) / 1e3  # ns -> us
            out[name] = {"kernels": float(len(dur)), "gpu_ms": float(dur.sum() / 1e3),
                         "median_us": float(np.median(dur)), "p10_us": float(np.percentile(dur, 10))}
            if name in ORION_ZOO:
                zoo_name, same_input = ORION_ZOO[name]
                try:
                    f = resolver(zoo_name, int(name.split("_")[1]), "")
                    nk = float(f["n_kernels"])
                except (FeatureError, KeyError):
                    continue
                out[name]["graph_kernels"] = nk
                out[name]["kernels_per_graph_kernel"] = float(len(dur)) / nk
                if same_input:  # the default's t_gpu for a V100 (Orion's card), in ms
                    from dlsched.predictors.resources.gpu_specs import datasheet_model
                    from dlsched.predictors.resources.roofline import step_times

                    raw = np.asarray([[float(f.get(k, 0.0)) for k in ROOFLINE_FEATURES]])
                    out[name]["default_gpu_ms"] = float(1e3 * step_times(datasheet_model("V100").theta_, raw)[0][0])
    return out


def host_crosscheck(shared: Path, X_roof: np.ndarray, util: np.ndarray, folds: np.ndarray,
                    labels: Sequence[str], resolver: Resolver = graph_features) -> dict[str, Any]:
    """The shipped host constants beside what permissive data say: ``launch_s`` / ``step_s``
    refitted on Gavel's throughputs, Orion's kernel statistics, and the Lucid score (every row held
    out of that refit; floor and q still Lucid's) of the default with the Gavel figures."""
    from dlsched.predictors.resources.evaluate import score_log_predictions
    from dlsched.predictors.resources.gpu_specs import DEFAULT_GPU, HOST_CONSTANTS, datasheet_constants
    from dlsched.predictors.resources.roofline import RooflineRegressor

    def lucid_score(host: Mapping[str, float]) -> dict[str, Any]:
        model = RooflineRegressor.from_constants(**datasheet_constants(DEFAULT_GPU, dict(host)))
        scored = score_log_predictions(util, model.predict(X_roof), folds, labels)
        return {"rmsle": scored["rmsle"], "spearman": scored["pooled"]["spearman"],
                "per_group_rmsle": scored["per_group_rmsle"]}

    out: dict[str, Any] = {"shipped": dict(HOST_CONSTANTS)}
    tar = shared / "profiles" / "orion_kernels" / "orion_kernel_profiles.tar.gz"
    if tar.is_file():
        out["orion"] = orion_kernel_stats(tar, resolver)
    iso_csv = shared / "profiles" / "gavel" / "isolated_throughputs.csv"
    if not iso_csv.is_file():
        return out
    try:
        iso, raw = gavel_rows(iso_csv, resolver)
    except FeatureError as exc:
        out["gavel"] = {"skipped": str(exc)}
        return out
    # launch and step time from throughputs, floor and q held at the shipped (Lucid) values
    fit = fit_host_on_throughput(iso, raw, HOST_CONSTANTS)
    out["gavel"] = fit | {"excluded": dict(GAVEL_EXCLUDED), "models": sorted(set(iso["model"])),
                          "lucid_score": lucid_score(fit["constants"])}
    # all four from throughputs: shows that a throughput does not pin the floor and q
    four = fit_host_on_throughput(iso, raw, HOST_CONSTANTS, free=("kernel_floor_s", "launch_s", "step_s", "overlap_q"))
    out["gavel_all_four"] = four | {"lucid_score": lucid_score(four["constants"])}
    # no Lucid figure at all: the floor from Orion's shortest kernels (10th percentile, per graph
    # kernel and pass), the other three from Gavel's throughputs
    r50 = out.get("orion", {}).get("resnet50_32_fb1", {})
    if "kernels_per_graph_kernel" in r50:
        floor = 1e-6 * r50["p10_us"] * r50["kernels_per_graph_kernel"] / 3.0
        perm = fit_host_on_throughput(iso, raw, {**HOST_CONSTANTS, "kernel_floor_s": floor},
                                      free=("launch_s", "step_s", "overlap_q"))
        out["gavel_orion_floor"] = perm | {"lucid_score": lucid_score(perm["constants"])}
    return out
