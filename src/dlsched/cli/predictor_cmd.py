"""``dlsched predictor``: train a utilisation/memory predictor and print the evaluation tables."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dlsched.predictors.resources.graph_source import FeatureError
from dlsched.predictors.resources.persist import PredictorFormatError
from dlsched.predictors.resources.profiles import ProfileError

sub = typer.Typer(help="Train and evaluate the GPU utilisation / memory predictors.", no_args_is_help=True)
USER_ERRORS = (ProfileError, FeatureError, PredictorFormatError, ValueError, KeyError)


def _default_shared() -> Path:
    env = os.environ.get("DLSCHED_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3].parent / "shared"


def _fail(exc: BaseException) -> None:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


@sub.command()
def train(
    ctx: typer.Context,
    profiles: Annotated[Path, typer.Argument(
        help="profile CSV (columns model, batchsize, gpu_util; optional amp, gmem, gpu, onnx)")],
    out: Annotated[Path, typer.Option("--out", help="directory to write the predictor into")] = Path("runs/predictor"),
    regressor: Annotated[str, typer.Option(help="auto (best leave-one-model-out) | robust_linear | random_forest | "
                                                "xgboost | lightgbm | linear | dummy_mean")] = "auto",
    n_estimators: Annotated[int, typer.Option(help="trees for the tree models")] = 300,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    license_note: Annotated[str, typer.Option("--license", help="license of the training data (into the manifest)")] = "",
) -> None:
    """Fit a predictor on PROFILES.csv, report leave-one-model-out error, save it under --out."""
    from dlsched.cli.checks import check_out_dir
    from dlsched.predictors.resources.train import train as run_train

    try:
        check_out_dir(out)
        from dlsched.cli import progress

        with progress.Activity(f"predictor train: {profiles.name}", progress.enabled(ctx)):
            path, report = run_train(profiles, out, regressor, n_estimators, seed, license_note=license_note)
    except USER_ERRORS as exc:
        _fail(exc)
    regressor = json.loads(path.read_text())["util_regressor"]
    lomo = report["leave_one_model_out"][regressor]
    typer.echo(f"saved {path}  ({regressor}; leave-one-model-out RMSLE {lomo['rmsle']:.3f} +- {lomo['rmsle_std']:.3f}, "
               f"MAE {lomo['mae']:.1f} points)")


def _fmt(v: Any, std: Any = None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    s = f"{v:.{digits}f}"
    return s if std is None or (isinstance(std, float) and math.isnan(std)) else f"{s} ± {std:.{digits}f}"


def _finite(obj: Any) -> Any:
    """NaN/inf -> null, so the output is strict JSON (a constant fold has no Spearman)."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _render(report: dict[str, Any]) -> None:
    from rich.table import Table

    from dlsched.cli.tables import FittingConsole

    con = FittingConsole()  # tables fitted to the terminal: no number is ever cut
    util_tables = {**report.get("utilization", {}), **report.get("utilization_aux", {})}
    for split, res in util_tables.items():
        if not isinstance(res, dict) or "dummy_mean" not in res:
            continue
        info = util_tables.get(split + "_info", "")
        t = Table(title=f"GPU utilisation, {split.replace('_', ' ')} (fold mean ± std | pooled) {info}")
        for col in ("regressor", "RMSLE", "MAE (points)", "Spearman", "pooled RMSLE", "pooled Spearman"):
            t.add_column(col, justify="left" if col == "regressor" else "right")
        for name, r in res.items():
            pooled = r.get("pooled", {})
            t.add_row(name, _fmt(r["rmsle"], r.get("rmsle_std")), _fmt(r["mae"], r.get("mae_std"), 1),
                      _fmt(r["spearman"], r.get("spearman_std"), 2), _fmt(pooled.get("rmsle")),
                      _fmt(pooled.get("spearman"), None, 2))
        con.print(t)
    for table, res in report.get("memory", {}).items():
        if table.endswith("_info"):
            continue
        info = report["memory"].get(table + "_info", {})
        t = Table(title=f"Peak memory, {table} {info}")
        for col in ("estimator", "under > 0 %", "under > 10 %", "median ratio", "MAPE %"):
            t.add_column(col, justify="left" if col == "estimator" else "right")
        for name, r in res.items():
            t.add_row(name, _fmt(r.get("under0"), r.get("under0_std"), 1), _fmt(r["under10"], r.get("under10_std"), 1),
                      _fmt(r.get("median_ratio"), r.get("median_ratio_std"), 2), _fmt(r["mape"], r.get("mape_std"), 1))
        con.print(t)
    _render_training_memory(con, report.get("training_memory", {}))
    for name, tgt in {**report.get("util_targets", {}), **report.get("training_memory", {}).get("targets", {})}.items():
        if isinstance(tgt, dict) and "met" in tgt:
            bound = f"<= {tgt['max']}" if "max" in tgt else f">= {tgt['min']}"
            con.print(f"target {name}: {_fmt(tgt['value'])} (target {bound}) {'met' if tgt['met'] else 'NOT met'}")
    measured = report.get("measured_jobs", {})
    if "missing" in measured:
        con.print(f"[yellow]held-out GPU measurements:[/] {measured['missing']}")
    for run in measured.get("runs", []):
        mem = run.get("memory")
        con.print(f"held-out run {run['run']} ({run.get('gpu', '?')}, stack {run.get('stack', '?')}): "
                  + (f"{run['rows']} jobs, memory MAPE {mem['mape']:.1f} %, under-predicted >10 % {mem['under10']:.1f} %, "
                     f"band coverage {mem['band_coverage']:.2f}" if mem else run.get("skipped", "nothing scored")))
    for note in report.get("notes", []):
        con.print(f"[yellow]note:[/] {note}")


