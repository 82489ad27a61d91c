"""Per-GPU-type calibration of the utilisation predictor.

Utilisation depends on the card: the same job keeps a small GPU busier than a big one. A
model trained on one card type is mapped to another by a monotone correction in log1p space,
log1p(u_gpu) = a + b*log1p(u_pred), fitted on a few measured profiles of that GPU type.
Unknown GPU types pass through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _key(gpu: str) -> str:
    return gpu.strip().lower()


@dataclass
class GpuCalibration:
    """``coef[gpu] = (a, b)``; fit with :meth:`fit`, apply with :meth:`apply`."""

    coef: dict[str, tuple[float, float]] = field(default_factory=dict)

    def fit(self, pred: np.ndarray, true: np.ndarray, gpus: np.ndarray, min_rows: int = 3) -> GpuCalibration:
        """Fit one (a, b) per GPU type; with fewer than ``min_rows`` rows only a shift (b = 1)."""
        lp, lt = np.log1p(np.asarray(pred, float)), np.log1p(np.asarray(true, float))
        gpus = np.asarray([_key(str(g)) for g in gpus], dtype=object)
        for g in np.unique(gpus):
            m = gpus == g
            x, y = lp[m], lt[m]
            if m.sum() >= min_rows and x.std() > 1e-9:
                b = float(np.clip(np.cov(x, y, bias=True)[0, 1] / x.var(), 0.25, 4.0))
                a = float(y.mean() - b * x.mean())
            else:
                b, a = 1.0, float((y - x).mean())
            self.coef[str(g)] = (a, b)
        return self

    def apply(self, util: float | np.ndarray, gpu: str) -> float | np.ndarray:
        """Calibrated utilisation (0-100) for ``gpu``; identity for GPU types never fitted."""
        key = _key(gpu)
        if key not in self.coef:
            out = np.clip(util, 0.0, 100.0)
            return float(out) if np.ndim(out) == 0 else out
        a, b = self.coef[key]
        out = np.clip(np.expm1(a + b * np.log1p(np.clip(util, 0, None))), 0.0, 100.0)
        return float(out) if np.ndim(out) == 0 else out

    def to_json(self) -> dict[str, list[float]]:
        return {g: [a, b] for g, (a, b) in sorted(self.coef.items())}

    @classmethod
    def from_json(cls, data: dict[str, list[float]]) -> GpuCalibration:
        return cls({_key(g): (float(v[0]), float(v[1])) for g, v in data.items()})
