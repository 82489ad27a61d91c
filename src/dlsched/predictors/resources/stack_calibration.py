"""Memory calibration from observed peaks, per cluster: one intercept and one factor per
(GPU type, stack label, model family), learnt online as the node agents report peaks (the
simulator's and the service's hook records under the job's family, as ``predictor calibrate``
does offline: a CNN's peaks say little about a transformer's).

Why an intercept *and* a factor: the shipped constants come from one lab's stack. Another
stack differs first by a constant (CUDA context with or without lazy module loading, library
workspaces, allocator settings: :mod:`.context`) and second by a slope (allocator rounding,
cuDNN algorithm choice). A factor alone (what :meth:`Predictor.calibrate_memory` fits) turns a
constant offset into an error that grows with the job; an intercept alone cannot absorb a
slope. So, per key, ``calibrated = a + k * raw`` with:

* fewer than ``MIN_FOR_SLOPE`` observations: ``k = 1`` and ``a`` the median residual (a shift);
* then a least-squares line on relative errors (each job weighs the same whatever its size),
  ``k`` clipped to [0.5, 2] and shrunk towards 1 with a prior worth ``PRIOR_WEIGHT`` jobs;
* a lift so that at most 5 % of the observed jobs sit more than 10 % above their calibrated
  prediction (the fit's own OOM-averse rule).

The guard: a job signature (model, batch, sequence, optimizer, precision, attention) that has
been observed is never predicted below the largest peak seen for it on that key.

Errors are kept prequentially: "after" scores the calibrated prediction each job was given when
it was submitted (before its own peak was known), so it is what the cluster really got.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MIN_FOR_SLOPE = 5
PRIOR_WEIGHT = 3.0
K_BOUNDS = (0.5, 2.0)
UNDER_TOL, UNDER_SHARE = 0.10, 0.05
UNKNOWN_STACK = "unknown"


#: model families calibrated apart: their errors differ (a CNN's cuDNN workspaces, a
#: transformer's attention and LM head), so observations of one say little about the other
FAMILIES = ("cnn", "transformer", "other")


def cluster_key(gpu: str, stack: str = "", family: str = "") -> str:
    """``gpu|stack`` (or ``gpu|stack|family``) in lower case: the unit one calibration is fitted for."""
    key = f"{(gpu or 'unknown').strip().lower()}|{(stack or UNKNOWN_STACK).strip().lower()}"
    return f"{key}|{family.strip().lower()}" if family else key


def model_family(features: dict[str, float] | Any) -> str:
    """``transformer`` (the graph has attention), ``cnn`` (convolutions), else ``other``."""
    if float(features.get("attn_layers", 0.0)) > 0:
        return "transformer"
    return "cnn" if float(features.get("n_conv_layers", 0.0)) > 0 else "other"


@dataclass
class _Fit:
    raw: list[float] = field(default_factory=list)
    seen: list[float] = field(default_factory=list)
    a: float = 0.0
    k: float = 1.0
    err_before: list[float] = field(default_factory=list)   # |raw - seen| / seen
    err_after: list[float] = field(default_factory=list)    # |calibrated-at-the-time - seen| / seen

    def refit(self) -> None:
        raw, y = np.asarray(self.raw, float), np.asarray(self.seen, float)
        if len(raw) < MIN_FOR_SLOPE or np.ptp(raw) < 1e-6 * max(raw.max(), 1.0):
            k, a = 1.0, float(np.median(y - raw))
        else:
            w = 1.0 / y  # relative errors: every job weighs the same
            A = np.c_[np.ones(len(raw)), raw] * w[:, None]
            (_, k_ls), *_ = np.linalg.lstsq(A, y * w, rcond=None)
            n = len(raw)
            k = float(np.clip((n * k_ls + PRIOR_WEIGHT * 1.0) / (n + PRIOR_WEIGHT), *K_BOUNDS))
            a = float(np.median(y - k * raw))   # the intercept that goes with the shrunk slope
        pred = a + k * raw
        lift = float(np.quantile(y / np.maximum(pred, 1.0), 1.0 - UNDER_SHARE)) / (1.0 + UNDER_TOL)
        if lift > 1.0:
            a, k = a * lift, k * lift
        self.a, self.k = a, k

    def apply(self, raw: float) -> float:
        return max(self.a + self.k * raw, 0.0) if self.raw else raw


class StackCalibration:
    """Online per-cluster intercept + factor on memory predictions, with the observed-peak guard.

    ``record(job_id, raw_mib, gpu, stack, signature)`` when a prediction is made;
    ``observe(job_id, peak_mib)`` when an agent reports the job's peak (a job counts once, with
    its largest reading); ``apply(raw_mib, gpu, stack, signature)`` gives the calibrated figure."""

    def __init__(self) -> None:
        self.fits: dict[str, _Fit] = {}
        self.peaks: dict[tuple[str, str], float] = {}       # (key, signature) -> largest peak seen
        self.pending: dict[str, tuple[float, str, str, float]] = {}  # job -> (raw, key, signature, given)
        self.counted: dict[str, int] = {}                     # job -> index of its row in its fit

    def apply(self, raw_mib: float, gpu: str = "", stack: str = "", signature: str = "",
              family: str = "") -> float:
        key = cluster_key(gpu, stack, family)
        fit = self.fits.get(key)
        out = fit.apply(raw_mib) if fit is not None else raw_mib
        if signature:
            out = max(out, self.peaks.get((key, signature), 0.0))
        return out

    def record(self, job_id: str, raw_mib: float, gpu: str = "", stack: str = "", signature: str = "",
               family: str = "") -> float:
        """Remember a job's uncalibrated prediction; returns the calibrated one. ``family``
        (:func:`model_family`) keeps that family's correction apart."""
        if not math.isfinite(raw_mib) or raw_mib <= 0:
            return raw_mib
        given = self.apply(raw_mib, gpu, stack, signature, family)
        self.pending[job_id] = (float(raw_mib), cluster_key(gpu, stack, family), signature, given)
        return given

    def observe(self, job_id: str, peak_mib: float) -> bool:
        """An observed peak of a recorded job: scored, then added to its key's fit. False when the
        job was never recorded (no prediction to compare) or the reading is not a positive figure."""
        if job_id not in self.pending or not math.isfinite(peak_mib) or peak_mib <= 0:
            return False
        if self._count(job_id, peak_mib):
            self.fits[self.pending[job_id][1]].refit()
        return True

    def restore(self, rows: Any) -> int:
        """Peaks counted before a restart, as the live service's store kept them
        (``service/memory_kept.py``): each ``(job_id, raw, key, signature, given, peak)`` counted
        as :meth:`observe` counted it, and each key refitted once at the end (a fit does not
        depend on the order of its rows), so that thousands of rows restore in linear time.
        Returns how many jobs the calibration has counted since (rows without a positive figure
        are left out)."""
        touched: set[str] = set()
        for job_id, raw, key, sig, given, peak in rows:
            if not (math.isfinite(raw) and raw > 0 and math.isfinite(peak) and peak > 0):
                continue
            self.pending[job_id] = (float(raw), key, sig, float(given))
            touched.add(key)
            self._count(job_id, float(peak))
        for key in touched:
            self.fits[key].refit()
        return len(self.counted)

    def _count(self, job_id: str, peak_mib: float) -> bool:
        """A recorded job's peak counted in its key's fit, not refitted; False when the job's row
        already holds as large a peak (nothing changed)."""
        raw, key, sig, given = self.pending[job_id]
        fit = self.fits.setdefault(key, _Fit())
        if sig:
            self.peaks[(key, sig)] = max(self.peaks.get((key, sig), 0.0), float(peak_mib))
        if job_id in self.counted:   # a later, larger reading of the same job replaces its row
            i = self.counted[job_id]
            if peak_mib <= fit.seen[i]:
                return False
            fit.seen[i] = float(peak_mib)
            fit.err_before[i] = abs(raw - peak_mib) / peak_mib
            fit.err_after[i] = abs(given - peak_mib) / peak_mib
        else:
            fit.err_before.append(abs(raw - peak_mib) / peak_mib)
            fit.err_after.append(abs(given - peak_mib) / peak_mib)   # what the job was really given
            fit.raw.append(raw)
            fit.seen.append(float(peak_mib))
            self.counted[job_id] = len(fit.raw) - 1
        return True

    def fit_offline(self, raw: Any, seen: Any, gpu: str = "", stack: str = "",
                    signatures: Any = None, family: str = "") -> dict[str, float]:
        """Feed a log of (prediction, observed peak) pairs in order, as the live service would."""
        sigs = list(signatures) if signatures is not None else [""] * len(raw)
        key = cluster_key(gpu, stack, family)
        for i, (r, y, s) in enumerate(zip(raw, seen, sigs)):
            jid = f"offline:{key}:{i}"
            self.record(jid, float(r), gpu, stack, str(s), family)
            self.observe(jid, float(y))
        return self.stats()[key]

    def stats(self) -> dict[str, dict[str, float]]:
        """Per key: observed jobs, intercept (MiB), factor, and the mean relative error (%) of the
        uncalibrated and of the calibrated predictions (prequential)."""
        out = {}
        for key, f in sorted(self.fits.items()):
            out[key] = {"jobs": len(f.raw), "intercept_mib": f.a, "factor": f.k,
                        "mape_before": 100.0 * float(np.mean(f.err_before)) if f.err_before else math.nan,
                        "mape_after": 100.0 * float(np.mean(f.err_after)) if f.err_after else math.nan}
        return out

    def to_json(self) -> dict[str, list[float]]:
        """``{key: [intercept, factor]}``: what a saved predictor keeps."""
        return {k: [f.a, f.k] for k, f in sorted(self.fits.items()) if f.raw}

    def peaks_json(self) -> dict[str, dict[str, float]]:
        """``{key: {signature: largest peak}}``: the observed-peak guard, saved beside the fits."""
        out: dict[str, dict[str, float]] = {}
        for (key, sig), peak in sorted(self.peaks.items()):
            out.setdefault(key, {})[sig] = float(peak)
        return out


