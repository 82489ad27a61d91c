"""``dlsched sweep SPEC.yaml --out DIR``: a resumable grid of simulations, locally or on Dask."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from dlsched.cli.common import clear_errors, console, out

HEADLINE = ("avg_jct", "avg_queue_delay", "queued_jobs", "gpu_utilization")


def _print_stats(stats, params: list[str], replicate: str, baseline: dict) -> None:
    from rich.table import Table

    keys = [p for p in params if p != replicate and p in stats.columns]
    table = Table(title=f"mean ± 95 % CI over {replicate}" + (f"; ratio to {baseline}" if baseline else ""))
    for k in [*keys, "n"]:
        table.add_column(k)
    figures = [f for f in HEADLINE if f"{f}.mean" in stats.columns]
    for f in figures:
        table.add_column(f, justify="right")
    for _, row in stats.iterrows():
        cells = [str(row[k]) for k in keys] + [str(row["n"])]
        for f in figures:
            mean, ci = row[f"{f}.mean"], row[f"{f}.ci95"]
            text = f"{mean:,.3f}" if f == "gpu_utilization" else f"{mean:,.0f}"
            if not math.isnan(ci):
                text += f" ± {ci:,.3f}" if f == "gpu_utilization" else f" ± {ci:,.0f}"
            ratio = row.get(f"{f}.ratio")
            if ratio is not None and not math.isnan(ratio):
                text += f" (×{ratio:.3f})"
            cells.append(text)
        table.add_row(*cells)
    out.print(table)


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep(
        spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="Sweep spec (docs/sweeps.md).")],
        out_dir: Annotated[str, typer.Option("--out", help="Sweep directory (resumed when it exists).")],
        workers: Annotated[int, typer.Option("--workers", help="Local processes running cells.")] = 1,
        scheduler: Annotated[str | None, typer.Option(
            "--scheduler", help="Run on a dask.distributed cluster at tcp://HOST:PORT instead.")] = None,
        connect_timeout: Annotated[float, typer.Option(
            "--connect-timeout", help="Seconds to wait for the Dask scheduler and its first worker.")] = 30.0,
        baseline: Annotated[str | None, typer.Option(
            "--baseline", help="Ratios to this configuration, e.g. policy=fifo (overrides the spec's).")] = None,
        progress_every: Annotated[float, typer.Option(
            "--progress-every", help="Seconds between progress lines while no cell finishes.")] = 10.0,
    ) -> None:
        """Run every cell of a sweep once; write DIR/results.parquet and DIR/stats.parquet."""
        from dlsched.sweep.run import run_sweep
        from dlsched.sweep.spec import load_spec, parse_baseline
        from dlsched.sweep.stats import seed_stats

        with clear_errors():
            if not out_dir.strip():
                raise ValueError("--out is empty: name the sweep directory (e.g. --out runs/sweep)")
            out_dir = Path(out_dir)
            from dlsched.cli.checks import check_out_dir

            check_out_dir(out_dir, "--out")   # before the cells run, not when the first one is stored
            spec = load_spec(spec_path)
            if baseline is not None:
                spec.baseline = parse_baseline(baseline)
            from dlsched.cli.checks import check_job_count

            for jobs in {c.params["jobs"] for c in spec.cells if "jobs" in c.params and "trace" not in c.params}:
                check_job_count(jobs, "simulate", "jobs")  # the largest built-in workload fits in memory
            if scheduler:
                import importlib.util

                if importlib.util.find_spec("distributed") is None:
                    raise ValueError(f"--scheduler {scheduler}: running on a Dask cluster needs the 'sweep' extra "
                                     "(dask.distributed is not installed): pip install 'dlsched[sweep]'")
                from dlsched.sweep.engine_dask import DaskEngine

                engine = DaskEngine(scheduler, connect_timeout)
            else:
                from dlsched.sweep.engine_local import LocalEngine

                engine = LocalEngine(workers)

            def emit(line: str) -> None:
                console.print(Text(line), soft_wrap=True, highlight=False)

            try:
                result = run_sweep(spec, out_dir, engine, emit, progress_every)
            except KeyboardInterrupt:
                result = None
            if result is None:
                console.print(Text(f"interrupted: finished cells are kept in {out_dir}; run the same command "
                                   "again to resume"), soft_wrap=True)
            if result is None:
                raise SystemExit(130)  # not typer.Exit: clear_errors would take it for an error
            params = list(dict.fromkeys(k for c in spec.cells for k in c.params))
            stats, missing = seed_stats(result.table, params, spec.replicate, spec.baseline)
        if len(stats):
            stats.to_parquet(out_dir / "stats.parquet", index=False)
            _print_stats(stats, spec.swept, spec.replicate, spec.baseline)
        if missing:
            console.print(f"[yellow]{missing} configurations have no baseline cell to divide by (ratio empty)[/]")
        console.print(f"{result.done} cells run, {result.skipped} finished earlier, {result.failed} failed; "
                      f"results in [bold]{out_dir / 'results.parquet'}[/]")
        if result.failed:
            console.print(f"[red]{result.failed} cells failed: their errors are in results.parquet (column "
                          "'error') and DIR/cells/<id>/failed.json; running the sweep again retries them[/]")
            raise typer.Exit(1)
