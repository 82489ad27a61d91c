"""A trained predictor: utilisation regressor + memory estimator + per-GPU calibration +
prediction intervals, with safe save/load. This is what ``load_default()`` returns and what
``dlsched predictor train`` writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dlsched.predictors.resources import persist
from dlsched.predictors.resources.calibration import GpuCalibration
from dlsched.predictors.resources.context import DEFAULT_STACK, KNOWN_STACKS, context_range, stack_context
from dlsched.predictors.resources.features import mem_inputs, vectorize
from dlsched.predictors.resources.regressors import Regressor
from dlsched.predictors.resources.stack_calibration import cluster_key, model_family
from dlsched.predictors.resources.train_memory import (
    TRAIN_COLUMNS,
    JobMeta,
    TrainingMemoryModel,
    calibration_factor,
    memory_terms,
)


@lru_cache(maxsize=256)
def _card(gpu: str) -> str:
    """The GPU type a name means ("A100-SXM4-40GB" and "a100" are one card type), else the name."""
    from dlsched.core import gpus

    known = gpus.find(gpu, fuzzy=True)
    return known.name if known is not None else gpu


@dataclass
class Predictor:
    """Predicts (mean, lo, hi) of GPU utilisation (%) and peak GPU memory (MiB) of one job.

    ``util_model`` predicts log1p(util) from ``vectorize(features, util_features)``;
    ``util_band`` holds the 10th/90th percentiles of out-of-fold log1p residuals, so lo/hi
    form an ~80 % interval. ``mem_model`` takes ``mem_inputs(features)``; its mean is already
    biased high (OOM-averse) and ``mem_band`` holds 10th/90th percentiles of true/predicted.
    Either model may be None (then that prediction is None). With ``per_gpu="datasheet"``
    (a roofline model built from data sheets, like the shipped default) a GPU type found in
    :mod:`~dlsched.predictors.resources.gpu_specs` gets the roofline of that GPU's data sheet instead.
    """

    util_model: Regressor | None
    util_features: tuple[str, ...]
    mem_model: Regressor | None
    calibration: GpuCalibration = field(default_factory=GpuCalibration)
    util_band: tuple[float, float] = (-0.2, 0.2)
    mem_band: tuple[float, float] = (0.8, 1.1)
    manifest: dict[str, Any] = field(default_factory=dict)
    per_gpu: str = ""
    #: GPU type (lower case) -> factor on memory predictions, from :meth:`calibrate_memory`
    mem_calibration: dict[str, float] = field(default_factory=dict)
    #: ``gpu|stack`` -> (intercept MiB, factor) from observed peaks (:mod:`.stack_calibration`,
    #: ``dlsched predictor calibrate``); applied after the factor above
    mem_affine: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: the observed-peak guard saved with that calibration: ``gpu|stack[|family]`` -> job
    #: signature (:func:`~.stack_calibration.job_signature`) -> largest peak observed (MiB)
    mem_peaks: dict[str, dict[str, float]] = field(default_factory=dict)

    def _util_model_for(self, gpu: str) -> Regressor | None:
        if self.per_gpu == "datasheet":
            from dlsched.predictors.resources import gpu_specs

            if gpu_specs.canonical(gpu) is not None:
                return gpu_specs.datasheet_model(gpu)
        return self.util_model

    def gpu_note(self, gpu: str) -> str | None:
        """Why ``gpu`` gets the base model although this predictor picks data sheets per GPU
        (None when it needs no explanation), so callers can tell the user instead of guessing."""
        from dlsched.predictors.resources import gpu_specs

        if self.per_gpu != "datasheet" or gpu_specs.canonical(gpu) is not None:
            return None
        return (f"no data sheet for GPU {gpu!r} (known: {', '.join(gpu_specs.SPECS)}); "
                f"utilisation uses the predictor's base figures ({gpu_specs.DEFAULT_GPU} for the shipped default)")

    def predict_util(self, features: Mapping[str, float], gpu: str = "unknown") -> tuple[float, float, float] | None:
        """GPU utilisation of the job running alone on ``gpu``: (mean, lo, hi) in percent."""
        model = self._util_model_for(gpu)
        if model is None:
            return None
        z = float(model.predict(vectorize([features], self.util_features))[0])
        vals = [self.calibration.apply(float(np.expm1(z + d)), gpu) for d in (0.0, *self.util_band)]
        return vals[0], min(vals), max(vals)

    @staticmethod
    def _mem_key(gpu: str, family: str | None) -> str:
        return gpu.lower() if not family else f"{gpu.lower()}/{family.lower()}"

    def stack_for(self, label: str) -> str | None:
        """The ``stack`` argument of :meth:`predict_mem_mib` for a user's ``--stack`` label:
        ``unknown`` on a predictor whose memory model names no fit stack means its own intercept
        (None). ``predict`` and ``predictor calibrate`` both go through here, so a correction is
        learnt on the very predictions it is later applied to."""
        own = getattr(self.mem_model, "stack_", "")
        return None if (label or "unknown").strip().lower() == "unknown" and not own else (label or "unknown")

    def calibration_keys(self, features: Mapping[str, float], gpu: str, stack: str | None) -> tuple[str, str]:
        """(per-family key, GPU/stack key) of :attr:`mem_affine` for a job: the stack it is
        predicted with (None: the fit stack's own label)."""
        label = stack or getattr(self.mem_model, "stack_", "") or ""
        card = _card(gpu)
        return cluster_key(card, label, model_family(features)), cluster_key(card, label)

    def predict_mem_mib(self, features: Mapping[str, float], gpu: str = "unknown",
                        meta: JobMeta | None = None, family: str | None = None,
                        stack: str | None = None, signature: str = "",
                        calibrated: bool = True) -> tuple[float, float, float] | None:
        """Peak training memory in MiB: (safe estimate to reserve, lo, hi).

        A training-memory model (:mod:`.train_memory`) uses ``meta`` (optimizer, AMP, attention;
        default Adam, fused attention, and AMP from ``features["amp"]``) and the software
        ``stack`` (:mod:`.context`: its CUDA context, workspaces and allocator floor replace the
        fitted intercept; "unknown": today's lazily loading stack, with the band widened to every
        known stack's context; a label of the cluster's own, e.g. ``cu121``, is predicted as
        unknown until calibration learns it; ``None``: the stack the constants were fitted on);
        older graph estimators ignore both.
        ``family`` (e.g. ``timm_family(name)``) picks a per-family factor on ``gpu`` when
        there is one, else the GPU type's; then the intercept + factor learnt from observed peaks
        (:attr:`mem_affine`: the job's model family's on ``gpu|stack`` where there is one, else
        the ``gpu|stack`` one), unless ``calibrated`` is False. No correction goes below the
        physical floor, nor below the largest peak observed for ``signature`` (:attr:`mem_peaks`)."""
        if self.mem_model is None:
            return None
        k = self.mem_calibration.get(self._mem_key(gpu, family), self.mem_calibration.get(gpu.lower(), 1.0))
        a, k2, seen = 0.0, 1.0, 0.0
        if calibrated and (self.mem_affine or self.mem_peaks):
            fam_key, key = self.calibration_keys(features, gpu, stack)
            a, k2 = self.mem_affine.get(fam_key, self.mem_affine.get(key, (0.0, 1.0)))
            if signature:
                seen = max(self.mem_peaks.get(fam_key, {}).get(signature, 0.0),
                           self.mem_peaks.get(key, {}).get(signature, 0.0))
        if isinstance(self.mem_model, TrainingMemoryModel):
            meta = meta or JobMeta(amp=bool(features.get("amp", 0)))
            ctx, rng = self.mem_context(gpu, stack)
            terms = np.asarray([memory_terms(features, meta)])
            m, lo, hi = self.mem_model.predict_band(terms, ctx, rng)
            # calibration corrects the estimate; it never goes below what the job holds for certain
            base = float(self.mem_model.coef_[0]) if ctx is None else ctx
            floor = float(self.mem_model.physical_floor(terms, min(base, rng[0]) if rng else base)[0])
            vals = [max(a + k2 * k * float(v[0]), floor) for v in (m, lo, hi)]
            vals[0] = max(vals[0], seen)
            return vals[0], min(vals[1], vals[0]), max(vals[2], vals[0])
        m = max(a + k2 * k * float(self.mem_model.predict(np.asarray([mem_inputs(features)]))[0]), seen)
        lo, hi = m * self.mem_band[0], m * self.mem_band[1]
        return m, min(lo, m), max(hi, m)

    def mem_context(self, gpu: str, stack: str | None) -> tuple[float | None, tuple[float, float] | None]:
        """(context MiB or None for the fitted intercept, context range or None) of ``stack`` on
        ``gpu`` for the training-memory model: what :meth:`predict_mem_mib` predicts with."""
        if not isinstance(self.mem_model, TrainingMemoryModel) or not stack:
            return None, None
        fitted = float(self.mem_model.coef_[0])
        label = stack.strip().lower()
        if label not in KNOWN_STACKS:   # a cluster's own label: its context is learnt by calibration
            label = DEFAULT_STACK
        if label == (self.mem_model.stack_ or "").lower():
            return fitted, None
        return (stack_context(label, gpu, fitted).total_mib,
                context_range(gpu, fitted) if label == DEFAULT_STACK else None)

    def calibrate_memory(self, rows: list[Mapping[str, float]], measured_mib: Any, gpu: str,
                         metas: list[JobMeta] | None = None, under_tol: float = 0.10,
                         under_share: float = 0.05, family: str | None = None) -> Predictor:
        """Correct memory predictions on ``gpu`` from observed peaks (e.g. a cluster's monitoring):
        one factor k with the fit's own rule, at most ``under_share`` of the observed jobs
        under-predicted by more than ``under_tol`` (and never below the median ratio).
        With ``family`` the factor applies only to that family's jobs on ``gpu`` (predictions
        that pass the same ``family``): observations of one family say little about others."""
        measured = np.asarray(measured_mib, float)
        if len(rows) != len(measured) or len(rows) == 0:
            raise ValueError(f"calibration needs matching, non-empty rows and measurements ({len(rows)} vs "
                             f"{len(measured)})")
        if not np.all(np.isfinite(measured)) or np.any(measured <= 0):
            raise ValueError("measured memory must be positive MiB in every row")
        key = self._mem_key(gpu, family)
        saved = dict(self.mem_calibration)
        self.mem_calibration.pop(key, None)
        if family:  # the family's factor replaces the GPU's for its jobs: measure against the uncorrected model
            self.mem_calibration.pop(gpu.lower(), None)
        metas = metas or [None] * len(rows)
        raw = []
        for f, meta in zip(rows, metas):
            pred = self.predict_mem_mib(f, gpu, meta=meta)
            if pred is None:
                self.mem_calibration = saved
                raise ValueError("this predictor has no memory model to calibrate")
            raw.append(pred[0])
        factor = calibration_factor(measured, raw, under_tol, under_share)
        self.mem_calibration = {k: v for k, v in saved.items() if k != key}
        self.mem_calibration[key] = factor
        return self

    def calibrate(self, rows: list[Mapping[str, float]], measured: np.ndarray, gpu: str) -> Predictor:
        """Fit the correction for ``gpu`` from a few measured profiles of jobs on that GPU type
        (utilisation in %), e.g. after moving the cluster to a new card."""
        model = self._util_model_for(gpu)  # the model predict_util will use for this GPU
        if model is None:
            raise ValueError("this predictor has no utilisation model to calibrate")
        raw = np.expm1(model.predict(vectorize(rows, self.util_features)))
        self.calibration.fit(raw, np.asarray(measured, float), np.full(len(raw), gpu, dtype=object))
        return self

    # --- persistence --------------------------------------------------------------------
    def save(self, out_dir: str | Path, **manifest: Any) -> Path:
        """Write models + manifest into ``out_dir``; extra keyword args go into the manifest
        (``training_data``, ``metrics``, ``license`` ...)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {**self.manifest, **manifest}
        body["util"] = None if self.util_model is None else {
            **persist.write_model(self.util_model, out, "util"),
            "features": list(self.util_features), "target": "log1p", "band_log1p": list(self.util_band),
            "per_gpu": self.per_gpu}
        training = isinstance(self.mem_model, TrainingMemoryModel)
        body["memory"] = None if self.mem_model is None else {
            **persist.write_model(self.mem_model, out, "memory"),
            "inputs": list(TRAIN_COLUMNS) if training else ["param_mib", "act_mib_per_sample", "batch"],
            "band_ratio": list(self.mem_band)}
        body["calibration"] = self.calibration.to_json()
        body["memory_calibration"] = dict(self.mem_calibration)
        if self.mem_affine:
            body["memory_calibration_affine"] = {k: [float(a), float(b)] for k, (a, b) in self.mem_affine.items()}
        if self.mem_peaks:
            body["memory_observed_peaks"] = {k: {s: float(v) for s, v in d.items()} for k, d in self.mem_peaks.items()}
        return persist.write_manifest(out, body)

    @classmethod
    def load(cls, path: str | Path) -> Predictor:
        """Load from a directory or its ``manifest.json``; pickle-family paths are refused."""
        manifest, base = persist.read_manifest(path)
        util, mem = manifest.get("util"), manifest.get("memory")
        return cls(
            util_model=persist.read_model(util, base) if util else None,
            util_features=tuple(util["features"]) if util else (),
            mem_model=persist.read_model(mem, base) if mem else None,
            calibration=GpuCalibration.from_json(manifest.get("calibration") or {}),
            util_band=tuple(util["band_log1p"]) if util else (-0.2, 0.2),
            mem_band=tuple(mem["band_ratio"]) if mem else (0.8, 1.1),
            manifest=manifest,
            per_gpu=str(util.get("per_gpu", "")) if util else "",
            mem_calibration={str(k): float(v) for k, v in (manifest.get("memory_calibration") or {}).items()},
            mem_affine={str(k): (float(v[0]), float(v[1]))
                        for k, v in (manifest.get("memory_calibration_affine") or {}).items()},
            mem_peaks={str(k): {str(s): float(v) for s, v in d.items()}
                       for k, d in (manifest.get("memory_observed_peaks") or {}).items()},
        )