def memory_calibration_gauge(cal: StackCalibration | None) -> Any:
    """``dlsched_memory_prediction_error_percent{cluster, stage}`` for the service's /metrics:
    the mean relative error of memory predictions against the agents' peaks, before (the model
    alone) and after calibration (as it stood when each peak arrived), per ``gpu|stack|family`` key; plus
    the fitted intercept and factor. Empty until a peak of a predicted job arrives."""
    from prometheus_client.core import GaugeMetricFamily

    g = GaugeMetricFamily("dlsched_memory_prediction_error_percent",
                          "Mean relative error of memory predictions vs observed peaks, before/after the "
                          "cluster's calibration", labels=["cluster", "stage"])
    for key, st in (cal.stats() if cal is not None else {}).items():
        for stage in ("before", "after"):
            if math.isfinite(st[f"mape_{stage}"]):
                g.add_metric([key, stage], st[f"mape_{stage}"])
        g.add_metric([key, "jobs"], st["jobs"])
        g.add_metric([key, "intercept_mib"], st["intercept_mib"])
        g.add_metric([key, "factor"], st["factor"])
    return g


def job_signature(ref: str, batch: int, seq: int = 0, optimizer: str = "", amp: bool = False,
                  attention: str = "") -> str:
    """What makes two jobs the same for the observed-peak guard."""
    return f"{ref}|b{int(batch)}|s{int(seq or 0)}|{optimizer or '-'}|{'amp' if amp else 'fp32'}|{attention or '-'}"


__all__ = [
    "FAMILIES",
    "MIN_FOR_SLOPE",
    "UNKNOWN_STACK",
    "StackCalibration",
    "cluster_key",
    "job_signature",
    "memory_calibration_gauge",
    "model_family",
]
