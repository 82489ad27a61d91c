"""Fit the training-memory constants on GPUMemNet's TIMM measurements and write them, with
their evaluation and attribution, to ``src/dlsched/predictors/resources/data/training_memory.json``;
then rebuild the shipped default predictor with them.

    # 1. export TIMM graphs (CPU, random weights; ~10 s a model, in the background):
    nice -n 15 python scripts/export_timm_onnx.py \
        ../shared/profiles/itu_gpumem/timm_faketensor_vs_measured_memory.csv --budget-min 40
    # 2. fit, evaluate (5-fold by family) and ship:
    PYTHONPATH=src python scripts/fit_training_memory.py [--onnx-dir ~/.cache/dlsched/timm-onnx]

Only the constants ship (figures, not data): GPUMemNet's table has no license, so it is cited.
Lucid's rows (non-commercial) are evaluated by ``dlsched predictor evaluate`` but not fitted here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dlsched.predictors.resources import graph_memory_eval as gme
from dlsched.predictors.resources.build_default import TRAINING_MEMORY_FILE, build

ATTRIBUTION = ("Fitted on peak memory measured by GPUMemNet (Yousefzadeh-Asl-Miandoab et al., ITU RAD lab, "
               "github.com/itu-rad/GPUMemNet, Related_works/FakeTensor/fake_tensor.xlsx; no license, cited "
               "for research use): TIMM architectures trained on an A100-SXM4-40GB, joined with dlsched's "
               "ONNX exports of the same architectures.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    ap.add_argument("--onnx-dir", type=Path, default=gme.DEFAULT_TIMM_ONNX)
    ap.add_argument("--out", type=Path, default=TRAINING_MEMORY_FILE)
    args = ap.parse_args(argv)
    csv = args.shared / "profiles" / "itu_gpumem" / "timm_faketensor_vs_measured_memory.csv"
    if not csv.is_file():
        print(f"error: {csv}: not found (pass --shared)", file=sys.stderr)
        return 2
    rows, info = gme.timm_rows(csv, args.onnx_dir)
    if rows.empty:
        print(f"error: {args.onnx_dir}: no exported TIMM graphs (run scripts/export_timm_onnx.py)", file=sys.stderr)
        return 2
    model = gme.fit(rows)
    ev = gme.evaluate(rows)
    body = {"constants": model.constants(), "attribution": ATTRIBUTION,
            "assumptions": {"optimizer": gme.TIMM_META.optimizer, "amp": gme.TIMM_META.amp,
                            "fused_attention": gme.TIMM_META.fused_attention, "gpu": "A100-SXM4-40GB"},
            "data": info | {"rows": len(rows), "families": int(rows["family"].nunique()),
                            "models": sorted(rows["model"].unique())},
            "evaluation_5fold_by_family": {k: ev[k] for k in ("training_memory", "faketensor", "faketensor+1GiB",
                                                              "horus_eq2+1000MiB")}}
    args.out.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(rows)} rows, {body['data']['families']} families; "
          f"MAPE {ev['training_memory']['all']['mape']:.1f} %, under-predicted >10 % "
          f"{ev['training_memory']['all']['under10']:.1f} %, band coverage "
          f"{ev['training_memory']['all']['band_coverage']:.2f}")
    print(f"rebuilt {build()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
