"""``dlsched interference``: evaluate the pairwise interference models on the measured profiles."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
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


@contextlib.contextmanager
def _user_errors() -> Iterator[None]:
    """``clear_errors``, plus a missing optional dependency (scikit-learn, scipy) as one line."""
    with clear_errors():
        try:
            yield
        except ImportError as exc:
            raise RuntimeError(f"the interference models need the ml extra (pip install 'dlsched[ml]'): {exc}") from None


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

    with _user_errors():
        names = [m.strip() for m in models.split(",") if m.strip()]
        if not names:
            raise ValueError("--models: no model named")
        report = interference_report(profiles, dataset, names)
    if json_out:
        sys.stdout.write(json.dumps(_finite(report), indent=2) + "\n")
    else:
        render(report)


@sub.command()
def predict(
    job: Annotated[str, typer.Option("--job", help="the job, MODEL[:BATCH[:AMP]] as the profile set names it")],
    partners: Annotated[list[str] | None, typer.Option(
        "--with", help="a co-runner (repeat for 3+ jobs); none: rank every measured partner")] = None,
    model: Annotated[str, typer.Option(help="interference model name")] = "horus-curve",
    dataset: Annotated[str, typer.Option(help="profile set to fit on and name jobs from: lucid or gavel")] = "lucid",
    gpu: Annotated[str, typer.Option(help="GPU type (gavel: k80, p100, v100; lucid records none)")] = "",
    profiles: Annotated[Path | None, typer.Option(help="profiles folder (default as for evaluate)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Predicted slowdown of a job next to co-runners, or its measured partners ranked by prediction."""
    from dlsched.predictors.interference.query import find_job, job_name, rank_partners
    from dlsched.predictors.interference.registry import make_model
    from dlsched.profiles import load_gavel, load_lucid

    with _user_errors():
        loaders = {"lucid": load_lucid, "gavel": load_gavel}
        if dataset not in loaders:
            raise ValueError(f"--dataset: unknown value {dataset!r}; choose lucid or gavel")
        ps = loaders[dataset](profiles)
        if dataset == "gavel":  # Gavel measured no utilisation: predict it from the graph, as evaluate does
            from dlsched.predictors.interference.evaluation.utilisation import with_predicted_utilisation

            ps, note = with_predicted_utilisation(ps)
            console.print(f"note: {note}", soft_wrap=True, highlight=False, markup=False)
        me = find_job(ps, job, gpu)
        others = [find_job(ps, spec, gpu) for spec in partners or []]
        fitted = make_model(model).fit(ps.pairs)
        if others:
            result = {"job": job_name(me), "with": [job_name(o) for o in others], "model": model, "gpu": gpu,
                      "slowdown": fitted.slowdown(me, others, gpu),
                      "pairwise": {job_name(o): fitted.slowdown(me, [o], gpu) for o in others}}
        else:
            rows = rank_partners(fitted, ps, me, gpu)
            if not rows:
                raise ValueError(f"job {job_name(me)!r}: no measured partners in {dataset} on {gpu or 'its GPU'}")
            result = {"job": job_name(me), "model": model, "gpu": gpu,
                      "partners": [{"partner": r.partner, "predicted": r.predicted, "measured": r.measured}
                                   for r in rows]}
    if json_out:
        sys.stdout.write(json.dumps(_finite(result), indent=2) + "\n")
    elif others:
        pairs = ", ".join(f"{k} {v:.3f}" for k, v in result["pairwise"].items())
        out.print(f"{result['job']} next to {', '.join(result['with'])}: slowdown {result['slowdown']:.3f} "
                  f"({model}; pairwise: {pairs})", soft_wrap=True, highlight=False)
    else:
        t = Table(title=f"partners of {result['job']} ({dataset}{' ' + gpu if gpu else ''}), by {model}")
        for col in ("partner", "predicted s", "measured s"):
            t.add_column(col, justify="left" if col == "partner" else "right")
        for r in result["partners"]:
            t.add_row(r["partner"], f"{r['predicted']:.3f}", "-" if r["measured"] is None else f"{r['measured']:.3f}")
        out.print(t)


def register(app: typer.Typer) -> None:
    """Attach ``interference`` to the main ``dlsched`` app."""
    from dlsched.cli.pair_check_cmd import add_pair_check

    add_pair_check(sub)
    app.add_typer(sub, name="interference")
