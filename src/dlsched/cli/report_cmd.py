"""``dlsched report DIR``: render a run, comparison or energy replay directory as one HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DirArg = Annotated[Path, typer.Argument(metavar="DIR", help="Run, comparison or energy replay directory.")]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default: DIR/report.html).")]


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the main app."""
    app.command("report")(report)


def report(run_dir: DirArg, out: OutOpt = None) -> None:
    """Write a self-contained HTML report (plots and tables) for a simulator output directory."""
    from dlsched.cli.checks import check_out_file
    from dlsched.report import ReportError, build_report  # lazy: keeps `dlsched --help` fast

    try:
        if out is not None:
            check_out_file(out, "--out")
        path = build_report(run_dir, out)
    except (ReportError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(f"Report written to {path}")
