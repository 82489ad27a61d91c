"""``dlsched interference``: evaluate the pairwise interference models on the measured profiles."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import clear_errors, console, out

sub = typer.Typer(help="Interference models: how much slower a job runs next to another on one GPU.",
                  no_args_is_help=True)

COLUMNS = (("MAPE %", "mape", 100), ("RMSE", "rmse", 1), ("rho", "spearman", 1), ("top-1 %", "top1", 100),
           ("top-3 %", "top3", 100), ("regret", "regret_mean", 1), ("regret p95", "regret_p95", 1),
           ("safe AUROC", "safe_auroc", 1))


def _num(x: float, scale: float = 1.0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * scale:.1f}" if scale == 100 else f"{x:.3f}"


def _finite(obj: Any) -> Any:
    """NaN/inf -> None, so that the JSON is strict."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def render(report: dict[str, Any]) -> None:
    """One table per protocol: models x metrics (MAPE as fold mean +- std beside the pooled value)."""
    quoted = report.get("quoted_lucid_mape", {})
    for name, proto in report["protocols"].items():
        t = Table(title=f"{name}: {proto['description']} ({len(proto['folds'])} folds)")
        t.add_column("model")
        t.add_column("MAPE % folds")
        for head, _, _ in COLUMNS:
            t.add_column(head, justify="right")
        for model, r in proto["models"].items():
            folds = f"{100 * r['mape_fold_mean']:.1f} ± {100 * r['mape_fold_std']:.1f}"
            t.add_row(model, folds, *(_num(r[key], scale) for _, key, scale in COLUMNS))
        if name == "lucid-lomo":
            for model, mape in quoted.items():
                t.add_row(f"[dim]{model} (quoted)[/]", "", f"[dim]{100 * mape:.1f}[/]", *[""] * (len(COLUMNS) - 1))
        out.print(t)
    out.print("MAPE/RMSE of s = 1/normalised speed over job sides; rho, top-k and regret rank each job's measured "
              "partners by its predicted slowdown; safe = both s <= 1.10.", soft_wrap=True)
    for note in report.get("notes", []):
        console.print(f"note: {note}", soft_wrap=True, highlight=False, markup=False)


@sub.command()
def evaluate(
    profiles: Annotated[Path | None, typer.Option(
        help="profiles folder holding lucid/ and gavel/ (default: $DLSCHED_PROFILES or ../shared/profiles)")] = None,
    dataset: Annotated[str, typer.Option(help="lucid, gavel or all")] = "all",
    models: Annotated[str, typer.Option(help="comma-separated model names (see registry)")] =
        "constant-1,constant-2,horus-curve,pair-forest",
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Score the models as EVALUATION.md says: Lucid leave-one-model-out, Gavel leave-one-architecture-out
    per GPU type and leave-one-GPU-type-out."""
    from dlsched.predictors.interference.evaluation.report import interference_report

    with clear_errors():
        names = [m.strip() for m in models.split(",") if m.strip()]
        if not names:
            raise ValueError("--models: no model named")
        report = interference_report(profiles, dataset, names)
    if json_out:
        sys.stdout.write(json.dumps(_finite(report), indent=2) + "\n")
    else:
        render(report)


def register(app: typer.Typer) -> None:
    """Attach ``interference`` to the main ``dlsched`` app."""
    app.add_typer(sub, name="interference")
