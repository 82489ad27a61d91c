"""``dlsched predictor calibrate``'s work: observed peaks -> a per (GPU type, stack, model family)
intercept and factor plus the observed-peak guard, saved with the predictor.

Why it lives apart from the CLI: the raw predictions must be made exactly as ``predict`` makes
them (same stack argument, same context, no earlier correction), or the correction is learnt on
one set of figures and applied to another (issue 36: ~1.2 GiB too low for every job)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.predictors.resources.stack_calibration import (
    FAMILIES,
    StackCalibration,
    cluster_key,
    job_signature,
    model_family,
)


def calibrate_observed(observations: Path, out: Path, predictor_dir: Path | None = None, gpu: str = "",
                       stack: str = "") -> tuple[list[str], Path]:
    """Calibrate the predictor in ``predictor_dir`` (default: the shipped one) on the observed
    jobs in ``observations``; returns the lines to print and the saved manifest's path.
    ``gpu``/``stack`` fill rows without those columns (``stack`` defaults to unknown)."""
    from dlsched.core import gpus
    from dlsched.predictors.resources.bundle import Predictor
    from dlsched.predictors.resources.default import DEFAULT_DIR
    from dlsched.predictors.resources.graph_source import graph_features, seq_features
    from dlsched.predictors.resources.profiles import load_memory_observations
    from dlsched.predictors.resources.train_memory import JobMeta

    if gpu and gpus.find(gpu, fuzzy=True) is None:
        raise ValueError(f"--gpu {gpu!r}: unknown GPU type; known: {', '.join(gpus.names())}")
    pred = Predictor.load(predictor_dir or DEFAULT_DIR)
    if pred.mem_model is None:
        raise ValueError("this predictor has no memory model to calibrate")
    obs = load_memory_observations(observations)
    groups: dict[str, list[tuple[float, float, str]]] = {}
    where: dict[str, tuple[str, str, str]] = {}
    for i, r in enumerate(obs.itertuples(index=False)):
        g = r.gpu or gpu
        if not g:
            raise ValueError(f"{observations}:{i + 2}: the row names no GPU type and no --gpu was given "
                             "(predictions depend on the card)")
        label = (r.stack or stack or "unknown").strip().lower()
        f = (seq_features(r.model, int(r.batch), int(r.seq), r.onnx) if int(r.seq)
             else graph_features(r.model, int(r.batch), r.onnx))
        meta = JobMeta(r.optimizer, bool(r.amp), attention=r.attention)
        stack_arg = pred.stack_for(label)
        p = pred.predict_mem_mib(f, g, meta=meta, stack=stack_arg, calibrated=False)
        if p is None:
            raise ValueError("this predictor has no memory model to calibrate")
        fam = model_family(f)
        key, _ = pred.calibration_keys(f, g, stack_arg)
        sig = job_signature(r.onnx or r.model, int(r.batch), int(r.seq), r.optimizer, bool(r.amp), meta.attention)
        groups.setdefault(key, []).append((p[0], float(r.mem_mib), sig))
        gpu_key, stack_key = key.split("|")[:2]
        where[key] = (gpu_key, stack_key, fam)
    cal = StackCalibration()
    lines: list[str] = []
    for key, rows in groups.items():
        g, st, fam = where[key]
        raw, seen, sigs = (list(v) for v in zip(*rows))
        res = cal.fit_offline(raw, seen, g, st, sigs, fam)
        lines.append(f"{g} / stack {st} / {fam}: {res['jobs']} observed jobs; intercept {res['intercept_mib']:+,.0f} "
                     f"MiB, factor x{res['factor']:.3f}; error {res['mape_before']:.1f} % before -> "
                     f"{res['mape_after']:.1f} % after (each job predicted before it was learnt; median "
                     f"predicted/measured was {np.median(np.array(raw) / np.array(seen)):.2f})")
    for g, st in sorted({(v[0], v[1]) for v in where.values()}):
        missing = [f for f in FAMILIES if cluster_key(g, st, f) not in groups]
        if missing:
            lines.append(f"note: {g} / stack {st}: no observed {', '.join(missing)} jobs; their predictions stay "
                         "uncorrected (one family's errors say little about another's)")
    pred.mem_affine.update({k: (v[0], v[1]) for k, v in cal.to_json().items()})
    for key, peaks in cal.peaks_json().items():
        mine = pred.mem_peaks.setdefault(key, {})
        for sig, peak in peaks.items():
            mine[sig] = max(mine.get(sig, 0.0), peak)
    return lines, pred.save(out)


__all__ = ["calibrate_observed"]
