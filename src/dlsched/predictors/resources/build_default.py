"""Rebuild the shipped default predictor (``data/default``) from no training data at all.

    python -m dlsched.predictors.resources.build_default [--out DIR]

Lucid (non-commercial) and GPUMemNet (no license) must not go into it, and no permissively
licensed set measures utilisation per architecture. So both halves are a-priori models:
- utilisation: the roofline model (:mod:`~dlsched.predictors.resources.roofline`) with constants
  from GPU data sheets and a-priori host figures (:mod:`~dlsched.predictors.resources.gpu_specs`);
  the GPU named at prediction time picks its data sheet (V100 otherwise). Its band is a fixed +-0.7 in log1p
  units (x0.5 to x2), about the model's measured error on Lucid (docs/predictors.md).
- memory: :meth:`LinearMemoryEstimator.prior`, first-principles coefficients.
Train your own predictor (``dlsched predictor train``) on profiles of your cluster for sharper
predictions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.default import DEFAULT_DIR
from dlsched.predictors.resources.gpu_specs import DEFAULT_GPU, datasheet_model
from dlsched.predictors.resources.memory import LinearMemoryEstimator
from dlsched.predictors.resources.roofline import ROOFLINE_FEATURES

#: a-priori utilisation band in log1p units (no out-of-fold residuals exist for a model fitted to nothing)
UTIL_BAND = (-0.7, 0.7)
ATTRIBUTION = ("Utilisation: roofline model with NVIDIA data-sheet peaks "
               "(dlsched.predictors.resources.gpu_specs) and a-priori host constants, fitted to no data. "
               "Memory: first-principles coefficients (no data).")


def build(out: Path = DEFAULT_DIR) -> Path:
    """Write the a-priori predictor with its manifest."""
    pred = Predictor(util_model=datasheet_model(DEFAULT_GPU), util_features=ROOFLINE_FEATURES,
                     mem_model=LinearMemoryEstimator.prior(), util_band=UTIL_BAND, mem_band=(0.75, 1.1),
                     per_gpu="datasheet")
    return pred.save(out, training_data={"files": [], "sha256": "", "license": "none needed (no data)"},
                     attribution=ATTRIBUTION, kind="datasheet-roofline",
                     metrics={"note": "fitted to no profiles; its scores on Lucid are in docs/predictors.md"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    print(build(ap.parse_args().out))


if __name__ == "__main__":
    main()