def _render_training_memory(con: Any, res: dict[str, Any]) -> None:
    from rich.table import Table

    if "skipped" in res:
        con.print(f"[yellow]training memory:[/] {res['skipped']}")
        return
    if not res:
        return
    for est in ("training_memory",):   # the figures that decide, before any table
        for src, r in res.get(est, {}).items():
            con.print(f"{est} ({src}): under-predicted {_fmt(r.get('under0'), None, 1)} % of {r['rows']} rows "
                      f"(by > 10 %: {_fmt(r['under10'], None, 1)} %); median predicted/measured "
                      f"{_fmt(r.get('median_ratio'), None, 2)}, MAPE {_fmt(r['mape'], None, 1)} %")
    t = Table(title=f"Peak training memory, 5-fold by family (out of fold) {res.get('info', {})}")
    for col in ("estimator", "rows", "under > 0 %", "under > 10 %", "median ratio", "MAPE %", "band coverage"):
        t.add_column(col, justify="left" if col == "estimator" else "right")
    for est in ("training_memory", "faketensor", "faketensor+1GiB", "horus_eq2+1000MiB"):
        for src, r in res.get(est, {}).items():
            t.add_row(f"{est} ({src})", str(r["rows"]), _fmt(r.get("under0"), None, 1), _fmt(r["under10"], None, 1),
                      _fmt(r.get("median_ratio"), None, 2), _fmt(r["mape"], None, 1),
                      _fmt(r.get("band_coverage"), None, 2))
    con.print(t)
    ev = res.get("evaluation_set", {})
    for line in ev.get("scored", []):
        con.print(f"scored: {line}")
    for line in ev.get("missing", []):
        con.print(f"[yellow]missing:[/] {line}")
    if "not_scored" in res.get("targets", {}):
        con.print(f"[yellow]targets not scored:[/] {res['targets']['not_scored']}")
    if "band_coverage_stack_unknown" in res:
        con.print(f"band coverage where the stack is unknown (every known stack's context): "
                  f"{res['band_coverage_stack_unknown']:.2f}")
    demo = res.get("calibration_demo_family", {})
    if "before" in demo:
        con.print(f"calibration, family {demo['family']} ({demo['models']} models, fitted without it): "
                  f"{demo['n_observed']} observed jobs -> MAPE on its other models {_fmt(demo['before']['mape'], None, 1)} % "
                  f"-> {_fmt(demo['after']['mape'], None, 1)} %, under-predicted >10 % "
                  f"{_fmt(demo['before']['under10'], None, 1)} % -> {_fmt(demo['after']['under10'], None, 1)} % "
                  f"(mean of {demo['draws']} draws)")
    elif "skipped" in demo:
        con.print(f"[yellow]calibration demo:[/] {demo['skipped']}")


@sub.command()
def evaluate(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
    shared: Annotated[Path | None, typer.Option(
        help="folder holding profiles/ (default: ../shared or $DLSCHED_SHARED)")] = None,
    profiles: Annotated[Path | None, typer.Option(
        help="utilisation profile CSV (default: <shared>/profiles/lucid/single_data.csv)")] = None,
    n_estimators: Annotated[int, typer.Option(help="trees for the tree models")] = 300,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    timm_onnx: Annotated[Path | None, typer.Option(
        help="TIMM graphs from scripts/export_timm_onnx.py (default: ~/.cache/dlsched/timm-onnx)")] = None,
) -> None:
    """The EVALUATION.md tables: utilisation (leave-one-model/family-out, random split) and memory."""
    from dlsched.predictors.resources.report import full_report

    shared = shared or _default_shared()
    if timm_onnx is not None and not timm_onnx.is_dir():
        _fail(ValueError(f"--timm-onnx {timm_onnx}: not a folder (export graphs with scripts/export_timm_onnx.py)"))
    try:
        from dlsched.cli import progress

        with progress.Activity("predictor evaluate: all splits and regressors", progress.enabled(ctx)):
            report = full_report(shared, profiles, n_estimators, seed, timm_onnx)
    except USER_ERRORS as exc:
        _fail(exc)
    if json_out:
        sys.stdout.write(json.dumps(_finite(report), indent=2) + "\n")
    else:
        _render(report)


@sub.command()
def calibrate(
    observations: Annotated[Path, typer.Argument(
        help="CSV of observed jobs in the order they ran: model (or onnx), batchsize, mem_mib; optional gpu, "
             "stack, optimizer, amp, seq, attention")],
    out: Annotated[Path, typer.Option("--out", help="directory to write the calibrated predictor into")],
    predictor_dir: Annotated[Path | None, typer.Option(
        "--predictor", help="predictor to start from (default: the shipped one)")] = None,
    gpu: Annotated[str, typer.Option(help="GPU type of rows without a gpu column (one `predict --gpu` "
                                          "accepts)")] = "",
    stack: Annotated[str, typer.Option(help="stack label of rows without a stack column (default unknown, "
                                            "as `predict` assumes)")] = "",
) -> None:
    """Learn an intercept and a factor per (GPU type, stack, model family) from observed peaks, as
    the live service does (dlsched.predictors.resources.stack_calibration), and save the
    predictor, with the observed-peak guard, under --out. Raw predictions are made exactly as
    `predict --stack` makes them, so the correction is applied to what it was learnt on."""
    from dlsched.predictors.resources.calibrate_observed import calibrate_observed

    try:
        lines, path = calibrate_observed(observations, out, predictor_dir, gpu, stack)
    except USER_ERRORS as exc:
        _fail(exc)
    for line in lines:
        typer.echo(line)
    typer.echo(f"saved {path}")


def register(app: typer.Typer) -> None:
    """Attach ``predictor`` to the main ``dlsched`` app."""
    app.add_typer(sub, name="predictor")
