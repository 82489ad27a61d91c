#!/usr/bin/env python3
"""The median over-reservation against the under-reservation shares (issue 36 point 4): the
training-memory model's lift rule varied, each variant scored out of fold on the TIMM rows
(5 folds by family, as ``dlsched predictor evaluate``), printed as one markdown table.

    python scripts/memory_tradeoff.py [--shared ../shared]

Variants: the shipped rule (one lift, <= 2 % of rows under at all) at other shares; an additive
margin in MiB instead of the lift; a lift learnt per row (LightGBM quantile regression of
ln(measured / unlifted prediction) on the inner folds' out-of-fold rows, from the terms' sizes and
shares); one lift per model class (convolutional, attention, other: the graph's saved-tensor
kinds); one lift per batch band (<= 16, 17-64, > 64), because the rows left under are small
batches whose peak exceeds the same model's larger batches; a lift and a margin fitted together;
a lift that falls with the batch, s (1 + g / sqrt(batch)) (g picked on a grid by the inner folds'
median); and a conformalised quantile regression of the lift each row needs (LightGBM on the
terms' shares, batch, attention and per-sample activations, shifted so <= the share of the inner
folds' rows stay under, each inner fold predicted by a regressor fitted without it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def load_rows(shared: Path):
    """The scored TIMM rows (as ``dlsched predictor evaluate``) with the graph's attention bytes."""
    import pandas as pd

    from dlsched.predictors.resources import graph_memory_eval as g

    rows, _ = g.timm_rows(shared / "profiles" / "itu_gpumem" / "timm_faketensor_vs_measured_memory.csv")
    attn = pd.read_csv(g.SHIPPED_TIMM_FEATURES)[["model", "batch", "saved_attn_bytes"]]
    return rows.merge(attn, on=["model", "batch"], how="left").fillna({"saved_attn_bytes": 0.0})


def classes(rows) -> np.ndarray:
    """``transformer`` where the graph saves attention tensors, ``cnn`` where it saves conv/BN ones."""
    attn = rows["saved_attn_bytes"].to_numpy(float) if "saved_attn_bytes" in rows else np.zeros(len(rows))
    conv = rows["saved_conv_mib"].to_numpy(float)
    return np.where(attn > 0, "transformer", np.where(conv > 0, "cnn", "other"))


def batch_bands(rows) -> np.ndarray:
    b = rows["batch"].to_numpy(int)
    return np.where(b <= 16, "b<=16", np.where(b <= 64, "b17-64", "b>64"))


def smallest_margin(parts: list, share: float, top: float = 40_000.0) -> float:
    """The smallest MiB added to every unlifted prediction leaving <= ``share`` of rows under."""
    from dlsched.predictors.resources.train_memory import _peak

    def under(m: float) -> float:
        n = sum(int(np.sum(_peak(c, X, 1.0) + m < y)) for c, X, y in parts)
        return n / max(1, sum(len(y) for *_, y in parts))

    lo, hi = 0.0, top
    if under(lo) <= share:
        return 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if under(mid) <= share else (mid, hi)
    return hi


def _qfeatures(X: np.ndarray) -> np.ndarray:
    total = X[:, 0] + X[:, 1] + X[:, 2] + X[:, 4] + 1.0
    return np.c_[np.log1p(total), X[:, 0] / total, X[:, 1] / total, X[:, 2] / total, np.log1p(X[:, 3])]


def quantile_lift(coef, parts: list, Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, share: float) -> np.ndarray:
    """LightGBM at the (1 - share) quantile of ln(measured / unlifted prediction), trained on the
    inner folds' out-of-fold ratios; the lift it gives is never below 1."""
    import lightgbm as lgb

    from dlsched.predictors.resources.train_memory import _peak, physical_floor

    F, R = [], []
    for c, m in parts:
        F.append(_qfeatures(Xtr[m]))
        R.append(np.log(ytr[m] / _peak(c, Xtr[m], 1.0)))
    q = lgb.LGBMRegressor(objective="quantile", alpha=1 - share, n_estimators=200, num_leaves=7,
                          learning_rate=0.05, min_child_samples=30, verbose=-1, random_state=0)
    q.fit(np.concatenate(F), np.concatenate(R))
    lift = np.exp(np.maximum(q.predict(_qfeatures(Xte)), 0.0))
    base = _peak(coef, Xte, 1.0)
    return np.maximum(base * lift, physical_floor(Xte, float(coef[0])))


