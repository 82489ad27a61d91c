#!/usr/bin/env python3
"""What the context reserved for a job of unknown stack does (issue 36 point 1): for each known
stack's context taken as the reserve, the under- and over-prediction of the shipped predictor on
measured jobs (Lucid's 66, ``docs/examples/observed.csv``'s six A100 jobs) and the OOM crashes of
Horus on horus-wlarge (2 jobs per GPU, 10 seeds) on the built-in and Lucid truths.

    python scripts/unknown_stack_check.py [--seeds 10] [--no-sim]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
STACKS = ("lazy", "eager", "gpumemnet-a100", "lucid")


def measured_sets(shared: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(terms, measured MiB) of Lucid's rows and of the shipped observed example."""
    import pandas as pd

    from dlsched.predictors.resources import graph_memory_eval as g
    from dlsched.predictors.resources.graph_source import graph_features
    from dlsched.predictors.resources.train_memory import JobMeta, memory_terms

    rows, _ = g.lucid_rows(shared / "profiles" / "lucid" / "single_data.csv")
    out = {"Lucid (66 jobs)": (g.train_matrix(rows), rows["mem_mib"].to_numpy(float))}
    obs = pd.read_csv(REPO / "docs" / "examples" / "observed.csv")
    X = [memory_terms(graph_features(r.model, int(r.batchsize)), JobMeta(r.optimizer, bool(r.amp)))
         for r in obs.itertuples()]
    out["observed.csv (6 A100 jobs)"] = (np.asarray(X), obs["mem_mib"].to_numpy(float))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--no-sim", action="store_true", help="skip the simulated OOM counts")
    args = ap.parse_args(argv)
    from dlsched.predictors.resources.context import stack_context
    from dlsched.predictors.resources.default import load_default

    model = load_default().mem_model
    sets = measured_sets(args.shared)
    head = ["reserve = context of", "MiB (A100)"]
    for name in sets:
        head += [f"{name}: under > 0 %", "under > 10 %", "median pred/measured"]
    if not args.no_sim:
        head += ["OOM crashes a run, built-in truth", "Lucid truth"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    sys.path.insert(0, str(REPO / "scripts"))
    from oom_causes import measure

    for stack in STACKS:
        ctx = stack_context(stack, "A100", float(model.coef_[0])).total_mib
        cells = [stack, f"{ctx:,.0f}"]
        for X, y in sets.values():
            p = model.predict(X, ctx)
            cells += [f"{100 * np.mean(p < y):.1f} %", f"{100 * np.mean(p < 0.9 * y):.1f} %",
                      f"{np.median(p / y):.2f}"]
        if not args.no_sim:
            for truth in ("builtin", "lucid"):
                r = measure("horus-wlarge", "horus", list(range(args.seeds)), stack, truth)
                cells.append(f"{statistics.fmean(r['crashes']):.1f}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
