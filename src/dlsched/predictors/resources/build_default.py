"""Rebuild the shipped default predictor (``data/default``) from no training data at all.

    python -m dlsched.predictors.resources.build_default [--out DIR]

The rows of Lucid (non-commercial) and GPUMemNet (no license) must not go into it, and no
permissively licensed set measures utilisation per architecture. So both halves are physical
models with a handful of fitted figures, shipped with their attribution:
- utilisation: the roofline model (:mod:`~dlsched.predictors.resources.roofline`) with device
  constants from GPU data sheets and four host figures fitted on Lucid
  (:mod:`~dlsched.predictors.resources.gpu_specs`);
  the GPU named at prediction time picks its data sheet (V100 otherwise). Its band is a fixed +-0.7 in log1p
  units (x0.5 to x2), about the model's measured error on Lucid (docs/predictors.md).
- memory: the training-memory model (:mod:`~dlsched.predictors.resources.train_memory`) with the
  constants in ``data/training_memory.json``, fitted by ``scripts/fit_training_memory.py`` on
  GPUMemNet's TIMM measurements (cited there); :meth:`LinearMemoryEstimator.prior` if that file is absent.
Train your own predictor (``dlsched predictor train``) on profiles of your cluster for sharper
predictions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.default import DEFAULT_DIR
from dlsched.predictors.resources.gpu_specs import DEFAULT_GPU, datasheet_model
from dlsched.predictors.resources.memory import LinearMemoryEstimator
from dlsched.predictors.resources.regressors import Regressor
from dlsched.predictors.resources.roofline import ROOFLINE_FEATURES
from dlsched.predictors.resources.train_memory import TrainingMemoryModel

TRAINING_MEMORY_FILE = Path(__file__).resolve().parent / "data" / "training_memory.json"

#: a-priori utilisation band in log1p units (no out-of-fold residuals exist for a model fitted to nothing)
UTIL_BAND = (-0.7, 0.7)
ATTRIBUTION = ("Utilisation: roofline model with NVIDIA data-sheet peaks "
               "(dlsched.predictors.resources.gpu_specs) and four host constants (kernel floor, launch, step, "
               "overlap) fitted on Lucid's profiles (Hu et al., ASPLOS 2023; S-Lab License 1.0). "
               "Memory: first-principles coefficients (no data).")


def shipped_memory_model() -> tuple[Regressor, str, tuple[float, float]]:
    """The training-memory model with the shipped constants, its attribution and band."""
    if not TRAINING_MEMORY_FILE.is_file():
        return LinearMemoryEstimator.prior(), "Memory: first-principles coefficients (no data).", (0.75, 1.1)
    d = json.loads(TRAINING_MEMORY_FILE.read_text(encoding="utf-8"))
    c = d["constants"]
    band = (c["band_lo"], c["band_hi"])
    model = TrainingMemoryModel.from_constants(c["context_mib"], c["state_scale"], c["act_scale"], c["conv_scale"],
                                               c["tmp_scale"], c["safety"], band)
    model.stack_ = str(d.get("assumptions", {}).get("stack", ""))
    return model, "Memory: training-memory model; constants " + d["attribution"], band


def build(out: Path = DEFAULT_DIR) -> Path:
    """Write the a-priori predictor with its manifest."""
    mem, mem_note, band = shipped_memory_model()
    pred = Predictor(util_model=datasheet_model(DEFAULT_GPU), util_features=ROOFLINE_FEATURES,
                     mem_model=mem, util_band=UTIL_BAND, mem_band=band, per_gpu="datasheet")
    attribution = ATTRIBUTION.replace("Memory: first-principles coefficients (no data).", mem_note)
    lic = ("utilisation: four host constants fitted on Lucid (S-Lab License 1.0, cited in the attribution); memory: five figures fitted on GPUMemNet's TIMM table "
           "(no license; cited in the attribution)") if isinstance(mem, TrainingMemoryModel) else "none needed (no data)"
    return pred.save(out, training_data={"files": [], "sha256": "", "license": lic},
                     attribution=attribution, kind="datasheet-roofline",
                     metrics={"note": "fitted to no profiles; its scores on Lucid are in docs/predictors.md"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    print(build(ap.parse_args().out))


if __name__ == "__main__":
    main()
