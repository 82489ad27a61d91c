"""Rebuild the shipped default predictor (``data/default``) from permissively licensed inputs.

    python -m dlsched.predictors.build_default [--shared ../shared]

Lucid (non-commercial) and GPUMemNet (no license) must not go into it. What is used:
- utilisation: a population prior, the Philly per-GPU utilisation CDF as published in
  AcmeTrace (CC-BY-4.0). No permissive set measures utilisation per architecture, so the
  default predicts the cluster-typical value with a wide 10-90 % band; train your own
  predictor (``dlsched predictor train``) for per-job predictions.
- memory: :meth:`LinearMemoryEstimator.prior`, first-principles coefficients fitted to no data.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.predictors.bundle import Predictor
from dlsched.predictors.default import DEFAULT_DIR
from dlsched.predictors.memory import LinearMemoryEstimator
from dlsched.predictors.persist import sha256_files
from dlsched.predictors.regressors import DummyRegressor

CDF_FILE = Path("profiles/acme_util_cdfs/gpu_util_cdfs.csv")
ATTRIBUTION = ("Utilisation prior: Philly GPU-utilisation CDF (msr-fiddle/philly-traces) as released in "
               "InternLM/AcmeTrace, Hu et al., 'Characterization of Large Language Model Development in the "
               "Datacenter', NSDI 2024; CC-BY-4.0. Memory: first-principles coefficients (no training data).")


def build(shared: Path, out: Path = DEFAULT_DIR) -> Path:
    """Fit the prior on the CDF quantiles and write the predictor with its manifest."""
    path = shared / CDF_FILE
    cdf = pd.read_csv(path)
    cdf = cdf[(cdf["cluster"] == "philly") & (cdf["metric"] == "gpu_util_pct")].sort_values("cdf_percent")
    if cdf.empty:
        raise ValueError(f"{path}: no philly gpu_util_pct rows")
    # Equal-probability sample of the distribution (inverse CDF on a 1 % grid).
    qs = np.interp(np.arange(0.5, 100, 1.0), cdf["cdf_percent"], cdf["value"])
    z = np.log1p(qs)
    # Centre on the median (48 %): the log-mean is dragged to ~15 % by idle GPUs, which says
    # more about Philly's allocation habits than about a running job.
    util = DummyRegressor().fit(np.zeros((1, 1)), [float(np.median(z))])
    band = (float(np.percentile(z, 10) - util.mean_), float(np.percentile(z, 90) - util.mean_))
    pred = Predictor(util_model=util, util_features=("batch",), mem_model=LinearMemoryEstimator.prior(),
                     util_band=band, mem_band=(0.75, 1.1))
    return pred.save(out, training_data={"files": [str(CDF_FILE)], "sha256": sha256_files([path]),
                                         "license": "CC-BY-4.0 (utilisation prior); none needed (memory)"},
                     attribution=ATTRIBUTION, kind="prior",
                     metrics={"note": "population prior: no per-architecture skill; see docs/predictors.md"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[3].parent / "shared")
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    print(build(ap.parse_args().shared, ap.parse_args().out))


if __name__ == "__main__":
    main()
