#!/usr/bin/env python3
"""What the TIMM rows that the training-memory model under-predicts hold beyond their tensors
(issue 36, by measurement): the shipped fit scored out of fold (5 folds by family, as
``dlsched predictor evaluate``) beside FakeTensor's peak of the same step, which GPUMemNet's
table records for every row. FakeTensor runs the model's own PyTorch code and counts every
tensor it allocates (weights, gradients, optimizer state, activations, temporaries), so
measured - FakeTensor is the memory no tensor holds: the CUDA context and libraries, cuDNN's
convolution workspaces (autotuned: timm's ``train.py`` sets ``cudnn.benchmark``) and the
caching allocator's rounding and cached blocks.

    python scripts/memory_excess.py [--shared ../shared]

It prints (markdown): whether the prediction covers FakeTensor's tensors; that non-tensor memory
by batch; each under-predicted row beside the same model's other batches; the test of a
batch-independent term (a per-model or per-layer constant, the allocator's per-tensor rounding,
a workspace set by the filters: each is the same at every batch of a model, so it cannot make
one batch's non-tensor memory exceed the others');
and how the rest follows what the graph gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
#: a row's non-tensor memory this far above the same model's other batches is a spike (MiB)
SPIKE_MIB = 2048.0


def with_excess(d: pd.DataFrame) -> pd.DataFrame:
    """Per row: non-tensor memory (measured - FakeTensor), the median of the same model's other
    batches, the spike (the difference) and the deficit (measured - prediction)."""
    d = d.sort_values(["model", "batch"]).copy()
    d["nontensor"] = d["mem_mib"] - d["fake_last_mib"]

    def others(s: pd.Series) -> pd.Series:
        v = s.to_numpy(float)
        return pd.Series([np.median(np.delete(v, i)) if len(v) > 1 else np.nan for i in range(len(v))],
                         index=s.index)

    d["others"] = d.groupby("model")["nontensor"].transform(others)
    d["spike"] = d["nontensor"] - d["others"]
    d["deficit"] = d["mem_mib"] - d["pred"]
    return d


def with_room(d: pd.DataFrame, context_mib: float) -> pd.DataFrame:
    """``room``: the most a batch-independent term (a per-model or per-layer constant, the
    allocator's rounding of weight-sized blocks, a workspace set by the filters alone) can add to
    a row beyond the context. Such a term is the same MiB at every batch of a model, so it is at
    most the model's smallest non-tensor memory less the context. ``covered``: room >= deficit."""
    d = d.copy()
    d["room"] = d.groupby("model")["nontensor"].transform("min") - context_mib
    d["covered"] = np.where(d["room"] >= d["deficit"], "yes", "no")
    return d


def md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in df.itertuples(index=False):
        out.append("| " + " | ".join(f"{v:,.0f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--conv-shapes", type=Path, default=None,
                    help="CSV of scripts/timm_conv_shapes.py: compare the architectures' convolutions")
    args = ap.parse_args(argv)
    from memory_decompose import oof_terms
    from memory_tradeoff import load_rows

    from dlsched.predictors.resources.context import FIT_STACK, stack_context

    d = with_excess(oof_terms(load_rows(args.shared)))
    n = len(d)
    under, under10 = d["ratio"] < 1, d["ratio"] < 0.9
    ctx = float(np.median(d["exact"] - d["state_mib"] - d["loss_mib"]))
    print(f"TIMM rows: {n} ({d['model'].nunique()} architectures), out of fold; under-predicted "
          f"{int(under.sum())}, by > 10 % {int(under10.sum())}")
    print(f"\n1. tensors: rows predicted below FakeTensor's tensor peak: {int((d['pred'] < d['fake_last_mib']).sum())}; "
          f"median prediction / FakeTensor {np.median(d['pred'] / d['fake_last_mib']):.2f}. Every under-predicted "
          f"row's deficit is memory outside the tensors (the fitted context, the {FIT_STACK} stack's intercept, is "
          f"{ctx:,.0f} MiB; its parts: {stack_context(FIT_STACK, 'A100', ctx).parts()})")
    q = d.groupby("batch")["nontensor"].quantile([0.1, 0.5, 0.9, 0.98]).unstack()
    q.columns = [f"p{int(100 * c)}" for c in q.columns]
    print("\n2. non-tensor memory (measured - FakeTensor, MiB) by batch\n"
          + md(q.reset_index().assign(batch=lambda x: x["batch"].astype(int).astype(str),
                                      rows=d.groupby("batch").size().to_numpy().astype(str))))
    sp = d["spike"] > SPIKE_MIB
    print(f"\nrows whose non-tensor memory exceeds the median of the same model's other batches by > "
          f"{SPIKE_MIB:,.0f} MiB: {int(sp.sum())} ({100 * sp.mean():.1f} %), by batch "
          f"{d[sp].groupby('batch').size().to_dict()}; {int((sp & under).sum())} of them under-predicted")
    d = with_room(d, ctx)
    cols = ["model", "batch", "mem_mib", "fake_last_mib", "pred", "deficit", "nontensor", "others", "spike",
            "room", "covered"]
    u = d[under].sort_values("ratio")[cols].assign(batch=lambda x: x["batch"].astype(str))
    print("\n3. the under-predicted rows (MiB). others: median non-tensor memory of the model's other batches; "
          "spike: the row's less that; room: the most a batch-independent term can add beyond the fitted "
          "context (the model's smallest non-tensor memory less the context); covered: room >= deficit\n"
          + md(u))
    ok = under & (d["covered"] == "yes")
    print(f"\n4. a batch-independent term could cover {int(ok.sum())} of the {int(under.sum())} under-predicted rows "
          f"({int((ok & under10).sum())} of the {int(under10.sum())} under by > 10 %); median room over all "
          f"architectures {np.median(d.groupby('model')['room'].first()):,.0f} MiB; rows whose spike alone exceeds "
          f"their deficit: {int((under & (d['spike'] >= d['deficit'])).sum())} under, "
          f"{int((under10 & (d['spike'] >= d['deficit'])).sum())} under by > 10 %")
    wide = d.groupby("model")["nontensor"].agg(lambda s: s.max() - s.min())
    print(f"\nwithin-model range of non-tensor memory (max - min over batches, MiB): median {wide.median():,.0f}, "
          f"90th pct {wide.quantile(0.9):,.0f}; the under-predicted rows' models: "
          f"median {wide[d[under]['model'].unique()].median():,.0f}")
    # what the graph features say about the non-tensor memory above the model's minimum
    above = d["nontensor"] - d["room"] - ctx
    feats = {"batch": d["batch"], "saved_conv_mib": d["saved_conv_mib"], "saved_mib": d["saved_mib"],
             "param_mib": d["param_mib"], "max_tensor_mib": d["max_tensor_mib"],
             "FakeTensor peak": d["fake_last_mib"]}
    print("\n5. Spearman rho of the non-tensor memory above the model's minimum with what the graph gives: "
          + ", ".join(f"{k} {pd.Series(above).corr(pd.Series(v), method='spearman'):.2f}" for k, v in feats.items()))
    per = (above / d["fake_last_mib"]).groupby(d["model"]).max()
    top = per.sort_values(ascending=False).head(15)
    print("the 15 architectures with the largest (non-tensor above the minimum) / FakeTensor at any batch: "
          + ", ".join(f"{m} {v:.1f}" for m, v in top.items()))
    print("\n" + without_spikes(args.shared))
    if args.conv_shapes is not None:
        print("\n" + conv_report(d, per, args.conv_shapes, under))
    return 0


def without_spikes(shared: Path) -> str:
    """The evaluation refitted on the rows with every spike (> SPIKE_MIB) replaced by FakeTensor's
    peak plus the model's usual non-tensor memory: what the lift and the median pay for the
    spikes, and what is left when they are gone (a counterfactual, never a fit that ships)."""
    from dlsched.predictors.resources import graph_memory_eval as g

    rows, _ = g.timm_rows(shared / "profiles" / "itu_gpumem" / "timm_faketensor_vs_measured_memory.csv")
    d = with_excess(rows.assign(pred=np.nan))
    sp = (d["spike"] > SPIKE_MIB).to_numpy()
    clean = d.copy()
    clean.loc[sp, "mem_mib"] = clean.loc[sp, "fake_last_mib"] + clean.loc[sp, "others"]
    lines = ["7. the fit scored as `predictor evaluate` does, on the measured rows and with the "
             f"{int(sp.sum())} spikes (> {SPIKE_MIB:,.0f} MiB) replaced by FakeTensor + the model's usual non-tensor "
             "memory", "| rows | under > 0 % | under > 10 % | median ratio | MAPE |", "|---|---|---|---|---|"]
    for name, data in (("measured", d), ("spikes replaced", clean)):
        e = g.evaluate(data)["training_memory"]["all"]
        lines.append(f"| {name} | {e['under0']:.1f} % | {e['under10']:.1f} % | {e['median_ratio']:.2f} | "
                     f"{e['mape']:.1f} % |")
    return "\n".join(lines)


def conv_report(d: pd.DataFrame, per: pd.Series, path: Path, under: pd.Series) -> str:
    """The convolutions (``scripts/timm_conv_shapes.py``) of the architectures with an
    under-predicted row against the others', and how they rank the non-tensor memory."""
    if not path.is_file():
        return f"6. no conv-shape table at {path} (run scripts/timm_conv_shapes.py)"
    c = pd.read_csv(path)
    c = c[c["status"] == "ok"].set_index("model")
    c = c[c.index.isin(per.index)]
    c["dw_share"] = c["depthwise_in_mib"] / c["conv_in_mib"]
    c["grouped_share"] = (c["depthwise_in_mib"] + c["grouped_in_mib"]) / c["conv_in_mib"]
    c["excess"] = per.reindex(c.index)
    missed = set(d.loc[under, "model"])
    c["missed"] = c.index.isin(missed)
    feats = ["n_conv", "n_depthwise", "n_grouped", "dw_share", "grouped_share", "conv_in_mib", "max_in_mib",
             "max_kernel", "n_large_kernel"]
    lines = [f"6. convolutions of {len(c)} architectures ({int(c['missed'].sum())} with an under-predicted row), "
             "from their timm code (per sample); medians, and Spearman rho with the (non-tensor above the minimum) / "
             "FakeTensor ratio above", "| feature | with an under row | the others | rho |", "|---|---|---|---|"]
    for f in feats:
        rho = c[f].corr(c["excess"], method="spearman")
        lines.append(f"| {f} | {c.loc[c['missed'], f].median():.2f} | {c.loc[~c['missed'], f].median():.2f} | "
                     f"{rho:.2f} |")
    has = (c["n_depthwise"] + c["n_grouped"]) > 0
    lines.append(f"\narchitectures with grouped or depthwise convolutions: {int((has & c['missed']).sum())} of the "
                 f"{int(c['missed'].sum())} with an under row, {int((has & ~c['missed']).sum())} of the "
                 f"{int((~c['missed']).sum())} others")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
