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
from dlsched.predictors.resources import profiles
from dlsched.predictors.resources.build_default import TRAINING_MEMORY_FILE, build
from dlsched.predictors.resources.context import FIT_STACK, stack_context
from dlsched.predictors.resources.train_memory import UNDER_SHARE, UNDER_WEIGHT

ATTRIBUTION = ("Fitted on peak memory measured by GPUMemNet (Yousefzadeh-Asl-Miandoab et al., ITU RAD lab, "
               "github.com/itu-rad/GPUMemNet, Related_works/FakeTensor/fake_tensor.xlsx; no license, cited "
               "for research use): TIMM architectures trained on an A100-SXM4-40GB, joined with dlsched's "
               "ONNX exports of the same architectures.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    ap.add_argument("--onnx-dir", type=Path, default=gme.DEFAULT_TIMM_ONNX)
    ap.add_argument("--out", type=Path, default=TRAINING_MEMORY_FILE)
    ap.add_argument("--write-features", action="store_true",
                    help="also write the shipped TIMM graph-feature table from --onnx-dir")
    args = ap.parse_args(argv)
    csv = args.shared / "profiles" / "itu_gpumem" / "timm_faketensor_vs_measured_memory.csv"
    if not csv.is_file():
        print(f"error: {csv}: not found (pass --shared)", file=sys.stderr)
        return 2
    if args.write_features:   # ship the graph features of every exported architecture (ours to ship)
        df = profiles.load_timm_memory(csv)
        d = df[~df["censored"] & ~df["failed"]]
        batches = {m: sorted(int(b) for b in g["batch"]) for m, g in d.groupby("model")}
        feats, n = gme.timm_features(sorted(batches), batches, args.onnx_dir, shipped=Path("/nonexistent"))
        print(f"wrote {gme.write_feature_table(feats)}: {n['from_onnx']} architectures, {len(feats)} rows")
    rows, info = gme.timm_rows(csv, args.onnx_dir)
    if rows.empty:
        print(f"error: {args.onnx_dir}: no exported TIMM graphs (run scripts/export_timm_onnx.py)", file=sys.stderr)
        return 2
    model = gme.fit(rows)
    ev = gme.evaluate(rows)
    body = {"constants": model.constants(), "attribution": ATTRIBUTION,
            "assumptions": {"optimizer": gme.TIMM_META.optimizer, "amp": gme.TIMM_META.amp,
                            "attention": gme.TIMM_META.attention, "gpu": "A100-SXM4-40GB",
                            "stack": FIT_STACK,
                            "fit": "asymmetric soft-L1 relative error (an under-prediction weighs "
                                   f"{UNDER_WEIGHT:g}x), families weighted equally, intercept free (the fit "
                                   "stack's context); exact terms (state, loss transient) at >= 1; lift on the "
                                   f"estimated parts: <= {100 * UNDER_SHARE:g} % of rows under-predicted "
                                   "(inner 5-fold by family)"},
            "context_parts": stack_context(FIT_STACK, "A100", model.coef_[0]).parts(),
            "data": info | {"rows": len(rows), "families": int(rows["family"].nunique()),
                            "models": sorted(rows["model"].unique())},
            "evaluation_5fold_by_family": {k: ev[k] for k in ("training_memory", "faketensor", "faketensor+1GiB",
                                                              "horus_eq2+1000MiB", "band_coverage_stack_unknown")}}
    args.out.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tm = ev["training_memory"]["all"]
    print(f"wrote {args.out}: {len(rows)} rows, {body['data']['families']} families; under-predicted "
          f"{tm['under0']:.1f} % (by > 10 %: {tm['under10']:.1f} %), median predicted/measured "
          f"{tm['median_ratio']:.2f}, MAPE {tm['mape']:.1f} %, band coverage "
          f"{tm['band_coverage']:.2f} (stack unknown: "
          f"{ev['band_coverage_stack_unknown']:.2f})")
    print(f"rebuilt {build()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
