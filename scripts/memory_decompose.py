#!/usr/bin/env python3
"""Where the training-memory model's remaining error sits (issue 36): the shipped fit scored out of
fold on the TIMM rows (5 folds by family, as ``dlsched predictor evaluate``), each prediction split
into its exact part (context + state + loss, counted in full) and its estimated part (activations
kept x the lift, the backward transient), grouped by model class, batch band and family.

    python scripts/memory_decompose.py [--shared ../shared] [--top 12]

``need`` is the lift a row needs to be predicted exactly, (measured - exact) / estimated-unlifted:
rows whose ``need`` exceeds the fitted lift are under-predicted, rows far below it carry the
over-prediction. Printed as markdown tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))


def oof_terms(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's out-of-fold prediction by the shipped fit, with its parts in MiB."""
    from dlsched.predictors.ml.folds import stable_fold
    from dlsched.predictors.resources import graph_memory_eval as g
    from dlsched.predictors.resources.train_memory import TrainingMemoryModel

    folds = rows["family"].map(lambda s: stable_fold(s, g.K_FOLDS)).to_numpy()
    X, y, w = g.train_matrix(rows), rows["mem_mib"].to_numpy(float), g.family_weights(rows)
    out = rows.copy()
    for col in ("pred", "exact", "est", "tmp", "lift", "floor"):
        out[col] = np.nan
    for f in np.unique(folds):
        te = folds == f
        m = TrainingMemoryModel().fit(X[~te], y[~te], w[~te], groups=rows["family"].to_numpy()[~te])
        c, s, Xt = m.coef_, m.safety_, X[te]
        out.loc[te, "pred"] = m.predict(Xt)
        out.loc[te, "exact"] = c[0] + max(1.0, c[1]) * Xt[:, 0] + Xt[:, 4]
        out.loc[te, "est"] = c[2] * Xt[:, 1] + c[3] * Xt[:, 2]
        out.loc[te, "tmp"] = c[4] * Xt[:, 3]
        out.loc[te, "lift"] = s
        out.loc[te, "floor"] = m.physical_floor(Xt)
    out["ratio"] = out["pred"] / out["mem_mib"]
    out["need"] = (out["mem_mib"] - out["exact"]) / (out["est"] + out["tmp"])
    out["est_share"] = out["est"] / (out["exact"] + out["est"])
    return out


def summary(d: pd.DataFrame, by: str) -> pd.DataFrame:
    g = d.groupby(by)
    return pd.DataFrame({
        "rows": g.size(), "under > 0 %": g["ratio"].apply(lambda r: 100 * np.mean(r < 1)),
        "under > 10 %": g["ratio"].apply(lambda r: 100 * np.mean(r < 0.9)),
        "median ratio": g["ratio"].median(), "median need": g["need"].median(),
        "median est share": g["est_share"].median(),
        "over MiB (sum, GiB)": g.apply(lambda x: np.sum(np.maximum(x["pred"] - x["mem_mib"], 0)) / 1024)})


def md(df: pd.DataFrame, fmt: str = "{:.2f}") -> str:
    cols = [df.index.name or ""] + list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for k, r in df.iterrows():
        vals = [str(int(v)) if isinstance(v, (int, np.integer)) else fmt.format(v) for v in r.to_numpy()]
        lines.append("| " + " | ".join([str(k)] + vals) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    from memory_tradeoff import batch_bands, classes, load_rows

    rows = load_rows(args.shared)
    d = oof_terms(rows)
    d["class"], d["batch band"] = classes(d), batch_bands(d)
    print(f"TIMM rows: {len(d)}, 5 folds by family, out of fold; lift per fold "
          f"{', '.join(f'{v:.3f}' for v in sorted(d['lift'].unique()))}")
    print(f"rows predicted at the physical floor: {int(np.sum(d['pred'] <= d['floor'] + 1e-6))}; "
          f"median need {d['need'].median():.2f}, 98th pct {d['need'].quantile(0.98):.2f}")
    for by in ("class", "batch band"):
        print(f"\nby {by}\n" + md(summary(d, by)))
    cross = d.assign(cb=d["class"] + " " + d["batch band"])
    print("\nby class and batch band\n" + md(summary(cross, "cb")))
    fam = summary(d, "family")
    print(f"\nthe {args.top} families with the largest median ratio\n"
          + md(fam.sort_values("median ratio", ascending=False).head(args.top)))
    under = d[d["ratio"] < 1].sort_values("ratio")
    cols = ["model", "family", "class", "batch", "mem_mib", "pred", "ratio", "need", "est_share"]
    print(f"\nthe {len(under)} rows under-predicted\n" + md(under[cols].set_index("model"), "{}"))
    # a peak above the same model's peak at a larger batch is not activations (they grow with the
    # batch): allocator or cuDNN workspace choices no graph term describes
    d = d.sort_values(["model", "batch"])
    later_min = d.groupby("model")["mem_mib"].transform(lambda s: s[::-1].cummin()[::-1].shift(-1))
    odd = (d["mem_mib"] > later_min).to_numpy()
    und = (d["ratio"] < 1).to_numpy()
    und10 = (d["ratio"] < 0.9).to_numpy()
    print(f"\nrows whose peak exceeds the same model's peak at a larger batch: {int(odd.sum())} "
          f"({100 * odd.mean():.1f} %); of the {int(und.sum())} under-predicted rows {int((und & odd).sum())}, "
          f"of the {int(und10.sum())} under by > 10 % {int((und10 & odd).sum())}")
    rho = pd.Series(d["need"]).corr(d["est_share"], method="spearman")
    rb = pd.Series(d["need"]).corr(d["batch"], method="spearman")
    print(f"\nSpearman rho of need with est share {rho:.2f}, with batch {rb:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
