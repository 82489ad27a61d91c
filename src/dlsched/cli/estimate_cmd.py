"""``dlsched estimate``: online accuracy of the QSSF duration estimator on a trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

_LABELS = {
    "global_mean": "baseline: global mean", "gpu_mean": "baseline: per-GPU-count mean",
    "rolling": "P_R rolling (Alg. 1)", "gbdt": "P_M LightGBM", "combined": "combined λ-blend",
    "combined_log": "combined, log blend", "combined_linear": "combined, linear blend",
}


def register(app: typer.Typer) -> None:
    """Add the ``estimate`` command to the main app."""
    app.command("estimate")(estimate)


def _load(trace: Path | None, trace_format: str, start: str | None, end: str | None,
          jobs: int, seed: int) -> Any:
    if trace is None:
        from dlsched.traces.synthetic import generate
        return generate(jobs=jobs, seed=seed)
    try:
        from dlsched.traces import load_trace
    except ImportError:  # pragma: no cover - older package layout
        from dlsched.traces.api import load_trace
    return load_trace(trace, fmt=trace_format, start=start, end=end)


def _table(res: dict) -> None:
    from rich.table import Table

    from dlsched.cli.tables import FittingConsole

    title = (f"{res['trace'] or 'trace'}: {res['evaluated']:,} of {res['jobs']:,} jobs scored online "
             f"(λ={res['lam']}, {res['blend']} blend, {res['refits']} refits every "
             f"{res['refit_every_s']:g} s, {res['seconds']:.1f} s)")
    table = Table(title=title)
    for col in ("estimate", "MAE (s)", "median |log err|", "Spearman (duration)", "Spearman (GPU time)"):
        table.add_column(col, justify="left" if col == "estimate" else "right")
    for name, m in res["methods"].items():
        table.add_row(_LABELS.get(name, name), f"{m['mae_s']:,.0f}", f"{m['median_abs_log_error']:.3f}",
                      f"{m['spearman']:.3f}", f"{m['spearman_gpu_time']:.3f}")
    console = FittingConsole()  # no number is ever cut
    console.print(table)
    console.print(f"GBDT features that vary: {', '.join(res['features'])}")
    console.print("P_R branches: " + ", ".join(f"{k} {v:,}" for k, v in sorted(res["rolling_branches"].items())))


def estimate(
    ctx: typer.Context,
    trace: Path | None = typer.Option(None, "--trace", help="Trace file (default: built-in synthetic workload)."),
    trace_format: str = typer.Option("auto", "--trace-format", help="Trace format, or auto-detect."),
    start: str | None = typer.Option(None, "--start", help="First submit time kept (e.g. 2017-10-01)."),
    end: str | None = typer.Option(None, "--end", help="Last submit time kept (e.g. '2017-11-30 23:59:00')."),
    lam: float = typer.Option(0.1, "--lam", min=0.0, max=1.0, help="Weight λ of the rolling estimate P_R."),
    blend: str = typer.Option("linear", "--blend", help="linear (paper) or log (geometric) λ-blend."),
    anonymous: str = typer.Option("vc_gpus", "--anonymous",
                                  help="P_R for jobs without a user: vc_gpus (recent same VC+GPUs) or new_user."),
    refit_every: float = typer.Option(86400.0, "--refit-every", help="GBDT refit period (simulated s)."),
    n_estimators: int = typer.Option(100, "--n-estimators", help="LightGBM boosting rounds."),
    jobs: int = typer.Option(5000, "--jobs", help="Synthetic workload size (without --trace)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Synthetic workload seed (without --trace)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Score the QSSF duration estimates (P_R, P_M, blend, baselines) online in time order:
    each job is estimated at submission from jobs that ended before it."""
    from dlsched.predictors.duration.accuracy import duration_accuracy  # lazy: keeps `dlsched --help` fast

    try:
        if trace is None:
            from dlsched.cli.checks import check_job_count

            check_job_count(jobs, "simulate")
        from dlsched.cli import progress

        with progress.Activity("estimate: loading, then scoring every job online", progress.enabled(ctx)):
            from dlsched.core.truth import duration as recorded  # the score's yardstick

            data = _load(trace, trace_format, start, end, jobs, seed)
            res = duration_accuracy(data, list(map(recorded, data.jobs)), lam=lam, refit_every=refit_every,
                                    blend=blend, anonymous=anonymous, n_estimators=n_estimators)
    except (ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    if as_json:
        typer.echo(json.dumps(res, indent=2))
    else:
        _table(res)