def row_features(rows) -> np.ndarray:
    """What the graph and the job say about a row beyond the terms' sizes: batch, whether it
    has attention, and the activations a sample keeps (MiB)."""
    attn = rows["saved_attn_bytes"].to_numpy(float) if "saved_attn_bytes" in rows else np.zeros(len(rows))
    return np.c_[np.log2(rows["batch"].to_numpy(float)), (attn > 0).astype(float),
                 np.log1p(rows["act_mib_per_sample"].to_numpy(float))]


def _need(coef, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lift on the estimated parts at which a row is predicted exactly (the transient taken
    at the lift too, as ``_peak`` does when it exceeds the loss term)."""
    from dlsched.predictors.resources.train_memory import _peak

    exact = _peak(coef, X, 0.0) - np.maximum(X[:, 4], 0.0) + X[:, 4]
    est = coef[2] * X[:, 1] + coef[3] * X[:, 2] + coef[4] * X[:, 3]
    return (y - exact) / np.maximum(est, 1e-9)


def conformal_lift(coef, parts: list, Xtr: np.ndarray, ytr: np.ndarray, Ftr: np.ndarray, Xte: np.ndarray,
                   Fte: np.ndarray, share: float, alpha: float) -> np.ndarray:
    """Conformalised quantile regression of the lift each row needs (:func:`_need`): LightGBM at
    quantile ``alpha`` on graph features, trained on the inner folds' out-of-fold rows; the shift
    that leaves <= ``share`` of them under comes from predicting each inner fold with a regressor
    trained on the others (so it is measured on families that regressor has not seen)."""
    import lightgbm as lgb

    from dlsched.predictors.resources.train_memory import _peak, physical_floor

    def feats(X: np.ndarray, F: np.ndarray) -> np.ndarray:
        total = X[:, 0] + X[:, 1] + X[:, 2] + X[:, 4] + 1.0
        return np.c_[np.log1p(total), X[:, 1] / total, X[:, 2] / total, np.log1p(X[:, 3]), F]

    def model() -> lgb.LGBMRegressor:
        return lgb.LGBMRegressor(objective="quantile", alpha=alpha, n_estimators=150, num_leaves=7,
                                 learning_rate=0.05, min_child_samples=30, verbose=-1, random_state=0)

    Z = [feats(Xtr[m], Ftr[m]) for _, m in parts]
    N = [_need(c, Xtr[m], ytr[m]) for c, m in parts]
    held = []   # (constants, X, y, the regressor's lift) of each inner fold, regressor fit without it
    for k, (ck, mk) in enumerate(parts):
        rest = [j for j in range(len(parts)) if j != k]
        q = model().fit(np.concatenate([Z[j] for j in rest]), np.concatenate([N[j] for j in rest]))
        held.append((ck, Xtr[mk], ytr[mk], q.predict(Z[k])))
    n = sum(len(h[2]) for h in held)

    def under(shift: float) -> float:
        return sum(int(np.sum(_peak(ck, X, np.maximum(L + shift, 1.0)) < y)) for ck, X, y, L in held) / n

    lo, hi = -4.0, 16.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if under(mid) <= share else (mid, hi)
    c = hi
    q = model().fit(np.concatenate(Z), np.concatenate(N))
    lift = np.maximum(q.predict(feats(Xte, Fte)) + c, 1.0)
    return np.maximum(_peak(coef, Xte, lift), physical_floor(Xte, float(coef[0])))


def two_parameter(coef, parts: list, Xtr: np.ndarray, ytr: np.ndarray, Ftr: np.ndarray, Xte: np.ndarray,
                  Fte: np.ndarray, share: float, rule: str) -> np.ndarray:
    """A lift with a second parameter ``g`` picked on a grid: ``margin`` adds g MiB beside the
    lift; ``batch`` makes the lift s · (1 + g / sqrt(batch)). For each g the smallest s leaving
    <= ``share`` of the inner folds' rows under; the g whose inner median ratio is lowest."""
    from dlsched.predictors.resources.train_memory import _peak, physical_floor

    def pred(c, X, F, s: float, g: float) -> np.ndarray:
        if rule == "margin":
            return _peak(c, X, s) + g
        return _peak(c, X, s * (1.0 + g / np.sqrt(2.0 ** F[:, 0])))

    rows = [(c, Xtr[m], Ftr[m], ytr[m]) for c, m in parts]
    n = sum(len(y) for *_, y in rows)

    def under(s: float, g: float) -> float:
        return sum(int(np.sum(pred(c, X, F, s, g) < y)) for c, X, F, y in rows) / n

    grid = [0.0, 128.0, 256.0, 512.0, 768.0, 1024.0, 1536.0, 2048.0] if rule == "margin" else \
        [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    best = (np.inf, 1.0, 0.0)
    for g in grid:
        lo, hi = 0.5, 8.0
        if under(hi, g) > share:
            continue
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if under(mid, g) <= share else (mid, hi)
        med = float(np.median(np.concatenate([pred(c, X, F, hi, g) / y for c, X, F, y in rows])))
        best = min(best, (med, hi, g))
    _, s, g = best
    return np.maximum(pred(coef, Xte, Fte, max(s, 0.5), g), physical_floor(Xte, float(coef[0])))


def fit_predict(Xtr, ytr, wtr, gtr, ctr, Xte, cte, share: float, by_class: bool | str,
                Ftr: np.ndarray | None = None, Fte: np.ndarray | None = None) -> np.ndarray:
    """Fit the constants as the shipped model does; the lift from inner folds by family, one per
    class label when ``by_class`` (the rows' labels ``ctr``/``cte``)."""
    from dlsched.predictors.ml.folds import stable_fold
    from dlsched.predictors.resources.train_memory import (
        INNER_FOLDS,
        TrainingMemoryModel,
        _peak,
        physical_floor,
        smallest_lift,
    )

    coef = TrainingMemoryModel._solve(Xtr, ytr, wtr)
    inner = np.array([stable_fold(f"inner:{g}", INNER_FOLDS) for g in gtr])
    parts = [(TrainingMemoryModel._solve(Xtr[inner != f], ytr[inner != f], wtr[inner != f]), inner == f)
             for f in np.unique(inner)]
    if by_class == "quantile":   # a lift per row: the 98th percentile of measured / unlifted, learnt
        return quantile_lift(coef, parts, Xtr, ytr, Xte, share)
    if isinstance(by_class, str) and by_class.startswith("cqr"):   # cqr:<alpha>
        return conformal_lift(coef, parts, Xtr, ytr, Ftr, Xte, Fte, share, float(by_class[4:]))
    if by_class in ("margin+lift", "batch-curve"):
        return two_parameter(coef, parts, Xtr, ytr, Ftr, Xte, Fte, share, by_class.split("+")[0].split("-")[0])
    if by_class == "margin":   # an additive margin instead of a lift on the estimated parts
        margin = smallest_margin([(c, Xtr[m], ytr[m]) for c, m in parts], share)
        return np.maximum(_peak(coef, Xte, 1.0) + margin, physical_floor(Xte, float(coef[0])))
    labels = np.unique(ctr) if by_class else ["all"]
    pred = np.full(len(Xte), np.nan)
    fallback = smallest_lift([(c, Xtr[m], ytr[m]) for c, m in parts], share, 0.0)
    for lab in labels:
        sel_tr = (ctr == lab) if by_class else np.ones(len(ytr), bool)
        sel_te = (cte == lab) if by_class else np.ones(len(Xte), bool)
        rows = [(c, Xtr[m & sel_tr], ytr[m & sel_tr]) for c, m in parts if (m & sel_tr).any()]
        lift = smallest_lift(rows, share, 0.0) if sum(len(y) for *_, y in rows) >= 20 else fallback
        pred[sel_te] = _peak(coef, Xte[sel_te], lift)
    rest = np.isnan(pred)   # a class the training folds never saw: the pooled lift
    pred[rest] = _peak(coef, Xte[rest], fallback)
    return np.maximum(pred, physical_floor(Xte, float(coef[0])))


def score(rows, share: float, label: Callable | str | None) -> dict[str, float]:
    from dlsched.predictors.ml.folds import stable_fold
    from dlsched.predictors.resources import graph_memory_eval as g

    folds = rows["family"].map(lambda s: stable_fold(s, g.K_FOLDS)).to_numpy()
    X, y, w = g.train_matrix(rows), rows["mem_mib"].to_numpy(float), g.family_weights(rows)
    fam = rows["family"].to_numpy()
    lab = label(rows) if callable(label) else np.array(["all"] * len(rows))
    F = row_features(rows)
    pred = np.full(len(y), np.nan)
    for f in np.unique(folds):
        te = folds == f
        mode = label if isinstance(label, str) else label is not None
        pred[te] = fit_predict(X[~te], y[~te], w[~te], fam[~te], lab[~te], X[te], lab[te], share, mode,
                               F[~te], F[te])
    r = pred / y
    return {"under0": 100 * np.mean(r < 1), "under10": 100 * np.mean(r < 0.9), "median": np.median(r),
            "mape": 100 * np.mean(np.abs(r - 1)), "p90": np.quantile(r, 0.9)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--only", default="", help="score only the variants whose name contains this")
    args = ap.parse_args(argv)
    rows = load_rows(args.shared)
    variants = [("one lift, <= 2 % under (shipped)", 0.02, None), ("one lift, <= 3 %", 0.03, None),
                ("one lift, <= 5 %", 0.05, None), ("an additive margin (MiB), <= 2 %", 0.02, "margin"),
                ("a learnt lift per row (LightGBM at the 99th percentile)", 0.01, "quantile"),
                ("a learnt lift per row (LightGBM at the 99.5th percentile)", 0.005, "quantile"),
                ("a lift per model class, <= 2 % each", 0.02, classes),
                ("a lift per batch band, <= 2 % each", 0.02, batch_bands),
                ("a lift per batch band, <= 1.5 % each", 0.015, batch_bands),
                ("a lift per batch band, <= 1 % each", 0.01, batch_bands),
                ("a lift and a margin (MiB), both fitted, <= 2 %", 0.02, "margin+lift"),
                ("a lift falling with batch, s (1 + g / sqrt(batch)), <= 2 %", 0.02, "batch-curve"),
                ("a lift falling with batch, s (1 + g / sqrt(batch)), <= 1.75 %", 0.0175, "batch-curve"),
                ("a lift falling with batch, s (1 + g / sqrt(batch)), <= 1.5 %", 0.015, "batch-curve"),
                ("conformal lift per row (LightGBM median of the needed lift, shifted), <= 2 %", 0.02, "cqr:0.5"),
                ("conformal lift per row (LightGBM 90th pct of the needed lift, shifted), <= 2 %", 0.02, "cqr:0.9")]
    variants = [v for v in variants if args.only in v[0]]
    print(f"TIMM rows: {len(rows)}, 5 folds by family, out of fold")
    print("| lift rule | under > 0 % | under > 10 % | median pred/measured | 90th pct | MAPE |")
    print("|---|---|---|---|---|---|")
    for name, share, label in variants:
        s = score(rows, share, label)
        print(f"| {name} | {s['under0']:.1f} % | {s['under10']:.1f} % | {s['median']:.2f} | {s['p90']:.2f} | "
              f"{s['mape']:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
